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
    /// Where a contended locker sleeps (the kernel futex on the state: nothing here, outside
    /// loom).
    sleep: sys::Sleep,
}

impl RawLock {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> RawLock {
            RawLock { state: AtomicU32::new(UNLOCKED), sleep: sys::Sleep::new() }
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
            self.sleep.sleep_while(&self.state, CONTENDED);
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        // Release: publish the critical section to the next owner.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            self.sleep.wake_one(&self.state);
        }
    }
}

#[cfg(all(target_os = "linux", not(ufutex_loom)))]
mod sys {
    use std::sync::atomic::AtomicU32;

    /// The kernel futex on the lock word: no state of its own.
    pub(super) struct Sleep;

    impl Sleep {
        pub(super) const fn new() -> Sleep {
            Sleep
        }

        pub(super) fn sleep_while(&self, word: &AtomicU32, val: u32) {
            crate::parker::futex::wait(word, val, None);
        }

        pub(super) fn wake_one(&self, word: &AtomicU32) {
            crate::parker::futex::wake(word, 1);
        }
    }
}

#[cfg(all(not(target_os = "linux"), not(ufutex_loom)))]
mod sys {
    use crate::primitive::{yield_now, AtomicU32, Ordering};

    /// Off Linux a contended locker yields and looks again.
    pub(super) struct Sleep;

    impl Sleep {
        pub(super) const fn new() -> Sleep {
            Sleep
        }

        pub(super) fn sleep_while(&self, word: &AtomicU32, val: u32) {
            if word.load(Ordering::Relaxed) == val {
                yield_now();
            }
        }

        pub(super) fn wake_one(&self, _word: &AtomicU32) {}
    }
}

/// Under loom a contended locker parks, as it would in the kernel. A locker that yielded and
/// looked again instead made an execution last as long as the holder's yield count (loom runs
/// the thread that yielded least first): past loom's branch limit at three preemptions. (Not
/// loom's condvar: its wait can wake into a held mutex and panic.)
#[cfg(ufutex_loom)]
mod sys {
    use crate::primitive::{AtomicU32, Mutex, Ordering};
    use loom::thread::Thread;

    /// The sleeping lockers, oldest first.
    pub(super) struct Sleep {
        sleepers: Mutex<Vec<Thread>>,
    }

    impl Sleep {
        pub(super) fn new() -> Sleep {
            Sleep { sleepers: Mutex::new(Vec::new()) }
        }

        /// The futex's check under its lock: the waker's wake takes the same lock after its
        /// store, so either this look sees the store or the wake finds this thread listed.
        pub(super) fn sleep_while(&self, word: &AtomicU32, val: u32) {
            {
                let mut sleepers = self.sleepers.lock().unwrap();
                if word.load(Ordering::Relaxed) != val {
                    return;
                }
                sleepers.push(loom::thread::current());
            }
            // May also return for an unpark meant for this thread's parker (a token left from
            // an earlier wait): then leave the list, and the caller looks again.
            loom::thread::park();
            let me = loom::thread::current().id();
            self.sleepers.lock().unwrap().retain(|t| t.id() != me);
        }

        pub(super) fn wake_one(&self, _word: &AtomicU32) {
            let mut sleepers = self.sleepers.lock().unwrap();
            let first = (!sleepers.is_empty()).then(|| sleepers.remove(0));
            drop(sleepers);
            if let Some(t) = first {
                t.unpark();
            }
        }
    }
}
