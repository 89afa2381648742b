//! [`Spill`]: where the givers to a process-wide free list leave what they could not give
//! because the list's lock stayed busy (`brief_lock.rs`): a lock-free stack of chains. Used by
//! the group records' free list (`group.rs`) and the node pool (`node_pool.rs`).
//!
//! A giver pushes its chain with a compare-and-swap; the list's next holder takes the whole
//! stack with one swap (the records' list once it runs empty, the node pool at each hold).
//! Nothing waits, so a push is safe in a signal handler that interrupted the list's holder (or
//! another pusher), and nothing is lost: before, such a give left its elements unused for good.
//!
//! There is no pop of one element. Its compare-and-swap from a head to the head's successor
//! can succeed on a head that was taken and pushed back meanwhile, whose successor is by then
//! another thread's (the ABA problem): that element would be in two places. A swap of the whole
//! stack takes whatever is there, and a push only ever writes the link of a chain it owns.
//!
//! A forked child keeps the stack as it was: each change is one atomic instruction, so a thread
//! the child does not have left it whole. A chain that thread was about to push, or had taken
//! and not yet put anywhere, is left unused in the child.

// (Under loom only its model uses it: the records' free list and the node pool are not built.)
#![cfg_attr(ufutex_loom, allow(dead_code))]

use crate::primitive::{AtomicPtr, Ordering};
use std::ptr::{self, NonNull};

/// An element of a [`Spill`]: it has a link its owner may write.
pub(crate) trait Linked {
    /// The element after this one in its chain (null at the end).
    ///
    /// # Safety
    /// The caller owns the element (or the list it is on, under that list's lock).
    unsafe fn next(&self) -> *const Self;

    /// # Safety
    /// The caller owns the element (it is on no list nor stack, and nobody else reads it).
    unsafe fn set_next(&self, next: *const Self);
}

/// A lock-free stack of chains (module docs).
pub(crate) struct Spill<T> {
    head: AtomicPtr<T>,
}

