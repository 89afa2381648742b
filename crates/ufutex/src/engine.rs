//! The table abstraction the operations are written against.
//!
//! A table keeps waiters in hashed buckets: where the buckets live, how a queue is linked, how
//! a bucket is locked and how a waiter is parked and woken is the table's business ([`WaitTable`],
//! [`Locked`]). What the operations do with a table is written once: the order of the (A)/(B)
//! protocol's steps, what a waiter does when its word changed or its table was replaced, and how
//! it takes itself out again (`waiter.rs`); which waiters a wake or a requeue takes ([`Pick`]:
//! `wake.rs`, `requeue.rs`).
//!
//! Two tables implement it:
//! - `Tables` (`private_table.rs`): a domain's tables in process memory, nodes linked by
//!   pointer, the bucket's waiter count and `membarrier` for (A)/(B), tables replaced by a
//!   resize (a waiter then announces itself again: [`Placed::Stale`]), the thread's parker;
//! - the process-shared table (`shared/engine.rs`): a segment, records linked by index, robust
//!   bucket locks, the filter for (A)/(B), a park word in the segment; errors for a segment
//!   found corrupt.
//!
//! A new kind of table (another memory, another lock, another parker) implements these two
//! traits and gets every operation.

use crate::membarrier::Pays;
use crate::word::WordRef;

/// What an operation does with a queued waiter it looks at (oldest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Leave it.
    Skip,
    /// Dequeue it and wake it.
    Wake,
    /// Dequeue it and move it to the requeue's target.
    Move,
    /// Count it as moved and leave it where it is: a requeue onto its own key (the kernel's
    /// requeue leaves a waiter whose new key hashes to its bucket in its place).
    Stay,
    /// Look no further.
    Stop,
}

/// Which waiters an operation takes (`wake.rs`, `requeue.rs`): asked about each waiter of the
/// bucket in queue order until it says [`Fate::Stop`] or the queue ends.
pub(crate) trait Pick {
    /// A waiter with wake mask `mask`; `ours`: it waits on the operation's key (else another
    /// key that shares the bucket).
    fn pick(&mut self, ours: bool, mask: u64) -> Fate;
    /// Whether the next `n` waiters of the key, none looked at, are all moved (a requeue whose
    /// count covers them): then a table may move them as one piece (`queue::Ask::Group`), and
    /// the pick counts them as moved. No by default.
    #[inline(always)]
    fn whole(&mut self, n: usize) -> bool {
        let _ = n;
        false
    }
    /// A mask it says [`Fate::Skip`] to every waiter outside of (a waiter whose mask shares no
    /// bit with it): a table may pass over such waiters without a look, or over a group of
    /// them by the union of their masks. Every bit by default (it may take any).
    #[inline(always)]
    fn within(&self) -> u64 {
        !0
    }
    /// Whether it says [`Fate::Stop`] to the next waiter whatever that is: a table may then
    /// stop without a look at it (its line is likely in another CPU's cache). No by default.
    #[inline(always)]
    fn done(&self) -> bool {
        false
    }
    /// The waiter just given `fate` ([`Fate::Wake`] or [`Fate::Move`]) was not taken: its
    /// process died. It does not count. (Only the shared table, which loom builds leave out,
    /// says so.)
    #[cfg_attr(ufutex_loom, allow(dead_code))]
    fn not_taken(&mut self, fate: Fate);
}

/// How a waker's look at a key went, after its (B) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look<A> {
    /// No waiter can be queued on the key: nothing to lock.
    Nobody,
    /// Lock the bucket, found `at` ([`WaitTable::At`]); `decay`: if it turns out to have no
    /// waiter, the table may relax how its waiters and wakers pay for (A)/(B)
    /// ([`Locked::decay`]).
    Lock { decay: bool, at: A },
}

