//! When a waiter counts as starving and asks for a handoff.
//!
//! The process-wide policy is a measurement knob (hidden from the docs): `ufutex-bench lock
//! --impl ufutex,ufutex-nohandoff,ufutex-handoff-<T>` compares the handoff lock with the same
//! lock never handing off, and with other thresholds, in one run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// When a parked waiter asks the owner to hand the lock over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Starvation {
    /// Never: a plain barging lock (the "unfair variant" the benchmarks compare against).
    Never,
    /// After it has been trying this long without getting the lock, counted from the end of
    /// its spin: its first look at whether it is starving, when it gets ready to park (Go's
    /// starvation mode uses 1 ms).
    After(Duration),
    /// After this many wakeups that ended with someone else holding the lock (the kernel's TP
    /// futex handoff counts spins and sleeps the same way).
    Wakeups(u32),
}

const KIND_SHIFT: u32 = 62;
const VALUE: u64 = (1 << KIND_SHIFT) - 1;
const NEVER: u64 = 0;
const AFTER: u64 = 1 << KIND_SHIFT;
const WAKEUPS: u64 = 2 << KIND_SHIFT;

/// The default, chosen by measurement (see `raw_mutex.rs`): trying for 1 ms without getting
/// the lock.
#[cfg(not(ufutex_loom))]
const DEFAULT: u64 = AFTER | 1_000_000;
/// Under loom there is no time: one lost wakeup, so the models reach a handoff in few steps.
#[cfg(ufutex_loom)]
const DEFAULT: u64 = WAKEUPS | 1;

static POLICY: AtomicU64 = AtomicU64::new(DEFAULT);

/// Set the process-wide starvation policy of every [`super::RawMutex`] (a benchmarking knob;
/// `None` restores the default). Waiters already in a lock call keep the policy they started
/// with.
pub fn set_starvation_policy(policy: Option<Starvation>) {
    let bits = match policy {
        None => DEFAULT,
        Some(Starvation::Never) => NEVER,
        Some(Starvation::After(d)) => AFTER | (d.as_nanos().min(u128::from(VALUE)) as u64),
        Some(Starvation::Wakeups(n)) => WAKEUPS | u64::from(n),
    };
    // Relaxed: a tuning value; no data is published with it.
    POLICY.store(bits, Ordering::Relaxed);
}

/// One waiter's patience: how long, or how often, it has been passed over.
pub(crate) struct Patience {
    policy: u64,
    /// When the waiter first asked [`Patience::starving`]: the clock is read there, after the
    /// spin, not on entry to the slow path (`raw_mutex.rs`, "Choices").
    since: Option<Instant>,
    wakeups: u32,
}

impl Patience {
    /// The waiter starts trying (the clock of `After` starts at its first look).
    pub(crate) fn new() -> Patience {
        // Relaxed: see `set_starvation_policy`.
        let policy = POLICY.load(Ordering::Relaxed);
        Patience { policy, since: None, wakeups: 0 }
    }

    /// The waiter was woken and found the lock taken.
    pub(crate) fn passed_over(&mut self) {
        self.wakeups = self.wakeups.saturating_add(1);
    }

    /// Whether the waiter should ask for a handoff now. The first call starts the clock of
    /// `After` (so only `After(0)` is starving at once).
    pub(crate) fn starving(&mut self) -> bool {
        let value = self.policy & VALUE;
        match self.policy & !VALUE {
            AFTER => match self.since {
                Some(t) => t.elapsed().as_nanos() >= u128::from(value),
                None => {
                    self.since = Some(Instant::now());
                    value == 0
                }
            },
            WAKEUPS => u64::from(self.wakeups) >= value,
            _ => false,
        }
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_clock_starts_at_the_first_look() {
        let mut p = Patience { policy: AFTER | 5_000_000, since: None, wakeups: 0 }; // 5 ms
        std::thread::sleep(Duration::from_millis(10)); // before the first look: not counted
        assert!(!p.starving());
        std::thread::sleep(Duration::from_millis(10));
        assert!(p.starving());
    }

    #[test]
    fn zero_is_starving_at_once_and_never_is_never() {
        let mut zero = Patience { policy: AFTER, since: None, wakeups: 0 };
        assert!(zero.starving());
        let mut never = Patience { policy: NEVER, since: None, wakeups: 0 };
        assert!(!never.starving());
        let mut twice = Patience { policy: WAKEUPS | 2, since: None, wakeups: 0 };
        twice.passed_over();
        assert!(!twice.starving());
        twice.passed_over();
        assert!(twice.starving());
    }
}
