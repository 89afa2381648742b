//! The bounded spin of a contended lock, before it parks.
//!
//! Exponential backoff: round `i` busy-waits `2^i` CPU hints, for [`ROUNDS`] rounds (63 hints;
//! a `pause` costs ~40 ns on the target, so about 2.5 µs). The lock only spins while nobody is
//! parked: once a thread sleeps, newcomers queue behind it instead of burning time the owner
//! could use.
//!
//! No `sched_yield` rounds: on the 2-CPU machine with 8 threads and a ~1 µs critical section,
//! three yielding rounds after four busy ones cost 10–50% of total throughput against busy-only
//! rounds (`examples/lock_bench.rs` fairness workload, interleaved A/B runs).

use crate::primitive::spin_hint;

/// Rounds of busy-waiting before the lock parks.
#[cfg(not(ufutex_loom))]
const ROUNDS: u32 = 6;
/// Under loom every hint is a scheduling point: one round keeps the models small while still
/// exploring "spin, then park".
#[cfg(ufutex_loom)]
const ROUNDS: u32 = 1;

pub(crate) struct Spin {
    round: u32,
}

impl Spin {
    pub(crate) fn new() -> Spin {
        Spin { round: 0 }
    }

    /// Spin one round; `false` once the budget is spent (then the caller parks).
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        if self.round >= ROUNDS {
            return false;
        }
        for _ in 0..(1u32 << self.round) {
            spin_hint();
        }
        self.round += 1;
        true
    }

    /// Start a fresh budget (after a wakeup).
    pub(crate) fn reset(&mut self) {
        self.round = 0;
    }
}