/// What a waker's look found where it may leave out its fence (`membarrier` known to work), for
/// a caller that inlines the look and keeps the rest of the wake out of line, which then
/// starts from it (`wake::wake_private`, the C ABI's wake).
#[cfg(not(ufutex_loom))]
pub(crate) enum FenceFree<A> {
    /// Nobody waits: that is the whole wake.
    Nobody,
    /// Lock the bucket, found `at`; `busy`: the bucket is not FREE (a FENCED bucket's wake
    /// samples its age: [`Look::Lock`]'s `decay`).
    LockAt { at: A, busy: bool },
    /// `membarrier` is not known to work yet: the whole wake, which looks again.
    Unknown,
}

/// One waiter to queue: on `key`, if `*word == expected`, woken by masks sharing a bit with
/// `mask`.
pub(crate) struct Want<'w, T: WaitTable + ?Sized> {
    pub(crate) waiter: T::Waiter<'w>,
    pub(crate) word: WordRef,
    pub(crate) expected: u64,
    pub(crate) key: T::Key,
    pub(crate) mask: u64,
}

impl<T: WaitTable + ?Sized> Clone for Want<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: WaitTable + ?Sized> Copy for Want<'_, T> {}

/// How [`WaitTable::place`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    Queued,
    /// The word no longer holds the value; the waiter's count is taken back.
    Changed,
    /// The table was replaced after the waiter announced itself; its count is taken back:
    /// announce again.
    Stale,
}

/// Two buckets locked for a requeue: one if both keys hash to the same bucket.
pub(crate) enum Pair<L> {
    One(L),
    Two { from: L, to: L },
}

impl<L> Pair<L> {
    /// The source key's bucket.
    pub(crate) fn from(&mut self) -> &mut L {
        match self {
            Pair::One(g) | Pair::Two { from: g, .. } => g,
        }
    }
}

impl<L: Locked> Pair<L> {
    /// Unlock both buckets ([`Locked::unlock_pair`]), in a function of the hot code
    /// (`hot_code.rs`), where the compiler would otherwise leave the drop's own function among
    /// the cold code.
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
    pub(crate) fn unlock(self) {
        match self {
            Pair::One(g) => drop(g),
            Pair::Two { from, to } => L::unlock_pair(from, to),
        }
    }
}

/// Waiters a waker took, woken once the bucket lock is dropped (or already, by a table that
/// must wake under the lock).
pub(crate) trait Woken {
    fn new() -> Self;
    fn len(&self) -> usize;
    /// Wake them; how many were woken.
    fn wake_all(self) -> usize;
}

/// A table of hashed wait queues. The operations in `waiter.rs`, `wake.rs` and `requeue.rs`
/// are written against this; see the module docs.
pub(crate) trait WaitTable {
    /// What waiters and wakers meet on.
    type Key: Copy + PartialEq;
    /// One queued waiter: a thread's node, a record.
    type Waiter<'w>: Copy;
    /// What announcing a waiter ((A)'s count) leaves for placing it: the table counted in.
    type Announced<'t>: Copy
    where
        Self: 't;
    /// A locked bucket.
    type Locked<'t>: Locked<Error = Self::Error>
    where
        Self: 't;
    /// The table cannot be used (a corrupt segment); `Infallible` for one that always can.
    type Error;

    // The waker's side.

    /// Where a waker's look found a key's bucket, so that its lock need not find it again
    /// (`()` for a table where finding it is no work to save).
    type At: Copy;

