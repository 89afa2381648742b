//! Waking on two words at once, the second wake decided by an operation on the second word
//! (the kernel's `FUTEX_WAKE_OP`): with both buckets locked, apply the caller's operation to
//! word 2, wake up to `nr1` waiters of key 1, and — if the operation says so — up to `nr2`
//! waiters of key 2. Holding both locks while the word changes is what makes it one step for
//! every waiter of either word: a waiter of word 2 compares its value under its bucket's lock
//! (in the private tables and in the shared table alike), so it sees the word either before the
//! operation (and is queued, and may be woken) or after.
// Only the C ABI calls it, and the C ABI is not built under loom (its models are below and in
// `shared/loom_tests.rs`).
#![cfg_attr(ufutex_loom, allow(dead_code))]

use crate::engine::{Locked, Pair, WaitTable, Woken};
use crate::key::Key;
use crate::membarrier::Pays;
use crate::tables::Tables;
use crate::wake::{Report, WakePick};
use crate::MATCH_ANY;

/// Why a wake-op woke nobody: its table failed, or its operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed<T, E> {
    Table(T),
    Op(E),
}

/// Apply `op` to word 2 with the buckets of `k1` and `k2` locked in `t`; wake up to `nr1`
/// waiters of `k1`, and up to `nr2` of `k2` if `op` returned `Ok(true)` (any mask: the
/// kernel's wake-op has no bitset). Returns how many were woken, or why nobody was (an error
/// of `op` comes after it ran, with the locks still held, and wakes nobody, as the kernel's).
/// `op` runs at most once, and exactly once unless locking failed.
pub(crate) fn wake_op_locked<T: WaitTable, E>(
    t: &T,
    k1: T::Key,
    k2: T::Key,
    nr1: usize,
    nr2: usize,
    op: impl FnOnce() -> Result<bool, E>,
) -> Result<usize, Failed<T::Error, E>> {
    let mut pair = t.lock_pair(&k1, &k2).map_err(Failed::Table)?;
    let second = op().map_err(Failed::Op)?;
    let mut woken = <<T::Locked<'_> as Locked>::Woken>::new();
    take(pair.from(), nr1, &mut woken).map_err(Failed::Table)?;
    if second {
        match &mut pair {
            Pair::One(g) => {
                g.retarget();
                take(g, nr2, &mut woken).map_err(Failed::Table)?;
            }
            Pair::Two { to, .. } => take(to, nr2, &mut woken).map_err(Failed::Table)?,
        }
    }
    pair.unlock();
    Ok(woken.wake_all())
}

/// Take up to `n` waiters of `g`'s key into `woken`.
fn take<L: Locked>(g: &mut L, n: usize, woken: &mut L::Woken) -> Result<(), L::Error> {
    g.take(&mut WakePick::new(n, MATCH_ANY, Report::Count), woken, &mut L::Moved::default())
}

/// [`wake_op_locked`], but without the locks when nobody waits on either word: (B) on each
/// key it may wake waiters of (as a waker paying `pays`), each found empty; the operation; (B)
/// again on `k2`, still empty — a waiter of word 2 that comes after that second look sees the
/// operation's result, one of word 1 after the first sees the caller's change to it (made
/// before the call, as before any wake). A waiter of word 2 that came between the two looks is
/// taken with the locks, after the operation: the one order the locked call never shows (the
/// operation, then that waiter's compare, then the wake that takes it) — a wake of a waiter
/// that had queued, which may always come. Where either key has waiters at the first look, the whole call is
/// [`wake_op_locked`].
///
/// From a signal handler that interrupted its thread inside one of the table's critical
/// sections (`reentry.rs`): the operation now, the wakes when the thread leaves it
/// ([`WaitTable::defer_wake`]), reported as none. Without the locks around the operation, a
/// waiter of word 2 that queues before it is woken by the deferred wake; one that queues after
/// it saw the new value, and may be woken too (a wake it was not promised, but a wake by a
/// waker that dequeued it).
pub(crate) fn wake_op_looking<T: WaitTable, E>(
    t: &T,
    k1: T::Key,
    k2: T::Key,
    (nr1, nr2): (usize, usize),
    pays: Pays,
    op: impl FnOnce() -> Result<bool, E>,
) -> Result<usize, Failed<T::Error, E>> {
    if crate::reentry::busy() {
        let second = op().map_err(Failed::Op)?;
        if nr1 > 0 {
            t.defer_wake(&k1, nr1, MATCH_ANY);
        }
        if second && nr2 > 0 {
            t.defer_wake(&k2, nr2, MATCH_ANY);
        }
        return Ok(0);
    }
    if (nr1 > 0 && t.anyone(&k1, pays)) || (nr2 > 0 && t.anyone(&k2, pays)) {
        return wake_op_locked(t, k1, k2, nr1, nr2, op);
    }
    let second = op().map_err(Failed::Op)?;
    if !second || nr2 == 0 || !t.anyone(&k2, pays) {
        return Ok(0);
    }
    wake_op_locked(t, k1, k2, nr1, nr2, || Ok(second))
}

/// [`wake_op_looking`] in a domain's tables (private keys). Both keys' tables must exist (plain
/// keys always have theirs; see `Tables::table`).
pub(crate) fn wake_op<E>(
    tables: &Tables,
    k1: Key,
    k2: Key,
    nr1: usize,
    nr2: usize,
    op: impl FnOnce() -> Result<bool, E>,
) -> Result<usize, E> {
    // The waker pays for (B) (a fence): the waiters of a C call pay too, but a `sync` waiter,
    // whose wakes always fence, does not.
    wake_op_looking(tables, k1, k2, (nr1, nr2), Pays::Waker, op).map_err(|e| match e {
        Failed::Table(never) => match never {},
        Failed::Op(e) => e,
    })
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
