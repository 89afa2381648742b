//! Requeue: wake some waiters of one word and move others to another word's queue.

use crate::error::WaitError;
use crate::key::Key;
use crate::primitive::Ordering;
use crate::queue::Step;
use crate::table::{lock_pair_current, PairGuard};
use crate::table::{MoveList, WakeList};
use crate::tables::Tables;
use crate::word::WordRef;

/// The untyped requeue every front end calls.
pub(crate) fn requeue_words(
    tables: &Tables,
    from: WordRef,
    expected: u64,
    to: WordRef,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, WaitError> {
    let (k1, k2) = (Key::private(from.addr()), Key::private(to.addr()));
    requeue_keys(tables, k1, k2, Some((from, expected)), nr_wake, nr_requeue)
}

/// [`requeue_words`] with the keys given: each key's node picks its table, so a requeue may
/// move waiters between two NUMA nodes' tables (`numa.rs`; lock order in `table.rs`).
/// `check`: the source word and the value it must hold (`WouldBlock` otherwise), compared
/// before and again with both buckets locked; `None` for the legacy `FUTEX_REQUEUE`, which
/// compares nothing.
pub(crate) fn requeue_keys(
    tables: &Tables,
    k1: Key,
    k2: Key,
    check: Option<(WordRef, u64)>,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, WaitError> {
    let holds = || check.is_none_or(|(from, expected)| from.load() == expected);
    if !holds() {
        return Err(WaitError::WouldBlock); // linearisable at this load
    }
    let (wake, moved) = loop {
        let (t1, t2) = (tables.table(&k1), tables.table(&k2));
        let (b1, b2) = (t1.bucket(&k1), t2.bucket(&k2));
        let Some(mut pair) = lock_pair_current((t1, b1), (t2, b2), |t| tables.is_current(t)) else {
            continue;
        };
        if !holds() {
            return Err(WaitError::WouldBlock);
        }
        let (mut wake, mut moved) = (WakeList::new(), MoveList::new());
        // Take up to nr_wake + nr_requeue nodes of the source key; the first nr_wake taken
        // (the oldest) are woken, the rest moved.
        let mut budget = nr_wake.saturating_add(nr_requeue);
        let pick = |k: &Key, _mask: u64| match (*k == k1, budget) {
            (false, _) => Step::Skip,
            (true, 0) => Step::Stop,
            (true, _) => {
                budget -= 1;
                Step::Take
            }
        };
        let src = match &mut pair {
            PairGuard::One(g) => g,
            PairGuard::Two { first, .. } => first,
        };
        // SAFETY: `src` holds the source bucket's lock; taken nodes go to `wake` or `moved`.
        unsafe { src.queue().take(pick, |node| if wake.len() < nr_wake { wake.push(node) } else { moved.push(node) }) };
        let (nw, nm) = (wake.len() as u32, moved.len() as u32);
        // Counts: the target first, so no bucket ever under-counts its waiters. Relaxed under
        // both locks: lock-free readers only compare a count with zero, and a waker on the
        // target that reads it before this increment raced the requeue itself (the moved
        // waiters were not yet on its word) — the kernel's requeue has the same window.
        match &mut pair {
            PairGuard::One(g) => {
                // SAFETY: source and target are this one locked bucket.
                unsafe { moved.append_to(g.queue(), k2, b2) };
                g.waiters().fetch_sub(nw, Ordering::Relaxed);
            }
            PairGuard::Two { first, second } => {
                second.waiters().fetch_add(nm, Ordering::Relaxed);
                // SAFETY: `second` locks the target bucket; `first` (the source) is still held.
                unsafe { moved.append_to(second.queue(), k2, b2) };
                first.waiters().fetch_sub(nw + nm, Ordering::Relaxed);
            }
        }
        drop(pair);
        break (wake, nm as usize);
    };
    let woken = wake.len();
    wake.unpark_all();
    Ok(woken + moved)
}
