//! The waiter core that `wait` and `waitv` share: register the thread with the registry
//! (automatic sizing), queue nodes if their words still hold the expected values (the waiter's
//! half of the (A)/(B) protocol, argued at the top of `wait.rs`), take our own node out again
//! after a timeout or signal, and wait for the unparks a waker owes us.

use crate::error::WaitError;
use crate::key::Key;
use crate::membarrier::{self, Need, Pays};
use crate::parker::{Park, Parker};
use crate::primitive::{fence, Ordering};
use crate::queue::NodeState;
use crate::table::{Bucket, BucketGuard, Node, Table};
use crate::tables::Tables;
use crate::thread::ThreadData;
use crate::word::WordRef;

/// Count this thread as a user of `tables` (automatic sizing), the first time only.
#[inline]
pub(crate) fn register(tables: &Tables, td: &ThreadData) {
    if let Some(n) = td.register(tables.threads()) {
        tables.thread_arrived(n);
    }
}

/// One node to queue: on `key`, if `*word == expected`, woken by masks sharing a bit with `mask`.
#[derive(Clone, Copy)]
pub(crate) struct Want<'n> {
    pub(crate) node: &'n Node,
    pub(crate) word: WordRef,
    pub(crate) expected: u64,
    pub(crate) key: Key,
    pub(crate) mask: u64,
}

/// (A), first half: count ourselves into the key's bucket of the current table.
fn announce<'d>(tables: &'d Tables, key: &Key) -> &'d Table {
    let table = tables.table(key);
    table.bucket(key).waiters().fetch_add(1, Ordering::SeqCst); // (A)
    table
}

/// (A)'s order: the fence that pairs with a paying waker's (B) fence, and with a paying waiter
/// also the barrier that stands for every other waker's (`membarrier.rs`).
fn order(pays: Pays) {
    fence(Ordering::SeqCst); // (A)
    if pays == Pays::Waiter {
        membarrier::waiter_barrier();
    }
}

