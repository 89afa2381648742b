//! [`BriefLock`]: the lock of a process-wide list whose users can do without it (the node
//! pool's spare nodes, the spare group records), only ever tried, never waited for, and given
//! up by a forked child that inherited it held.
//!
//! Its users take it at a thread's first wait and at its exit, for a few loads and stores. A
//! thread may meet it held:
//! - by another thread that just took it (two threads that start or exit at once), or that was
//!   preempted inside its few loads and stores: had at a later try;
//! - by the thread it runs on, in a signal handler that interrupted the holder: not had, and
//!   not tried again (the lock names its holder);
//! - in a child forked while another thread held it: a thread the child does not have. The
//!   child's fresh start (`fork.rs`) frees it with [`BriefLock::forget_holder`], and replaces
//!   what it guards (which that thread may have left half changed) with a new value. Before, the
//!   lock stayed held in such a child for ever, and each thread the child started did without
//!   the list: it yielded 64 times at each take and give, and mapped a new page of records,
//!   left unused (`fork.rs`'s tests). A lock held by the forking thread itself (a fork from a
//!   signal handler that interrupted the holder) is left to the interrupted holder, which goes
//!   on in the child.

// (Under loom only its model uses it: the node pool and the records' free list are not built.)
#![cfg_attr(ufutex_loom, allow(dead_code))]

use crate::primitive::{yield_now, AtomicUsize, Ordering};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// Tries before [`BriefLock::lock_briefly`] gives up, each after the first after a yield. Tried
/// once, the record list's lost races each left a record unused or made a new 4 KiB page of
/// them: hundreds of pages for two threads' 400,000 rounds of a take and a give (`group.rs`'s
/// test).
const TRIES: u32 = 64;

/// A lock that is tried, never waited for (module docs).
pub(crate) struct BriefLock<T> {
    /// 0, or the holder ([`me`]).
    holder: AtomicUsize,
    value: UnsafeCell<T>,
}

#[cfg(not(ufutex_loom))]
std::thread_local! {
    /// A byte whose address names this thread ([`me`]); a forked child's thread keeps the name
    /// of the parent's thread that forked (the child's memory is a copy).
    static NAME: u8 = const { 0 };
}
#[cfg(ufutex_loom)]
loom::thread_local! {
    // (Loom runs a model's threads on one thread: its own thread-locals tell them apart.)
    static NAME: u8 = 0;
}

/// This thread, as a [`BriefLock`] names its holder: never 0. (A constant-initialised
/// thread-local without a destructor: its address is at hand in a signal handler and in a
/// thread's exit.)
fn me() -> usize {
    NAME.with(|b| std::ptr::from_ref(b) as usize)
}

// SAFETY: the value is reached only through a guard, which one thread at a time holds (the
// compare-and-swap in `lock_briefly`), or by `forget_holder`, whose caller is the process's
// only thread: so `T` is only ever sent between threads, never shared.
unsafe impl<T: Send> Sync for BriefLock<T> {}

/// A held [`BriefLock`], released on drop.
pub(crate) struct BriefGuard<'a, T>(&'a BriefLock<T>);

impl<T> BriefLock<T> {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new(value: T) -> BriefLock<T> {
            BriefLock { holder: AtomicUsize::new(0), value: UnsafeCell::new(value) }
        }
    }

    /// The lock, if it can be had within [`TRIES`] tries, each after a yield; `None` if it stays
    /// held, or this thread holds it (a signal handler that interrupted the holder).
    pub(crate) fn lock_briefly(&self) -> Option<BriefGuard<'_, T>> {
        let me = me();
        for i in 0..TRIES {
            if i > 0 {
                yield_now();
            }
            // Relaxed: the holder's name is all this load reads; a held lock's line is not
            // taken for writing by each try.
            match self.holder.load(Ordering::Relaxed) {
                0 => {}
                h if h == me => return None,
                _ => continue,
            }
            // Acquire: what the last holder did before its release.
            if self.holder.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Some(BriefGuard(self));
            }
        }
        None
    }

    /// In a forked child's fresh start, whose one thread is the caller: a lock held by another
    /// thread was held at the fork by a thread the child does not have. Its value is replaced
    /// by `fresh()` (the old one, maybe half changed, is left as it is: never read, never
    /// dropped) and the lock is free. A free lock, or one this thread holds (the fork came from
    /// a signal handler that interrupted the holder, which goes on), is left as it is.
    pub(crate) fn forget_holder(&self, fresh: impl FnOnce() -> T) {
        // Relaxed: the child has no other thread (the caller's contract).
        let h = self.holder.load(Ordering::Relaxed);
        if h != 0 && h != me() {
            // SAFETY: the holder is not in this process and the caller is its only thread, so
            // nobody else holds or takes the lock: the value is this thread's alone. `write`
            // does not drop the old value, which may be torn.
            unsafe { self.value.get().write(fresh()) };
            self.holder.store(0, Ordering::Release);
        }
    }
}