impl<T: Linked> Spill<T> {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> Spill<T> {
            Spill { head: AtomicPtr::new(ptr::null_mut()) }
        }
    }

    /// Push the chain `first ..= last` (linked through [`Linked::next`]).
    ///
    /// # Safety
    /// The caller gives up every element of the chain and keeps no pointer to them, and the
    /// elements are never freed (a taker may hold them for as long as the process lives).
    pub(crate) unsafe fn push(&self, first: NonNull<T>, last: &T) {
        // Relaxed: only compared; the CAS publishes.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the chain is still ours: it is published only by the CAS below.
            unsafe { last.set_next(head) };
            // Release: a taker that swaps the stack out sees the chain's links. A later push's
            // CAS continues this release sequence, so a taker that reads its value sees ours too.
            match self.head.compare_exchange_weak(head, first.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Whether nothing is on the stack (a look: a push may come right after).
    pub(crate) fn is_empty(&self) -> bool {
        // Relaxed: a hint; a caller that acts on it takes the stack with `take_all`.
        self.head.load(Ordering::Relaxed).is_null()
    }

    /// Everything pushed so far, as one chain (null if nothing), now the caller's.
    pub(crate) fn take_all(&self) -> *const T {
        // Acquire: pairs with each push's Release (see `push`).
        self.head.swap(ptr::null_mut(), Ordering::Acquire)
    }

    /// The elements on the stack, followed without taking them (for the tests: no push or take
    /// may run meanwhile).
    #[cfg(all(test, not(ufutex_loom)))]
    pub(crate) fn len_quiet(&self) -> usize {
        let mut n = 0;
        let mut e = self.head.load(Ordering::Acquire).cast_const();
        while !e.is_null() {
            n += 1;
            // SAFETY: elements on the stack are never freed (`push`'s contract), and with no push
            // or take running their links are nobody's to write.
            e = unsafe { (*e).next() };
        }
        n
    }
}

/// The numbers (`id`) of the elements of a chain taken from a stack, in order (the tests and
/// the model). The chain is the caller's, and its elements outlive the call.
#[cfg(test)]
fn numbers<T: Linked>(mut e: *const T, id: fn(&T) -> usize) -> Vec<usize> {
    let mut v = Vec::new();
    while !e.is_null() {
        // SAFETY: the tests' elements live as long as the test (the model's, its iteration).
        let r = unsafe { &*e };
        v.push(id(r));
        // SAFETY: the chain is the caller's (taken from the stack).
        e = unsafe { r.next() };
    }
    v
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::{Linked, Spill};
    use std::cell::Cell;
    use std::ptr::{self, NonNull};

    /// An element of the tests: its number and its link.
    struct E {
        id: usize,
        next: Cell<*const E>,
    }

    impl Linked for E {
        unsafe fn next(&self) -> *const E {
            self.next.get()
        }
        unsafe fn set_next(&self, next: *const E) {
            self.next.set(next);
        }
    }

    // SAFETY: (for the tests' threads) an element is touched by its owner alone: the thread
    // that pushes it, then the one that takes it.
    unsafe impl Sync for E {}

    fn ids(e: *const E) -> Vec<usize> {
        super::numbers(e, |e| e.id)
    }

    #[test]
    fn chains_come_back_whole_latest_first() {
        let es: Vec<E> = (0..5).map(|id| E { id, next: Cell::new(ptr::null()) }).collect();
        let s: Spill<E> = Spill::new();
        assert!(s.take_all().is_null());
        // 0 → 1 → 2 as one chain, then 3, then 4.
        es[0].next.set(&es[1]);
        es[1].next.set(&es[2]);
        // SAFETY: the chains are the test's, given up; the elements outlive the stack.
        unsafe {
            s.push(NonNull::from(&es[0]), &es[2]);
            s.push(NonNull::from(&es[3]), &es[3]);
            s.push(NonNull::from(&es[4]), &es[4]);
        }
        assert_eq!(s.len_quiet(), 5);
        assert_eq!(ids(s.take_all()), [4, 3, 0, 1, 2]);
        assert!(s.take_all().is_null(), "taken whole");
    }

    /// Threads push their own elements one at a time while another takes the stack whole, again
    /// and again: every element is taken exactly once, by a take or the last one.
    #[test]
    fn racing_pushes_and_takes_lose_nothing_and_repeat_nothing() {
        const PUSHERS: usize = 2;
        const EACH: usize = 100_000;
        let es: Vec<E> = (0..PUSHERS * EACH).map(|id| E { id, next: Cell::new(ptr::null()) }).collect();
        let s = Spill::new();
        let mut seen = vec![0u8; es.len()];
        std::thread::scope(|sc| {
            let pushers: Vec<_> = (0..PUSHERS)
                .map(|p| {
                    let (es, s) = (&es, &s);
                    sc.spawn(move || {
                        for e in &es[p * EACH..(p + 1) * EACH] {
                            // SAFETY: each element is pushed once, by its own thread.
                            unsafe { s.push(NonNull::from(e), e) };
                        }
                    })
                })
                .collect();
            while pushers.iter().any(|p| !p.is_finished()) {
                for id in ids(s.take_all()) {
                    seen[id] += 1;
                }
            }
        });
        for id in ids(s.take_all()) {
            seen[id] += 1;
        }
        let wrong: Vec<usize> = (0..seen.len()).filter(|&i| seen[i] != 1).collect();
        assert!(
            wrong.is_empty(),
            "{} elements taken other than once, e.g. {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        );
    }
}

/// The stack, model-checked: run with
/// `RUSTFLAGS="--cfg ufutex_loom" cargo test --release -p ufutex --lib spill`.
#[cfg(all(test, ufutex_loom))]
mod loom_models {
    use super::{Linked, Spill};
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use std::ptr::{self, NonNull};

    /// An element: its number, and its link as a loom cell, so that the model checks every read
    /// of a link is ordered after the write of it (a missing Release/Acquire is a data race).
    struct E {
        id: usize,
        next: UnsafeCell<*const E>,
    }

    impl Linked for E {
        unsafe fn next(&self) -> *const E {
            // SAFETY: read by the element's owner (the taker), after the pusher's write.
            self.next.with(|p| unsafe { *p })
        }
        unsafe fn set_next(&self, next: *const E) {
            // SAFETY: the caller owns the element.
            self.next.with_mut(|p| unsafe { *p = next });
        }
    }

    // SAFETY: an element is touched by its owner alone (the model checks the hand-overs).
    unsafe impl Sync for E {}
    // SAFETY: as above.
    unsafe impl Send for E {}

    fn ids(e: *const E) -> Vec<usize> {
        super::numbers(e, |e| e.id)
    }

    /// Two threads push (one a chain of two, one a single element) while a third takes the
    /// stack whole: each element ends taken once, by that take or the last one, and every link
    /// it was read through was written before (loom's cells would report a race).
    #[test]
    fn pushes_racing_a_take_are_taken_once() {
        loom::model(|| {
            let es: Arc<Vec<E>> = Arc::new((0..3).map(|id| E { id, next: UnsafeCell::new(ptr::null()) }).collect());
            let s = Arc::new(Spill::new());
            let chain = {
                let (es, s) = (es.clone(), s.clone());
                loom::thread::spawn(move || {
                    // SAFETY: elements 0 and 1 are this thread's until pushed.
                    unsafe {
                        es[0].set_next(&es[1]);
                        s.push(NonNull::from(&es[0]), &es[1]);
                    }
                })
            };
            let one = {
                let (es, s) = (es.clone(), s.clone());
                loom::thread::spawn(move || {
                    // SAFETY: element 2 is this thread's until pushed.
                    unsafe { s.push(NonNull::from(&es[2]), &es[2]) };
                })
            };
            let mut taken = ids(s.take_all());
            chain.join().unwrap();
            one.join().unwrap();
            taken.extend(ids(s.take_all()));
            taken.sort_unstable();
            assert_eq!(taken, [0, 1, 2]);
        });
    }
}