/// How [`place`] went.
enum Placed<'d> {
    Queued(&'d Bucket),
    /// The word no longer holds the value.
    Changed,
    /// The table was replaced after [`announce`]: announce again.
    Stale,
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

/// (A), second half, after (A)'s order ([`order`], or the fence and [`ordered_by_bucket`]):
/// queue `w.node` in `table` (announced) if the table is still current and the word still
/// holds its value; else take the count back.
fn place<'d>(tables: &Tables, table: &'d Table, w: &Want<'_>) -> Placed<'d> {
    let bucket = table.bucket(&w.key);
    let Some(mut g) = lock_current(tables, table, bucket) else {
        return Placed::Stale;
    };
    if w.word.load() != w.expected {
        // (A): this load follows `order`, which pairs with the waker's (B).
        g.waiters().fetch_sub(1, Ordering::Relaxed);
        return Placed::Changed;
    }
    // SAFETY:
    // - `w.node` is Idle and owned by this thread; `g` locks `bucket`, which owns the queue;
    // - the node outlives its time in the queue: the caller dequeues it (or awaits the
    //   waker's unpark) before returning.
    unsafe { g.queue().push_back(w.node, w.key, w.mask, bucket) };
    Placed::Queued(bucket)
}

/// Queue one node, retrying across resizes; the bucket it went in. With [`Pays::Waiter`] the
/// bucket says whether the barrier is needed (`membarrier::Fence`): a bucket where threads
/// sleep has its wakes fence instead.
pub(crate) fn enqueue<'d>(tables: &'d Tables, w: &Want<'_>, pays: Pays) -> Result<&'d Bucket, WaitError> {
    loop {
        let table = announce(tables, &w.key);
        fence(Ordering::SeqCst); // (A)
        if pays == Pays::Waiter && !ordered_by_bucket(tables, table, &w.key) {
            continue; // the table was replaced: announce again
        }
        match place(tables, table, w) {
            Placed::Queued(bucket) => return Ok(bucket),
            Placed::Changed => return Err(WaitError::WouldBlock),
            Placed::Stale => {}
        }
    }
}

/// A paying waiter's order for `key`'s bucket of `table` (announced): nothing if its wakers
/// fence, else the barrier (with the lock dropped), marking a FREE bucket FENCED on the way.
/// `false` if the table is no longer current (the count taken back).
fn ordered_by_bucket(tables: &Tables, table: &Table, key: &Key) -> bool {
    let bucket = table.bucket(key);
    let Some(g) = lock_current(tables, table, bucket) else {
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

/// The items of `it` in a vector, or `None` if memory for it cannot be had (a waitv's
/// vectors: the C ABI answers `ENOMEM` rather than abort). Nothing of `it` is consumed then.
pub(crate) fn try_collect<T>(it: impl ExactSizeIterator<Item = T>) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(it.len()).ok()?;
    v.extend(it);
    Some(v)
}

/// Why [`enqueue_all`] did not queue every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unqueued {
    /// A word no longer held its value: the nodes before this index are queued, the rest not.
    Changed(usize),
    /// No memory for the list of tables: nothing was queued.
    NoMemory,
}

/// Queue every node of `wants` as [`enqueue`] does one, with one [`order`] for all of them (one
/// barrier, not one per entry).
pub(crate) fn enqueue_all(tables: &Tables, wants: &[Want<'_>], pays: Pays) -> Result<(), Unqueued> {
    let mut announced: Vec<&Table> =
        try_collect(wants.iter().map(|w| announce(tables, &w.key))).ok_or(Unqueued::NoMemory)?;
    order(pays);
    for (i, w) in wants.iter().enumerate() {
        loop {
            match place(tables, announced[i], w) {
                Placed::Queued(_) => break,
                Placed::Changed => {
                    for (later, table) in wants[i + 1..].iter().zip(&announced[i + 1..]) {
                        // Relaxed: leaving an in-flight set, as in `place` (a retired bucket
                        // takes it back too: its waker re-reads the current table).
                        table.bucket(&later.key).waiters().fetch_sub(1, Ordering::Relaxed);
                    }
                    return Err(Unqueued::Changed(i));
                }
                Placed::Stale => {
                    announced[i] = announce(tables, &w.key);
                    order(pays);
                }
            }
        }
    }
    Ok(())
}

/// The lock of the bucket `node` is in now (it may move until we hold that bucket's lock).
fn lock_home(node: &Node) -> BucketGuard<'_> {
    loop {
        let hint = node.bucket_hint();
        // SAFETY: `hint` names a bucket of a table of the domain the caller is operating on;
        // tables are never freed while their domain lives, and the domain is borrowed.
        let bucket: &Bucket = unsafe { &*hint };
        let g = bucket.lock();
        if node.bucket_hint() == hint {
            return g;
        }
        // moved by a requeue or resize after we read the hint
    }
}

/// Take our own `node` out of whatever bucket it is in now. Returns `true` if a waker had
/// already dequeued it (the caller then owes itself the wait for that waker's unpark).
pub(crate) fn dequeue_self(node: &Node) -> bool {
    let mut g = lock_home(node);
    // SAFETY: we hold the lock of the bucket the node is in (confirmed by `lock_home`).
    match unsafe { g.queue().state_of(node) } {
        NodeState::Queued => {
            // SAFETY: as above; the node is Queued here.
            unsafe { g.queue().cancel(node) };
            // Relaxed under the lock: the dequeuer drops the count for the node it took.
            g.waiters().fetch_sub(1, Ordering::Relaxed);
            false
        }
        NodeState::Woken => true,
        NodeState::Idle => unreachable!("an enqueued node is Queued or Woken"),
    }
}

/// Wait, without a deadline, until `n` unparks of this episode arrived; then end the episode.
pub(crate) fn await_unparks(parker: &Parker, n: u32) {
    // The unparks are owed by wakers that already dequeued our nodes: they arrive promptly.
    while parker.park(n, None, None, None, true).is_err() {}
    parker.reset();
}
