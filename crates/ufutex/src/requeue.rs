//! Requeue: wake some waiters of one word and move others to another word's queue, written
//! once for every table (`engine.rs`).

use crate::engine::{Fate, Locked, Pair, Pick, WaitTable, Woken};
use crate::error::WaitError;
use crate::key::Key;
use crate::membarrier::Pays;
use crate::tables::Tables;
use crate::word::WordRef;

/// Which waiters a requeue takes: of the source key, oldest first, the first `wake` are woken
/// and the next `moves` moved to the target's tail. When the target is the source
/// (`IN_PLACE`) they are counted and left where they are, as the kernel's requeue leaves a
/// waiter whose new key hashes to the bucket it is in. (A constant: the common requeue's code
/// has no trace of the rare one.)
pub(crate) struct RequeuePick<const IN_PLACE: bool> {
    wake: usize,
    moves: usize,
    moved: usize,
}

impl<const IN_PLACE: bool> Pick for RequeuePick<IN_PLACE> {
    #[inline]
    fn pick(&mut self, ours: bool, _mask: u64) -> Fate {
        match (ours, self.wake, self.moves) {
            (_, 0, 0) => Fate::Stop,
            (false, _, _) => Fate::Skip,
            (true, 0, _) => {
                self.moves -= 1;
                self.moved += 1;
                if IN_PLACE {
                    Fate::Stay
                } else {
                    Fate::Move
                }
            }
            (true, _, _) => {
                self.wake -= 1;
                Fate::Wake
            }
        }
    }

    #[inline]
    fn whole(&mut self, n: usize) -> bool {
        let all = !IN_PLACE && self.wake == 0 && self.moves >= n;
        if all {
            self.moves -= n;
            self.moved += n;
        }
        all
    }

    #[inline]
    fn done(&self) -> bool {
        self.wake == 0 && self.moves == 0
    }

    fn not_taken(&mut self, fate: Fate) {
        if matches!(fate, Fate::Move | Fate::Stay) {
            self.moves += 1;
            self.moved -= 1;
        } else {
            self.wake += 1;
        }
    }
}

/// Why a requeue did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused<E> {
    /// The source word did not hold the expected value.
    WouldBlock,
    Table(E),
}

impl<E> From<E> for Refused<E> {
    fn from(e: E) -> Self {
        Refused::Table(e)
    }
}

/// Wake up to `nr_wake` waiters of `from` and move up to `nr_requeue` more to `to`: how many
/// were woken and moved. `check`: whether the source word holds the value it must (`None` for
/// the legacy `FUTEX_REQUEUE`, which compares nothing), asked first (linearisable at that load)
/// and again with both buckets locked. `pays`: who pays for the (A)/(B) order on `from`, as
/// its waiters do (`wait.rs`): a requeue is a waker of its source word, and looks at its bucket
/// as a wake does — with [`Pays::Waiter`] where `membarrier` works, with no fence.
#[inline(always)] // into `requeue_keys` (and the shared table's caller): one frame for the whole requeue
pub(crate) fn requeue<T: WaitTable>(
    t: &T,
    from: T::Key,
    to: T::Key,
    check: Option<impl Fn() -> bool>,
    nr_wake: usize,
    nr_requeue: usize,
    pays: Pays,
) -> Result<usize, Refused<T::Error>> {
    if from == to {
        return requeue_in_place(t, from, check, nr_wake, nr_requeue, pays);
    }
    requeue_picking::<T, _, false>(t, from, to, check, nr_wake, nr_requeue, pays)
}

/// [`requeue`] of a word onto itself: the waiters it would move are counted where they are.
#[cold]
#[inline(never)]
fn requeue_in_place<T: WaitTable, C: Fn() -> bool>(
    t: &T,
    key: T::Key,
    check: Option<C>,
    nr_wake: usize,
    nr_requeue: usize,
    pays: Pays,
) -> Result<usize, Refused<T::Error>> {
    requeue_picking::<T, C, true>(t, key, key, check, nr_wake, nr_requeue, pays)
}

#[inline(always)]
fn requeue_picking<T: WaitTable, C: Fn() -> bool, const IN_PLACE: bool>(
    t: &T,
    from: T::Key,
    to: T::Key,
    check: Option<C>,
    nr_wake: usize,
    nr_requeue: usize,
    pays: Pays,
) -> Result<usize, Refused<T::Error>> {
    let holds = || check.as_ref().is_none_or(|c| c());
    if !holds() {
        return Err(Refused::WouldBlock);
    }
    // (B), as a wake of the source: nobody queued, nothing to move.
    if !t.anyone(&from, pays) {
        return Ok(0);
    }
    // A signal handler's requeue that interrupted its thread's critical section: the waiters
    // it would take are woken instead (a requeued waiter may always be woken), when the thread
    // leaves it; reported as none now (`reentry.rs`).
    if t.defer_wake(&from, nr_wake.saturating_add(nr_requeue), crate::MATCH_ANY) {
        return Ok(0);
    }
    let mut pair = t.lock_pair(&from, &to)?;
    if !holds() {
        return Err(Refused::WouldBlock);
    }
    let mut pick = RequeuePick::<IN_PLACE> { wake: nr_wake, moves: nr_requeue, moved: 0 };
    let mut woken = <<T::Locked<'_> as Locked>::Woken>::new();
    let mut moved = Default::default();
    pair.from().take(&mut pick, &mut woken, &mut moved)?;
    match &mut pair {
        Pair::One(g) => g.accept(moved, None)?,
        Pair::Two { from, to } => to.accept(moved, Some(from))?,
    }
    pair.unlock();
    Ok(woken.wake_all() + pick.moved)
}

/// [`requeue`] of two private words, `from` compared with `expected`.
pub(crate) fn requeue_words(
    tables: &Tables,
    from: WordRef,
    expected: u64,
    to: WordRef,
    nr_wake: usize,
    nr_requeue: usize,
    pays: Pays,
) -> Result<usize, WaitError> {
    let (k1, k2) = (Key::private(from.addr()), Key::private(to.addr()));
    requeue_keys(tables, k1, k2, Some((from, expected)), nr_wake, nr_requeue, pays)
}

/// [`requeue`] in a domain's tables, with the keys given: each key's node picks its table, so a
/// requeue may move waiters between two NUMA nodes' tables (`numa.rs`; lock order in
/// `table.rs`). `check`: the source word and the value it must hold; `pays`: as for [`requeue`].
#[inline(always)] // into its four entry points, each then one frame (perf's cold requeue: BENCHMARKS.md)
pub(crate) fn requeue_keys(
    tables: &Tables,
    k1: Key,
    k2: Key,
    check: Option<(WordRef, u64)>,
    nr_wake: usize,
    nr_requeue: usize,
    pays: Pays,
) -> Result<usize, WaitError> {
    let check = check.map(|(from, expected)| move || from.load() == expected);
    requeue(tables, k1, k2, check, nr_wake, nr_requeue, pays).map_err(|e| match e {
        Refused::WouldBlock => WaitError::WouldBlock,
        Refused::Table(never) => match never {},
    })
}