impl<T> Deref for BriefGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for BriefGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only use of the guard.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for BriefGuard<'_, T> {
    fn drop(&mut self) {
        // Release: what this holder did, for the next one.
        self.0.holder.store(0, Ordering::Release);
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::BriefLock;

    #[test]
    fn a_held_lock_is_not_had_until_released() {
        let l = BriefLock::new(1);
        let mut g = l.lock_briefly().expect("a free lock");
        *g += 1;
        assert!(l.lock_briefly().is_none(), "held by this thread's guard");
        drop(g);
        assert_eq!(*l.lock_briefly().expect("released"), 2);
    }

    #[test]
    fn a_lock_held_by_another_thread_forgotten_is_free_with_the_fresh_value() {
        let l = BriefLock::new(5);
        // As a holder the child does not have.
        std::thread::scope(|s| s.spawn(|| std::mem::forget(l.lock_briefly().expect("a free lock"))).join())
            .expect("the holder");
        assert!(l.lock_briefly().is_none(), "held by the other thread");
        l.forget_holder(|| 7);
        assert_eq!(*l.lock_briefly().expect("free after the forget"), 7);
        l.forget_holder(|| 9);
        assert_eq!(*l.lock_briefly().expect("a free lock is left as it is"), 7);
    }

    /// This thread's own guard (a fork from a signal handler that interrupted the holder): the
    /// lock stays held and its value untouched, for the interrupted holder.
    #[test]
    fn a_lock_this_thread_holds_is_not_forgotten() {
        let l = BriefLock::new(5);
        let g = l.lock_briefly().expect("a free lock");
        l.forget_holder(|| 7);
        assert_eq!(*g, 5);
        assert!(l.lock_briefly().is_none(), "still held");
        drop(g);
        assert_eq!(*l.lock_briefly().expect("released"), 5);
    }

    /// Threads that take the lock as fast as they can each make a plain read-modify-write of
    /// the value while they hold it: no increment is lost (two holders at once would lose
    /// some), and every lock given up was held by another thread at that moment.
    #[test]
    fn holders_never_overlap_under_a_race() {
        const THREADS: usize = 4;
        const ROUNDS: usize = 100_000;
        let l = BriefLock::new(0u64);
        let had: usize = std::thread::scope(|s| {
            let racers: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        (0..ROUNDS)
                            .filter(|_| match l.lock_briefly() {
                                Some(mut g) => {
                                    // A load and a store, not one instruction: a second holder
                                    // between them would be lost.
                                    let v = std::hint::black_box(*g);
                                    *g = v + 1;
                                    true
                                }
                                None => false,
                            })
                            .count()
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().expect("a racer")).sum()
        });
        assert!(had > 0);
        assert_eq!(*l.lock_briefly().expect("free at the end"), had as u64, "increments lost");
    }
}

/// The lock, model-checked: run with
/// `RUSTFLAGS="--cfg ufutex_loom" cargo test --release -p ufutex --lib brief_lock`.
#[cfg(all(test, ufutex_loom))]
mod loom_models {
    use super::BriefLock;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::sync::Arc;

    /// Two threads take the lock and change the value under it in two steps: the holders never
    /// overlap (the count of holders inside is never two), and no change is lost.
    #[test]
    fn holders_never_overlap() {
        loom::model(|| {
            let l = Arc::new(BriefLock::new(0u32));
            let inside = Arc::new(AtomicUsize::new(0));
            let take = |l: Arc<BriefLock<u32>>, inside: Arc<AtomicUsize>| {
                move || match l.lock_briefly() {
                    Some(mut g) => {
                        assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
                        let v = *g;
                        loom::thread::yield_now();
                        *g = v + 1;
                        inside.fetch_sub(1, Ordering::Relaxed);
                        1
                    }
                    None => 0,
                }
            };
            let a = loom::thread::spawn(take(l.clone(), inside.clone()));
            let b = loom::thread::spawn(take(l.clone(), inside.clone()));
            let had = a.join().unwrap() + b.join().unwrap();
            assert_eq!(*l.lock_briefly().expect("free once both are done"), had);
        });
    }
}
