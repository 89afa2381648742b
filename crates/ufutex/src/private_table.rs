//! A domain's tables as a [`WaitTable`] (`engine.rs`): buckets in process memory, nodes linked
//! by pointer (`queue.rs`), the bucket lock of `lock.rs`, each thread's parker. (A)/(B) is the
//! bucket's waiter count with the order its bucket chooses (`membarrier.rs`); a resize replaces
//! a table, so a waiter that announced itself in a retired one announces itself again
//! ([`Placed::Stale`]) and a waker that locked one retries in the current one (`table.rs`).
//! Nothing here fails: the error type is `Infallible`.

#[cfg(not(ufutex_loom))]
use crate::engine::FenceFree;
use crate::engine::{Fate, Locked, Look, Pair, Pick, Placed, WaitTable, Want, Woken};
use crate::key::Key;
use crate::membarrier::{self, Need, Pays};
use crate::parker::{Park, Parker};
use crate::primitive::{fence, Ordering};
use crate::queue::{Ask, NodeState, Step};
use crate::table::{lock_pair_current, Bucket, BucketGuard, MoveList, Node, PairGuard, Table, WakeList};
use crate::tables::Tables;
use crate::thread::ThreadData;
use std::convert::Infallible;
use std::ptr::NonNull;

/// A locked bucket of a domain's table, with the key an operation takes waiters of (`key`)
/// and the key it gives moved waiters (`target`: a requeue's target, else `key`).
pub(crate) struct PrivateLocked<'t> {
    g: BucketGuard<'t>,
    key: Key,
    target: Key,
}

impl Woken for WakeList {
    #[inline]
    fn new() -> Self {
        WakeList::new()
    }

    #[inline]
    fn len(&self) -> usize {
        WakeList::len(self)
    }

    #[inline(always)] // the empty list's check in its caller, with no call (`unpark_all` is not)
    fn wake_all(self) -> usize {
        let n = self.len();
        if n != 0 {
            self.unpark_all(); // (a wake that took nobody, common, stays in its caller)
        }
        n
    }
}

impl Default for MoveList {
    fn default() -> Self {
        MoveList::new()
    }
}

impl Locked for PrivateLocked<'_> {
    type Error = Infallible;
    type Woken = WakeList;
    type Moved = MoveList;

    #[inline(always)] // into the wake, requeue and wake-op that hold the lock: no frame
    fn take(&mut self, pick: &mut impl Pick, woken: &mut WakeList, moved: &mut MoveList) -> Result<(), Infallible> {
        let (key, within, before) = (self.key, pick.within(), woken.len());
        let step = |ask: Ask| match ask {
            Ask::Group { len, .. } if pick.whole(len) => Step::Move,
            Ask::Group { .. } if pick.done() => Step::Stop,
            Ask::Group { .. } => Step::Take,
            Ask::Node(mask) => match pick.pick(true, mask) {
                Fate::Wake => Step::Take,
                Fate::Move => Step::Move,
                Fate::Skip | Fate::Stay => Step::Skip,
                Fate::Stop => Step::Stop,
            },
        };
        // SAFETY: `self.g` holds the bucket lock; each taken node goes straight into `woken`
        // (marked Woken, unparked after the unlock), and `moved` is appended before the unlock
        // (`accept`).
        unsafe { self.g.queue().take(&key, within, step, |node| woken.push(node), moved) };
        let n = woken.len() - before;
        if n > 0 {
            // Relaxed under the lock: the dequeuer drops the count for the nodes it took. (Not
            // for none: a wake whose mask met nobody writes nothing of the line but the lock.)
            self.g.waiters().fetch_sub(n as u32, Ordering::Relaxed);
        }
        Ok(())
    }

    #[inline(always)] // its one caller, the requeue
    fn accept(&mut self, moved: MoveList, from: Option<&mut Self>) -> Result<(), Infallible> {
        let n = moved.len() as u32;
        let bucket = self.g.bucket();
        // Counts: the target's first, so no bucket ever under-counts its waiters. Relaxed under
        // both locks: lock-free readers only compare a count with zero, and a waker on the
        // target that reads it before this increment raced the requeue itself (the moved
        // waiters were not yet on its word) — the kernel's requeue has the same window.
        if from.is_some() {
            self.g.waiters().fetch_add(n, Ordering::Relaxed);
        }
        // SAFETY: `self.g` locks the target bucket; the source's lock (`from`, or this one) is
        // still held.
        unsafe { moved.append_to(self.g.queue(), self.target, bucket) };
        if let Some(from) = from {
            from.g.waiters().fetch_sub(n, Ordering::Relaxed);
        }
        Ok(())
    }

    fn retarget(&mut self) {
        self.key = self.target;
    }

    fn decay(&mut self) {
        if self.g.waiters().load(Ordering::Relaxed) == 0 {
            self.g.bucket().fence().decay();
        }
    }

    #[inline(always)] // into `Pair::unlock`
    fn unlock_pair(from: Self, to: Self) {
        BucketGuard::unlock_both(from.g, to.g);
    }
}

