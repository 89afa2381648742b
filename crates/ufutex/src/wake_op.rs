//! Waking on two words at once, the second wake decided by an operation on the second word
//! (the kernel's `FUTEX_WAKE_OP`): with both buckets locked, apply the caller's operation to
//! word 2, wake up to `nr1` waiters of key 1, and — if the operation says so — up to `nr2`
//! waiters of key 2. Holding both locks while the word changes is what makes it one step for
//! every waiter of either word: a waiter of word 2 compares its value under its bucket's lock,
//! so it sees the word either before the operation (and is queued, and may be woken) or after.
// Only the C ABI calls it, and the C ABI is not built under loom (its model is below).
#![cfg_attr(ufutex_loom, allow(dead_code))]

use crate::engine::{infallible, Locked, Pair, WaitTable, Woken};
use crate::key::Key;
use crate::private_table::PrivateLocked;
use crate::table::{MoveList, WakeList};
use crate::tables::Tables;
use crate::wake::{Report, WakePick};
use crate::MATCH_ANY;

/// Apply `op` to word 2 with the buckets of `k1` and `k2` locked; wake up to `nr1` waiters of
/// `k1`, and up to `nr2` of `k2` if `op` returned `Ok(true)` (any mask: the kernel's wake-op
/// has no bitset). Returns how many were woken, or `op`'s error (then nobody is woken). `op`
/// runs exactly once. Both keys' tables must exist (plain keys always have theirs; see
/// `Tables::table`).
pub(crate) fn wake_op<E>(
    tables: &Tables,
    k1: Key,
    k2: Key,
    nr1: usize,
    nr2: usize,
    op: impl FnOnce() -> Result<bool, E>,
) -> Result<usize, E> {
    // From a signal handler that interrupted its thread's critical section (`reentry.rs`):
    // the operation now, the wakes when the thread leaves it, reported as none. Without the
    // locks around the operation, a waiter of word 2 that queues before it is woken by the
    // deferred wake; one that queues after it saw the new value, and may be woken too (a wake
    // it was not promised, but a wake by a waker that dequeued it).
    if crate::reentry::busy() {
        let second = op()?;
        if nr1 > 0 {
            crate::wake::defer_private(tables, k1, nr1, MATCH_ANY);
        }
        if second && nr2 > 0 {
            crate::wake::defer_private(tables, k2, nr2, MATCH_ANY);
        }
        return Ok(0);
    }
    let mut pair = infallible(tables.lock_pair(&k1, &k2));
    let second = op()?;
    let mut woken = WakeList::new();
    let mut take = |g: &mut PrivateLocked<'_>, n| {
        infallible(g.take(&mut WakePick::new(n, MATCH_ANY, Report::Count), &mut woken, &mut MoveList::new()))
    };
    take(pair.from(), nr1);
    if second {
        match &mut pair {
            Pair::One(g) => {
                g.retarget();
                take(g, nr2);
            }
            Pair::Two { to, .. } => take(to, nr2),
        }
    }
    drop(pair);
    Ok(woken.wake_all())
}

/// loom: the second word's waiter races a `wake_op` that changes that word and wakes it if the
/// old value held. Whatever the interleaving, the waiter either saw the new value (`WouldBlock`,
/// not counted) or was woken and counted; never left asleep (loom reports that as a deadlock)
/// or queued. Run by `25-loom` (`cargo test --lib` under `--cfg ufutex_loom`).
#[cfg(all(test, ufutex_loom))]
mod loom_models {
    use super::*;
    use crate::error::WaitError;
    use crate::membarrier::Pays;
    use crate::primitive::{AtomicU32, Ordering};
    use crate::tables::{NumaMode, Slots};
    use crate::wait::{wait_key, Wakers};
    use crate::word::word_of;
    use std::sync::Arc;

    #[test]
    fn wake_op_never_loses_the_second_words_waiter() {
        loom::model(|| {
            let t = Arc::new(Tables::new(Slots::Fixed(2), NumaMode::Off).expect("a small table"));
            let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
            let (t2, w2) = (t.clone(), words.clone());
            let waiter = loom::thread::spawn(move || {
                let word = word_of(&w2.1);
                wait_key(&t2, word, Key::private(word.addr()), 0, u64::MAX, None, Wakers::Ufutex, Pays::Waiter)
            });
            let (k1, k2) = (Key::private(word_of(&words.0).addr()), Key::private(word_of(&words.1).addr()));
            let second = || Ok::<bool, ()>(words.1.swap(1, Ordering::SeqCst) == 0);
            let woken = wake_op(&t, k1, k2, 1, 1, second).expect("the operation cannot fail");
            match waiter.join().expect("the waiter") {
                Ok(()) => assert_eq!(woken, 1),
                Err(WaitError::WouldBlock) => assert_eq!(woken, 0),
                Err(e) => panic!("an untimed wait ended with {e:?}"),
            }
            assert_eq!(t.queued_waiters(), 0);
        });
    }
}