    /// (B): the waker's order after its store, then whether a waiter of `key` may be queued.
    fn look(&self, key: &Self::Key, pays: Pays) -> Look<Self::At>;
    /// [`WaitTable::look`] for a waker that only asks whether to lock (a requeue, which locks
    /// two buckets its own way): the same (B) and the same "nobody", without what a wake does
    /// besides (the private table samples a FENCED bucket's age for its decay).
    #[inline(always)]
    fn anyone(&self, key: &Self::Key, pays: Pays) -> bool {
        !matches!(self.look(key, pays), Look::Nobody)
    }
    /// If the calling thread is inside one of this table's critical sections (the call comes
    /// from a signal handler that interrupted it: `reentry.rs`), leave a wake of up to `n`
    /// waiters of `key` (masks sharing a bit with `mask`) for the thread to make when it
    /// leaves, and say so; else `false`. Asked by a waker that found a bucket to lock, before
    /// it locks. A table whose locks a handler cannot meet this way says `false`.
    #[inline(always)]
    fn defer_wake(&self, key: &Self::Key, n: usize, mask: u64) -> bool {
        let _ = (key, n, mask);
        false
    }
    /// Lock `key`'s bucket (of the current table).
    fn lock(&self, key: &Self::Key) -> Result<Self::Locked<'_>, Self::Error>;
    /// [`WaitTable::lock`], for a waker whose look found the bucket `at` (by default found again).
    fn lock_at(&self, key: &Self::Key, at: Self::At) -> Result<Self::Locked<'_>, Self::Error> {
        let _ = at;
        self.lock(key)
    }
    /// Lock the buckets of `from` and `to` in the table's lock order, for a requeue: the
    /// source guard takes `from`'s waiters, the target guard (the same one if both keys share
    /// a bucket) accepts them as `to`'s.
    fn lock_pair(&self, from: &Self::Key, to: &Self::Key) -> Result<Pair<Self::Locked<'_>>, Self::Error>;

    // The waiter's side.

    /// (A), first half: count `w` in on its key's bucket.
    fn announce(&self, w: &Want<'_, Self>) -> Result<Self::Announced<'_>, Self::Error>;
    /// (A)'s order, after announcing every waiter of a wait and before placing any.
    fn order(&self, pays: Pays);
    /// (A)'s order for one waiter: the table may choose it per bucket. `false`: the table was
    /// replaced meanwhile (the count taken back): announce again.
    fn order_one(&self, a: Self::Announced<'_>, w: &Want<'_, Self>, pays: Pays) -> bool;
    /// (A), second half, after the order: queue `w` if its word still holds its value.
    fn place(&self, a: Self::Announced<'_>, w: &Want<'_, Self>) -> Result<Placed, Self::Error>;
    /// Take back the count of a waiter announced but not to be placed.
    fn withdraw(&self, a: Self::Announced<'_>, w: &Want<'_, Self>);
    /// Take our own queued waiter out of whatever bucket it is in now: `true` if a waker had
    /// already taken it (it owes the thread a wake).
    fn dequeue_self(&self, w: Self::Waiter<'_>) -> Result<bool, Self::Error>;
    /// The index a wake of `w` reports (its entry in the caller's vector), `w` being the
    /// `position`-th waiter the caller settles (`waiter::take_back`).
    fn index(w: Self::Waiter<'_>, position: usize) -> usize;
}

/// A locked bucket of a [`WaitTable`]; unlocked when dropped.
pub(crate) trait Locked {
    type Error;
    /// Waiters taken to be woken.
    type Woken: Woken;
    /// Waiters taken to be moved.
    type Moved: Default;
    /// Ask `pick` about each waiter in queue order: dequeue those it wakes into `woken`, those
    /// it moves into `moved`. Taken waiters no longer count as this bucket's.
    fn take(
        &mut self,
        pick: &mut impl Pick,
        woken: &mut Self::Woken,
        moved: &mut Self::Moved,
    ) -> Result<(), Self::Error>;
    /// Append `moved` (taken with [`Fate::Move`] from `from`'s queue, or from this bucket's if
    /// `None`) to this bucket's queue, on the requeue's target key.
    fn accept(&mut self, moved: Self::Moved, from: Option<&mut Self>) -> Result<(), Self::Error>;
    /// Take waiters of the target key from here on (the second word of a `FUTEX_WAKE_OP`
    /// whose bucket is the first word's).
    fn retarget(&mut self);
    /// A wake that took nobody, with [`Look::Lock`]'s `decay`: see whether the bucket may relax.
    fn decay(&mut self);
    /// Unlock the two buckets of a [`Pair::Two`]: as dropping `from`, then `to`.
    #[inline(always)]
    fn unlock_pair(from: Self, to: Self)
    where
        Self: Sized,
    {
        drop(from);
        drop(to);
    }
}

/// The value of a result that cannot be an error (a table whose error is `Infallible`).
#[inline(always)]
pub(crate) fn infallible<V>(r: Result<V, std::convert::Infallible>) -> V {
    match r {
        Ok(v) => v,
        Err(never) => match never {},
    }
}
