//! The bounded spin of a contended lock, before it parks.
//!
//! A few busy rounds that start long and double, then rounds of `sched_yield`, then the caller
//! parks. The default (see [`SpinPolicy::DEFAULT`]): five busy rounds of 16, 32, 64, 128 and 256
//! spin *units* of 70 ns (~1, 2, 4.5, 9 and 18 µs: ~35 µs in all), then 7 yields. A unit is the
//! cost of a `pause` on the AMD hosts the policy was first measured on; on a host where a hint
//! costs less (~10 ns on the Intel ones) a unit is several hints (`spin_cost.rs`), so the
//! rounds last as long everywhere. A knob, `crowded_rounds`, can cut the busy rounds short
//! while other threads are registered to park on the same lock (its mode byte counts them);
//! the default does not cut (below).
//!
//! Why, by measurement (other policies run as `ufutex-bench lock --impl
//! ufutex,ufutex-spin-<B>x<F>-<Y>y,…`, interleaved in one process; BENCHMARKS.md has the
//! tables and commands):
//! - A spinning waiter's every look at the lock word pulls its cache line away from the owner,
//!   whose next lock then misses. With a tiny critical section the owner re-locks within
//!   nanoseconds, so a waiter that looks often costs the owner far more than it gains. Starting
//!   at 1 hint and doubling for 6 rounds (an early policy, 63 hints) gave 0.75–0.87× of
//!   parking_lot's throughput at 2 and 8 threads × 5…50 increments; starting at 16 units gave
//!   1.03–1.8×.
//! - How long to spin in all is the price of the alternative: a waiter that parks costs the
//!   owner a wake at its next unlock, and itself a sleep/wake hop (15–65 µs on the project's
//!   KVM hosts) after which it mostly finds the lock taken again and parks again. Spinning about
//!   as long as one hop (the classic bound for "spin, then block") makes those cycles rare: ~35
//!   µs against ~3 µs (two rounds) took 2 threads × ~1 µs sections from 0.87× to 1.10× of
//!   pthread's throughput, and every other cell of the sweep up by 5–25 % too. Longer still
//!   gains a little more now that the rounds are quiet (~70 µs: 2–7 % in every contended
//!   cell, forty-first session), but a waiter then burns up to two hops of CPU where blocking
//!   would cost one, and on Intel hosts each ~2 µs of `pause`s may be a VM exit (below):
//!   the bound stays at about one hop.
//! - A yield is a long, quiet backoff when a CPU has nothing else to run, and hands the CPU to
//!   the lock owner (or another waiter) when it has — on an oversubscribed machine that keeps
//!   the waiters runnable instead of asleep, which also keeps their shares of the lock even.
//! - A long busy spin pays while the spinner and the owner have a CPU each and the lock comes
//!   free within a hop, and, once its rounds are quiet (the fence below), in a crowd too.
//!   Skipping the busy rounds while others were registered to park raised 8 threads × 50
//!   increments and × ~1 µs sections by 17–40 % in the thirty-ninth session, when the rounds
//!   were not quiet, and was the default until the forty-first; with the fence, the same cut
//!   lost 3–10 % at 8 threads × 20, × 50 and × ~1 µs (above 1 in 10 of 10 rounds each) and
//!   changed nothing at 8 × 5 and 2 threads (BENCHMARKS.md). So the default keeps its busy
//!   rounds in a crowd; the knob stays for measurement (`ufutex-spin-5x16-7y-c0` in the
//!   bench), and reads the mode byte only when it can cut.
//! - A busy round ends with a speculation fence (`primitive::speculation_fence`, `lfence` on
//!   x86-64) before the look that follows it. Without one, the contended cells moved 1.3–2×
//!   between builds whose spin code differed by a line (the "layout lottery" of the
//!   thirty-ninth and fortieth sessions), though relinking one build in random layouts moved
//!   nothing: the code decided, not its place. The reading the evidence allows (these guests
//!   have no PMU to count it): the CPU ran the look after the round ahead, past a guessed exit
//!   from the spin loop, and those reads took the lock's line from its owner, so the round
//!   was not quiet; how often depended on the code around the loop. With the fence, in
//!   every one of 7 relinked layouts, 2 threads × 10 increments read 30–33 M locks/s (the
//!   head's layouts without it: 15–21 M in the same turns), and 8 threads × 10 1.11–1.32×
//!   parking_lot (0.65–0.97×) (forty-first session, BENCHMARKS.md). It costs a few cycles
//!   once a round.
//! - A hypervisor may end a long run of `pause`s with a VM exit (KVM's pause-loop exiting: on
//!   AMD after 3000 in a row, on Intel after 4096 cycles, by default). The report measures it
//!   (`ufutex-bench`'s `pause_exits.rs`): on the Zen 1 host of the fortieth session a fresh
//!   loop stops after 3001, for a 2–4 µs stall. All five busy rounds there are 992 hints (two
//!   per unit), so they never reach it; a round of ~2 µs or more would on an Intel host with the
//!   default.