impl Tables {
    /// [`WaitTable::look`] after the waker's (B) point; `LIGHT`: it left out its fence.
    #[inline(always)]
    fn look_after<const LIGHT: bool>(&self, key: &Key) -> Look<NonNull<Table>> {
        match self.see::<LIGHT>(key) {
            Seen::Nobody => Look::Nobody,
            Seen::Lock { table, busy: false } => Look::Lock { decay: false, at: NonNull::from(table) },
            // Not FREE: the lock orders this wake with the bucket's waiters.
            Seen::Lock { table, busy: true } => {
                Look::Lock { decay: look_fenced(table.bucket(key)), at: NonNull::from(table) }
            }
        }
    }

    /// What the waker's reads after its (B) point say, with one test for the common answer
    /// (FREE, or fenced, and nobody counted), so that a wake that finds nobody runs straight
    /// through; the rest locks, which dwarfs a taken branch.
    #[inline(always)]
    fn see<const LIGHT: bool>(&self, key: &Key) -> Seen<'_> {
        let Some(table) = self.table_if_any(key) else {
            return Seen::Nobody; // no table yet: nobody ever queued in this slot
        };
        let bucket = table.bucket(key);
        // (B): the mode, then the count (Relaxed after the point; 0 means no waiter and a
        // current table: table.rs invariant).
        let busy = if LIGHT { bucket.fence().busy() } else { 0 };
        let waiters = bucket.waiters().load(Ordering::Relaxed);
        if busy | waiters == 0 {
            return Seen::Nobody;
        }
        std::hint::cold_path();
        Seen::Lock { table, busy: busy != 0 }
    }

    /// What a fence-free wake ([`Pays::Waiter`]) on `key` finds, looked at only where
    /// `membarrier` is already known to work (else [`FenceFree::Unknown`], with nothing done):
    /// nobody, which is the whole wake, as [`crate::wake::wake`] would have made it; or the
    /// bucket to lock, so that the rest of the wake locks it without looking again
    /// ([`FenceFree::LockAt`]: what `look` would have found, but for a FENCED bucket's sample
    /// of its age, which [`Self::decay_hint`] takes out of line). For a caller that inlines
    /// this and keeps the rest of the wake out of line, so that its own frame makes no call
    /// (`wake::wake_private`, the C ABI's wake).
    #[cfg(not(ufutex_loom))]
    #[inline(always)]
    pub(crate) fn look_if_fence_free(&self, key: &Key) -> FenceFree<NonNull<Table>> {
        // (B): the point, then the look.
        if !membarrier::waker_start_if_ready() {
            return FenceFree::Unknown;
        }
        match self.see::<true>(key) {
            Seen::Nobody => FenceFree::Nobody,
            Seen::Lock { table, busy } => FenceFree::LockAt { at: NonNull::from(table), busy },
        }
    }

    /// The decay hint that `look` gives with a [`FenceFree::LockAt`] of `at`, `busy`, which
    /// [`Self::look_if_fence_free`] of these tables found.
    #[cfg(not(ufutex_loom))]
    #[inline]
    pub(crate) fn decay_hint(&self, key: &Key, at: NonNull<Table>, busy: bool) -> bool {
        // SAFETY: `at` is a table of these tables (the look read it from a slot), and tables
        // are never freed while their domain lives (`table.rs`).
        busy && look_fenced(unsafe { at.as_ref() }.bucket(key))
    }
}

