//! The bucket lock: one `AtomicU32`, uncontended lock and unlock are one atomic each; a
//! contended lock spins briefly, then sleeps on the kernel futex (so an owner that is preempted
//! does not make its waiters burn their time slices — this library runs oversubscribed).
//!
//! | value | meaning |
//! |---|---|
//! | 0 | unlocked |
//! | 1 | locked, nobody sleeping |
//! | 2 | locked, someone may be sleeping in the kernel |

use crate::primitive::{hints_for, spin_hint, AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// How long a contended bucket lock spins before it sleeps. Most bucket critical sections are a
/// few list operations (tens of ns); a wake or requeue of many waiters walks one node per
/// waiter, each on its own thread's stack (~0.1 µs a cache miss: ~1 µs for 8). A waiter that
/// sleeps instead costs the owner a `futex` wake at its unlock and itself a sleep/wake hop of
/// 15–65 µs on the project's hosts, so the spin lasts a few µs. A time, not a count: a spin
/// hint costs ~70 ns on the AMD hosts and ~10 ns on the Intel ones (`primitive::hint_ns`);
/// 40 hints (the old count) were 2.8 µs on the one and 0.4 µs on the other, where `strace`
/// showed one of perf's two wake-parallel wakers (8 wakes each) going to sleep on the lock.
/// Under loom every spin is a scheduling branch: one (`hints_for`) is enough to explore
/// "released while spinning".
const SPIN_NS: u64 = 4_000;

pub(crate) struct RawLock {
    state: AtomicU32,
}

impl RawLock {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> RawLock {
            RawLock { state: AtomicU32::new(UNLOCKED) }
        }
    }

    #[inline]
    pub(crate) fn lock(&self) {
        // Acquire: the critical section sees everything the previous owner did.
        if self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
    }

    #[cold]
    fn lock_contended(&self) {
        for _ in 0..hints_for(SPIN_NS, 16, 1 << 12) {
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
            spin_hint();
        }
        // Taking the lock as CONTENDED is conservative: the unlock may wake someone needlessly.
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            sys::sleep_while(&self.state, CONTENDED);
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        // Release: publish the critical section to the next owner.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            sys::wake_one(&self.state);
        }
    }
}

#[cfg(all(target_os = "linux", not(ufutex_loom)))]
mod sys {
    use std::sync::atomic::AtomicU32;

    pub(super) fn sleep_while(word: &AtomicU32, val: u32) {
        crate::parker::futex::wait(word, val, None);
    }

    pub(super) fn wake_one(word: &AtomicU32) {
        crate::parker::futex::wake(word, 1);
    }
}

#[cfg(any(not(target_os = "linux"), ufutex_loom))]
mod sys {
    use crate::primitive::{yield_now, AtomicU32, Ordering};

    pub(super) fn sleep_while(word: &AtomicU32, val: u32) {
        if word.load(Ordering::Relaxed) == val {
            yield_now();
        }
    }

    pub(super) fn wake_one(_word: &AtomicU32) {}
}
