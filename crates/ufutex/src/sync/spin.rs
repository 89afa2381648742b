//! The bounded spin of a contended lock, before it parks.
//!
//! Exponential backoff: round `i` busy-waits `2^i` CPU hints for the first [`BUSY_ROUNDS`]
//! rounds, then yields the CPU for the remaining rounds (on an oversubscribed machine the owner
//! may be waiting for our CPU). The lock only spins while nobody is parked: once a thread
//! sleeps, newcomers queue behind it instead of burning time the owner could use. The numbers
//! were chosen with `examples/lock_bench.rs` (see the module docs of `raw_mutex`).

use crate::primitive::{spin_hint, yield_now};

/// Rounds of busy-waiting (2^i hints each) before the spin starts yielding.
#[cfg(not(ufutex_loom))]
const BUSY_ROUNDS: u32 = 4;
/// Total rounds before the lock parks.
#[cfg(not(ufutex_loom))]
const ROUNDS: u32 = 7;

// Under loom every hint is a scheduling point: one round keeps the models small while still
// exploring "spin, then park".
#[cfg(ufutex_loom)]
const BUSY_ROUNDS: u32 = 1;
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
        if self.round < BUSY_ROUNDS {
            for _ in 0..(1u32 << self.round) {
                spin_hint();
            }
        } else {
            yield_now();
        }
        self.round += 1;
        true
    }

    /// Start a fresh budget (after a wakeup).
    pub(crate) fn reset(&mut self) {
        self.round = 0;
    }
}