/// What [`Tables::see`] found.
enum Seen<'t> {
    Nobody,
    /// Lock `table`'s bucket; `busy`: it is not FREE ([`membarrier::Fence::busy`]).
    Lock {
        table: &'t Table,
        busy: bool,
    },
}

impl WaitTable for Tables {
    type Key = Key;
    type Waiter<'w> = &'w Node;
    type Announced<'t> = &'t Table;
    type Locked<'t> = PrivateLocked<'t>;
    type Error = Infallible;

    /// The table the look read, whose bucket of the key it found.
    type At = NonNull<Table>;

    #[inline(always)]
    fn look(&self, key: &Key, pays: Pays) -> Look<NonNull<Table>> {
        // (B). The rest is compiled once for each answer, so that the fence-free wake does not
        // carry the answer in a register and test it again after the table's lookup (3
        // instructions of the wake's ~30).
        if membarrier::waker_start(pays) {
            self.look_after::<true>(key)
        } else {
            self.look_after::<false>(key)
        }
    }

    #[inline(always)]
    fn anyone(&self, key: &Key, pays: Pays) -> bool {
        // (B), then the count and the mode; no sample of a FENCED bucket's age (`look`'s decay
        // hint), which a requeue would not use.
        if membarrier::waker_start(pays) {
            !matches!(self.see::<true>(key), Seen::Nobody)
        } else {
            !matches!(self.see::<false>(key), Seen::Nobody)
        }
    }

    #[inline(always)] // the check in its caller, which makes no call for it; a deferral out of line
    fn defer_wake(&self, key: &Key, n: usize, mask: u64) -> bool {
        let busy = crate::reentry::busy();
        if busy {
            crate::wake::defer_private(self, *key, n, mask);
        }
        busy
    }

