//! The waiter core that `wait` and `waitv` share: register the thread with the registry
//! (automatic sizing), queue a node if the word still holds the expected value (the waiter's
//! half of the (A)/(B) protocol, argued at the top of `wait.rs`), take our own node out again
//! after a timeout or signal, and wait for the unparks a waker owes us.

use crate::error::WaitError;
use crate::key::Key;
use crate::parker::{Park, Parker};
use crate::primitive::{fence, Ordering};
use crate::queue::NodeState;
use crate::table::Bucket;
use crate::table::Node;
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

/// Queue `node` on `key` if `*word == expected`, retrying across resizes; the bucket it went in.
pub(crate) fn enqueue<'d>(
    tables: &'d Tables,
    node: &Node,
    word: WordRef,
    expected: u64,
    key: Key,
    mask: u64,
) -> Result<&'d Bucket, WaitError> {
    loop {
        let table = tables.table(&key);
        let bucket = table.bucket(&key);
        bucket.waiters().fetch_add(1, Ordering::SeqCst); // (A)
        fence(Ordering::SeqCst); // (A): pairs with the waker's (B) fence
        let mut g = bucket.lock();
        if !tables.is_current(table) {
            // Relaxed: we leave this bucket's in-flight set; no one needs to see it promptly.
            g.waiters().fetch_sub(1, Ordering::Relaxed);
            continue;
        }
        if word.load() != expected {
            // (A): this load follows the (A) fence, which pairs with the waker's (B) fence.
            g.waiters().fetch_sub(1, Ordering::Relaxed);
            return Err(WaitError::WouldBlock);
        }
        // SAFETY:
        // - `node` is Idle and owned by this thread; `g` locks `bucket`, which owns the queue;
        // - the node outlives its time in the queue: the caller dequeues it (or awaits the
        //   waker's unpark) before returning.
        unsafe { g.queue().push_back(node, key, mask, bucket) };
        return Ok(bucket);
    }
}

/// Take our own `node` out of whatever bucket it is in now. Returns `true` if a waker had
/// already dequeued it (the caller then owes itself the wait for that waker's unpark).
pub(crate) fn dequeue_self(node: &Node) -> bool {
    loop {
        let hint = node.bucket_hint();
        // SAFETY: `hint` names a bucket of a table of the domain the caller is operating on;
        // tables are never freed while their domain lives, and the domain is borrowed.
        let bucket: &Bucket = unsafe { &*hint };
        let mut g = bucket.lock();
        if node.bucket_hint() != hint {
            continue; // moved by a requeue or resize after we read the hint
        }
        // SAFETY: we hold the lock of the bucket the node is in (confirmed above).
        match unsafe { g.queue().state_of(node) } {
            NodeState::Queued => {
                // SAFETY: as above; the node is Queued here.
                unsafe { g.queue().cancel(node) };
                // Relaxed under the lock: the dequeuer drops the count for the node it took.
                g.waiters().fetch_sub(1, Ordering::Relaxed);
                return false;
            }
            NodeState::Woken => return true,
            NodeState::Idle => unreachable!("an enqueued node is Queued or Woken"),
        }
    }
}

/// Wait, without a deadline, until `n` unparks of this episode arrived; then end the episode.
pub(crate) fn await_unparks(parker: &Parker, n: u32) {
    // The unparks are owed by wakers that already dequeued our nodes: they arrive promptly.
    while parker.park(n, None, None, None).is_err() {}
    parker.reset();
}