use crate::primitive::{speculation_fence, spin_hint};
use crate::spin_cost::hints_for;

/// The length of a spin unit: the cost of one `pause` on the hosts the policy was tuned on.
const UNIT_NS: u64 = 70;

/// Spin hints per unit on this host (1 under loom, where a hint is a scheduling point).
fn hints_per_unit() -> u64 {
    hints_for(UNIT_NS, 1, u64::MAX)
}
#[cfg(not(ufutex_loom))]
use std::sync::atomic::{AtomicU32, Ordering};

/// How a contended lock spins before it parks (a measurement knob, hidden from the docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinPolicy {
    /// The first busy round waits `2^first_shift` spin units (of 70 ns, see the module docs);
    /// each further round doubles it.
    pub first_shift: u8,
    /// Busy rounds.
    pub busy_rounds: u8,
    /// `sched_yield` rounds after the busy ones.
    pub yield_rounds: u8,
    /// Busy rounds at most while other threads are already registered to park on the same
    /// lock (then the rest of the busy rounds are skipped, and the yields follow); a value
    /// ≥ `busy_rounds` never cuts.
    pub crowded_rounds: u8,
}

impl SpinPolicy {
    /// The policy chosen by measurement (module docs).
    #[cfg_attr(ufutex_loom, allow(dead_code))] // loom runs its own, smaller policy
    pub const DEFAULT: SpinPolicy = SpinPolicy { first_shift: 4, busy_rounds: 5, yield_rounds: 7, crowded_rounds: 5 };

    /// Under loom every hint is a scheduling point: one round of one hint keeps the models
    /// small while still exploring "spin, then park".
    #[cfg(ufutex_loom)]
    const LOOM: SpinPolicy = SpinPolicy { first_shift: 0, busy_rounds: 1, yield_rounds: 0, crowded_rounds: 1 };

    #[cfg(not(ufutex_loom))]
    const fn bits(self) -> u32 {
        (self.first_shift as u32)
            | (self.busy_rounds as u32) << 8
            | (self.yield_rounds as u32) << 16
            | (self.crowded_rounds as u32) << 24
    }

    #[cfg(not(ufutex_loom))]
    const fn from_bits(b: u32) -> SpinPolicy {
        SpinPolicy {
            first_shift: b as u8,
            busy_rounds: (b >> 8) as u8,
            yield_rounds: (b >> 16) as u8,
            crowded_rounds: (b >> 24) as u8,
        }
    }

    /// The process-wide policy now in force.
    fn current() -> SpinPolicy {
        #[cfg(ufutex_loom)]
        return SpinPolicy::LOOM;
        // Relaxed: a tuning value; no data is published with it.
        #[cfg(not(ufutex_loom))]
        SpinPolicy::from_bits(POLICY.load(Ordering::Relaxed))
    }
}

#[cfg(not(ufutex_loom))]
static POLICY: AtomicU32 = AtomicU32::new(SpinPolicy::DEFAULT.bits());