    #[inline]
    fn lock(&self, key: &Key) -> Result<PrivateLocked<'_>, Infallible> {
        // (As `lock_at` and `lock_pair`, the wakers' other ways in; a waiter met the check
        // when its episode began: `reentry::episode`.)
        #[cfg(not(ufutex_loom))]
        crate::fork_mark::check();
        loop {
            let table = self.table(key);
            let g = table.bucket(key).lock();
            if self.is_current(table) {
                return Ok(PrivateLocked { g, key: *key, target: *key });
            }
        }
    }

    #[inline]
    fn lock_at(&self, key: &Key, at: NonNull<Table>) -> Result<PrivateLocked<'_>, Infallible> {
        #[cfg(not(ufutex_loom))]
        crate::fork_mark::check();
        // SAFETY: `at` is a table of these tables (the look read it from a slot), and tables
        // are never freed while their domain lives (`table.rs`).
        let table = unsafe { at.as_ref() };
        let g = table.bucket(key).lock();
        if self.is_current(table) {
            return Ok(PrivateLocked { g, key: *key, target: *key });
        }
        drop(g);
        self.lock(key) // resized since the look
    }

    #[inline(always)] // its two callers (requeue, wake-op) are its only ones: no frame, no pair through memory
    fn lock_pair(&self, from: &Key, to: &Key) -> Result<Pair<PrivateLocked<'_>>, Infallible> {
        #[cfg(not(ufutex_loom))]
        crate::fork_mark::check();
        let (k1, k2) = (*from, *to);
        loop {
            let (t1, t2) = (self.table(&k1), self.table(&k2));
            let (b1, b2) = (t1.bucket(&k1), t2.bucket(&k2));
            return Ok(match lock_pair_current((t1, b1), (t2, b2), |t| self.is_current(t)) {
                None => continue,
                Some(PairGuard::One(g)) => Pair::One(PrivateLocked { g, key: k1, target: k2 }),
                Some(PairGuard::Two { first, second }) => Pair::Two {
                    from: PrivateLocked { g: first, key: k1, target: k1 },
                    to: PrivateLocked { g: second, key: k2, target: k2 },
                },
            });
        }
    }

    /// (A), first half: count ourselves into the key's bucket of the current table.
    #[inline]
    fn announce(&self, w: &Want<'_, Self>) -> Result<&Table, Infallible> {
        let table = self.table(&w.key);
        table.bucket(&w.key).waiters().fetch_add(1, Ordering::SeqCst); // (A)
        Ok(table)
    }

    /// (A)'s order: the fence that pairs with a paying waker's (B) fence, and with a paying
    /// waiter also the barrier that stands for every other waker's (`membarrier.rs`).
    fn order(&self, pays: Pays) {
        fence(Ordering::SeqCst); // (A)
        if pays == Pays::Waiter {
            membarrier::waiter_barrier();
        }
    }

    /// The fence, and with [`Pays::Waiter`] what the bucket says (`membarrier::Fence`): nothing
    /// if its wakers fence, else the barrier (with the lock dropped), marking a FREE bucket
    /// FENCED on the way.
    #[inline]
    fn order_one(&self, table: &Table, w: &Want<'_, Self>, pays: Pays) -> bool {
        fence(Ordering::SeqCst); // (A)
        if pays == Pays::Waker {
            return true;
        }
        let bucket = table.bucket(&w.key);
        let Some(g) = lock_current(self, table, bucket) else {
            return false;
        };
        let need = bucket.fence().waiter_came();
        drop(g);
        if let Need::Barrier { switching } = need {
            membarrier::waiter_barrier();
            if switching {
                let _g = bucket.lock();
                bucket.fence().switched();
            }
        }
        true
    }

    /// Queue the node in `table` (announced) if the table is still current and the word still
    /// holds its value; else take the count back.
    #[inline]
    fn place(&self, table: &Table, w: &Want<'_, Self>) -> Result<Placed, Infallible> {
        let bucket = table.bucket(&w.key);
        let Some(mut g) = lock_current(self, table, bucket) else {
            return Ok(Placed::Stale);
        };
        if w.word.load() != w.expected {
            // (A): this load follows the order, which pairs with the waker's (B).
            g.waiters().fetch_sub(1, Ordering::Relaxed);
            return Ok(Placed::Changed);
        }
        // SAFETY:
        // - `w.waiter` is Idle and owned by this thread; `g` locks `bucket`, which owns the queue;
        // - the node outlives its time in the queue: the caller dequeues it (or awaits the
        //   waker's unpark) before returning.
        unsafe { g.queue().push_back(w.waiter, w.key, w.mask, bucket) };
        Ok(Placed::Queued)
    }

    fn withdraw(&self, table: &Table, w: &Want<'_, Self>) {
        // Relaxed: leaving an in-flight set, as in `place` (a retired bucket takes it back too:
        // its waker re-reads the current table).
        table.bucket(&w.key).waiters().fetch_sub(1, Ordering::Relaxed);
    }

    fn dequeue_self(&self, node: &Node) -> Result<bool, Infallible> {
        let Some(mut g) = lock_home(self, node) else {
            return Ok(true); // a waker took it
        };
        // SAFETY: we hold the lock of the bucket the node is in (confirmed by `lock_home`).
        Ok(match unsafe { g.queue().state_of(node) } {
            NodeState::Queued => {
                // SAFETY: as above; the node is Queued here.
                unsafe { g.queue().cancel(node) };
                // Relaxed under the lock: the dequeuer drops the count for the node it took.
                g.waiters().fetch_sub(1, Ordering::Relaxed);
                false
            }
            NodeState::Woken => true,
            NodeState::Idle => unreachable!("an enqueued node is Queued or Woken"),
        })
    }

    /// A waitv's node `i` is its entry `i`'s, and comes `i`-th (`waitv.rs`).
    fn index(_: &Node, position: usize) -> usize {
        position
    }
}

