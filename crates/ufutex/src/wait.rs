//! Waiting on one word.
//!
//! # The protocol (read before touching wait or wake)
//!
//! ```text
//!   waiter                                   waker
//!   (A) bucket.waiters += 1; fence(SeqCst)   *word = new               (caller's store)
//!       lock bucket                          (B) fence(SeqCst)
//!       *word == expected?                       bucket.waiters == 0?  -> return 0, no lock
//!         no  -> unlock, waiters -= 1, EAGAIN    lock bucket, dequeue up to n, unlock
//!         yes -> enqueue, unlock, park           unpark them
//! ```
//!
//! With X = waiters and Y = the word, `w[X] MB r[Y]` against `w[Y] MB r[X]` cannot read 0/0:
//! either the waiter's load sees the new value, or the waker's count read sees the waiter and
//! takes the lock — and the bucket lock, held by the waiter from its load to its enqueue, makes
//! the waker find it queued. In the C++ model both sides are SC fences: whichever of the (A)
//! and (B) fences comes first in the single order S, the other side's load after its own fence
//! sees the write sequenced before the first. (On x86 the (A) RMW is already a full barrier;
//! the fence costs a few ns on the path that is about to sleep, and makes the argument one that
//! loom checks — loom models SeqCst RMWs as AcqRel, but SC fences at full strength.)
//!
//! Resizes keep this true across tables (see `table.rs`): a retired bucket's count is ≥
//! RETIRED, so a waker holding a stale table never skips the lock; it locks, finds the table
//! not current, and retries on the current one. If the waker read 0 *before* the retire mark,
//! its read is coherence-ordered before the mark, which happens before (through the new
//! table's publication) the (A) fence of any waiter that queues in a later table; so (B)
//! precedes that fence in S, and that waiter sees the store.
//!
//! Early exit: a wait whose value already differs returns `WouldBlock` after one load, without
//! touching a bucket; that is linearisable at the load (the value differed then).

use crate::deadline::Timeout;
use crate::error::WaitError;
use crate::key::Key;
use crate::parker::{Park, ParkTimeout, Watch};
use crate::queue::Home;
use crate::table::Node;
use crate::tables::Tables;
use crate::thread::{with_thread, ThreadData};
use crate::waiter::{await_unparks, dequeue_self, enqueue, register};
use crate::word::WordRef;

/// The untyped wait every front end calls.
#[inline(always)]
pub(crate) fn wait_word(
    tables: &Tables,
    word: WordRef,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
) -> Result<(), WaitError> {
    wait_key(tables, word, Key::private(word.addr()), expected, mask, timeout, Wakers::Ufutex)
}

/// Who may end a wait with a wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wakers {
    /// Only ufutex's wakes and requeues: a return of `Ok` means one dequeued this waiter.
    Ufutex,
    /// Also the kernel, waking the (32-bit) word itself: the thread sleeps in the kernel on the
    /// word too, and such a wake ends the wait with `Ok` although no ufutex waker dequeued it
    /// — the legacy futex semantics, which allow spurious wakeups (the preload library: a
    /// raw-syscall waker, or the kernel's own wake of a thread-id word, must still reach it).
    #[cfg_attr(ufutex_loom, allow(dead_code))] // only the C ABI (not built under loom) asks
    AlsoKernel,
}

/// [`wait_word`] with the key given: its node picks the table (NUMA, see `numa.rs`).
#[inline(always)]
pub(crate) fn wait_key(
    tables: &Tables,
    word: WordRef,
    key: Key,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Result<(), WaitError> {
    if word.load() != expected {
        return Err(WaitError::WouldBlock);
    }
    wait_slow(tables, word, key, expected, mask, timeout, wakers)
}

/// Everything after the early value check, out of line: the check alone is inlined into the
/// callers (a mismatching wait costs one load and a compare).
#[inline(never)]
fn wait_slow(
    tables: &Tables,
    word: WordRef,
    key: Key,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Result<(), WaitError> {
    with_thread(|td| wait_queued(tables, td, word, key, expected, mask, timeout, wakers))
}

#[inline(never)]
#[allow(clippy::too_many_arguments)] // the operation's own arguments, plus where it runs
fn wait_queued(
    tables: &Tables,
    td: &ThreadData,
    word: WordRef,
    key: Key,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Result<(), WaitError> {
    register(tables, td);
    let node = Node::new(&td.parker, 0);
    let bell = enqueue(tables, &node, word, expected, key, mask)?.bell();
    let watch = match wakers {
        Wakers::Ufutex => None,
        Wakers::AlsoKernel => word.as_u32().map(|w| Watch { word: w, val: expected as u32, shared: false }),
    };
    match td.parker.park(1, timeout.as_ref(), Some(bell), watch) {
        Ok(()) => {
            td.parker.reset();
            Ok(())
        }
        Err(why) => {
            // Dequeued by a waker after all, or woken by the kernel on the watched word (a
            // legacy wait may return 0 without a ufutex waker): Ok.
            let woken = dequeue_self(&node);
            let r = if woken || why == ParkTimeout::Watched { Ok(()) } else { Err(why.into()) };
            await_unparks(&td.parker, u32::from(woken));
            r
        }
    }
}