/// Set the process-wide spin policy of every [`super::RawMutex`] (a benchmarking knob; `None`
/// restores the default). A busy round never waits more than 2^20 hints. Lock calls already
/// spinning keep the policy they started with.
#[cfg(not(ufutex_loom))]
pub fn set_spin_policy(policy: Option<SpinPolicy>) {
    let p = policy.unwrap_or(SpinPolicy::DEFAULT);
    // Relaxed: see `SpinPolicy::current`.
    POLICY.store(p.bits(), Ordering::Relaxed);
}

pub(crate) struct Spin {
    policy: SpinPolicy,
    round: u32,
}

impl Spin {
    pub(crate) fn new() -> Spin {
        Spin { policy: SpinPolicy::current(), round: 0 }
    }

    /// The spin of a handoff requester waiting for its grant. Under loom it has no rounds:
    /// looking again is what a wakeup that finds no grant already does, and the extra
    /// scheduling points put the handoff and condvar models past loom's branch budget.
    pub(crate) fn for_grant() -> Spin {
        #[cfg(ufutex_loom)]
        return Spin {
            policy: SpinPolicy { first_shift: 0, busy_rounds: 0, yield_rounds: 0, crowded_rounds: 0 },
            round: 0,
        };
        #[cfg(not(ufutex_loom))]
        Spin::new()
    }

    /// Spin one round; `false` once the budget is spent (then the caller parks).
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        self.spin_among(|| false)
    }

    /// [`Spin::spin`], able to ask whether other threads are registered to park on the same
    /// lock: then busy rounds past `crowded_rounds` are skipped. `crowded` is called only in a
    /// round the policy could cut.
    #[inline]
    pub(crate) fn spin_among(&mut self, crowded: impl FnOnce() -> bool) -> bool {
        let p = self.policy;
        let busy = u32::from(p.busy_rounds);
        if self.round < busy && self.round >= u32::from(p.crowded_rounds) && crowded() {
            self.round = busy;
        }
        if self.round < busy {
            // Capped at 2^20 units (~70 ms) a round, whatever the knob says.
            let units = 1u64 << (u32::from(p.first_shift) + self.round).min(20);
            for _ in 0..units * hints_per_unit() {
                spin_hint();
            }
            // The round is quiet only if the look after it waits for it (module docs).
            speculation_fence();
        } else if self.round < busy + u32::from(p.yield_rounds) {
            crate::primitive::yield_now();
        } else {
            return false;
        }
        self.round += 1;
        true
    }

    /// Start a fresh budget (after a wakeup).
    pub(crate) fn reset(&mut self) {
        self.round = 0;
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_busy_then_yield_rounds() {
        let mut s = Spin {
            policy: SpinPolicy { first_shift: 0, busy_rounds: 2, yield_rounds: 3, crowded_rounds: 2 },
            round: 0,
        };
        assert_eq!((0..10).filter(|_| s.spin()).count(), 5);
        s.reset();
        assert!(s.spin());
    }

    #[test]
    fn a_crowded_spin_skips_its_remaining_busy_rounds() {
        let policy = SpinPolicy { first_shift: 0, busy_rounds: 3, yield_rounds: 2, crowded_rounds: 1 };
        let mut s = Spin { policy, round: 0 };
        assert!(s.spin_among(|| panic!("round 0 is within crowded_rounds: not asked")));
        assert_eq!(s.round, 1);
        assert!(s.spin_among(|| true), "busy rounds 1 and 2 are skipped: the first yield");
        assert_eq!(s.round, 4);
        assert!(s.spin_among(|| panic!("a yield round is never cut: not asked")), "the second yield");
        assert!(!s.spin_among(|| false), "spent: park");
        s.reset();
        assert_eq!((0..10).filter(|_| s.spin_among(|| false)).count(), 5, "not crowded: every round");
    }

    #[test]
    fn policy_bits_round_trip() {
        let p = SpinPolicy { first_shift: 7, busy_rounds: 3, yield_rounds: 200, crowded_rounds: 1 };
        assert_eq!(SpinPolicy::from_bits(p.bits()), p);
    }
}