/// [`WaitTable::look`] in a bucket whose waiters do not pay for the (A)/(B) order
/// (`membarrier::Fence`: not FREE). The waker pays with the bucket's lock, not a fence: a
/// waiter compares its word under that lock (`place`), so a waker that takes it after its
/// store either finds the waiter queued or has made the store visible to the waiter's compare
/// (the lock's release and acquire order them). A fence and a lockless look at the count first
/// would add a barrier, and the count is rarely 0 here: the bucket is FENCED because threads
/// sleep in it. A sampled wake that finds nobody also sees whether the bucket may go back to
/// FREE.
#[inline]
fn look_fenced(bucket: &Bucket) -> bool {
    bucket.fence().waker_looks() == membarrier::Waker::LookAtAge
}

/// The lock of `bucket` of `table` (announced), if the table is still current; else `None`,
/// the count taken back.
fn lock_current<'b>(tables: &Tables, table: &Table, bucket: &'b Bucket) -> Option<BucketGuard<'b>> {
    let g = bucket.lock();
    if tables.is_current(table) {
        return Some(g);
    }
    // Relaxed: we leave this bucket's in-flight set; no one needs to see it promptly.
    g.waiters().fetch_sub(1, Ordering::Relaxed);
    None
}

/// The lock of the bucket `node` is in now (it may move until we hold that bucket's lock), or
/// `None` once a waker has taken it. The node's group names its key, whose bucket in the
/// current table is where the group is unless a requeue or resize is moving it; the group
/// record may even serve another group by the time we read it (`group.rs`). So the bucket is
/// derived from the key, in this domain's tables (valid memory whatever the key), and trusted
/// only once its lock is held and the node and group are found where they were said to be.
fn lock_home<'t>(tables: &'t Tables, node: &Node) -> Option<BucketGuard<'t>> {
    loop {
        let (group, key) = node.whereabouts()?;
        let Some(table) = tables.table_of_hint(&key) else {
            continue; // a key read stale or torn, of no slot here
        };
        let bucket = table.bucket(&key);
        let g = bucket.lock();
        if node.still_in(group, bucket) {
            return Some(g);
        }
        // moved by a requeue or resize after we looked
    }
}

/// Count this thread as a user of `tables` (automatic sizing), the first time only.
#[inline]
pub(crate) fn register(tables: &Tables, td: &ThreadData) {
    if let Some(n) = td.register(tables.threads()) {
        // Before any thread of the process first queues: a child forked later forgets the
        // parent's waiters (`fork.rs`).
        #[cfg(not(ufutex_loom))]
        crate::fork::watch();
        tables.thread_arrived(n);
    }
}

/// Wait, without a deadline, until `n` unparks of this episode arrived; then end the episode.
pub(crate) fn await_unparks(parker: &Parker, n: u32) {
    // The unparks are owed by wakers that already dequeued our nodes: they arrive promptly.
    while parker.park(n, None, None, &[], true).is_err() {}
    parker.reset();
}

/// Take our own `node` out of whatever bucket it is in now: `true` if a waker had already
/// dequeued it.
pub(crate) fn dequeue_self(tables: &Tables, node: &Node) -> bool {
    crate::engine::infallible(tables.dequeue_self(node))
}
