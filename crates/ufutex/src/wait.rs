//! Waiting on one word.
//!
//! # The protocol (read before touching wait or wake)
//!
//! ```text
//!   waiter                                     waker
//!   spin: *word != expected? -> EAGAIN         *word = new                (caller's store)
//!   (A) bucket.waiters += 1; fence(SeqCst)     (B) point (see below)
//!       [Pays::Waiter: membarrier]                 bucket.waiters == 0?  -> return 0, no lock
//!       lock bucket                                lock bucket, dequeue up to n, unlock
//!       *word == expected?                         unpark them
//!         no  -> unlock, waiters -= 1, EAGAIN
//!         yes -> enqueue, unlock, park
//! ```
//!
//! With X = waiters and Y = the word, `w[X] MB r[Y]` against `w[Y] MB r[X]` cannot read 0/0:
//! either the waiter's load sees the new value, or the waker's count read sees the waiter and
//! takes the lock — and the bucket lock, held by the waiter from its load to its enqueue, makes
//! the waker find it queued. Who pays for the two MBs is chosen per word (`membarrier.rs`):
//! - [`Pays::Waker`] (`ufutex::sync`): (B) is a `fence(SeqCst)`. In the C++ model both sides
//!   are SC fences: whichever of the (A) and (B) fences comes first in the single order S, the
//!   other side's load after its own fence sees the write sequenced before the first. (loom
//!   models SeqCst RMWs as AcqRel but SC fences at full strength, so the (A) fence makes this
//!   an argument loom checks.)
//! - [`Pays::Waiter`] (everything else): the bucket chooses (`membarrier::Fence`). While it is
//!   FREE, (B) is a compiler barrier and the waiter calls `membarrier` between its (A) fence and
//!   its compare. The kernel makes every other running thread of the process execute a full
//!   barrier during that call, so the waker behaves as if its (B) fence sat wherever that
//!   barrier landed: before its count read (which then sees the increment, made before the
//!   call), or after its store (which the compare, made after the call, then sees). Once
//!   threads sleep in the bucket it turns FENCED (after one such barrier): (B) is a fence again
//!   and its waiters pay nothing; 20 ms without a new sleeper turn it FREE again. Without
//!   `membarrier` (`membarrier.rs`), (B) is always a fence.
//!
//! A paying waiter first spins on the word (the parker's adaptive budget) and returns
//! `WouldBlock` if it changes: a wait that has not queued yet may look later, linearisable at
//! the load that saw the change. That keeps the barrier — ~100 ns, ~12 µs when it must
//! interrupt another CPU — off every wait whose partner answers within the spin, and the
//! bucket FREE.
//!
//! Resizes keep this true across tables (see `table.rs`): a retired bucket's count is ≥
//! RETIRED, so a waker holding a stale table never skips the lock; it locks, finds the table
//! not current, and retries on the current one. If the waker read 0 *before* the retire mark,
//! its read is coherence-ordered before the mark, which happens before (through the new
//! table's publication) the (A) fence of any waiter that queues in a later table; so (B)
//! precedes that fence in S (or, with a paying waiter, its barrier), and that waiter sees the
//! store.
//!
//! Early exit: a wait whose value already differs returns `WouldBlock` after one load, without
//! touching a bucket; that is linearisable at the load (the value differed then).

use crate::deadline::Timeout;
use crate::engine::Want;
use crate::error::WaitError;
use crate::key::Key;
use crate::membarrier::Pays;
use crate::parker::{Park, ParkTimeout, Watch};
use crate::private_table::{await_unparks, dequeue_self, register};
use crate::queue::Home;
use crate::tables::Tables;
use crate::thread::with_thread;
use crate::waiter::{enqueue, Why};
use crate::word::WordRef;

/// The untyped wait every front end calls.
#[inline(always)]
pub(crate) fn wait_word(
    tables: &Tables,
    word: WordRef,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
    pays: Pays,
) -> Result<(), WaitError> {
    wait_key(tables, word, Key::private(word.addr()), expected, mask, timeout, Wakers::Ufutex, pays)
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
#[allow(clippy::too_many_arguments)] // the operation's own arguments, plus who wakes and pays
pub(crate) fn wait_key(
    tables: &Tables,
    word: WordRef,
    key: Key,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
    wakers: Wakers,
    pays: Pays,
) -> Result<(), WaitError> {
    if word.load() != expected {
        return Err(WaitError::WouldBlock);
    }
    wait_slow(tables, word, key, expected, mask, timeout, wakers, pays)
}

/// Everything after the early value check, out of line: the check alone is inlined into the
/// callers (a mismatching wait costs one load and a compare).
#[inline(never)]
#[allow(clippy::too_many_arguments)] // as `wait_key`
fn wait_slow(
    tables: &Tables,
    word: WordRef,
    key: Key,
    expected: u64,
    mask: u64,
    timeout: Option<Timeout>,
    wakers: Wakers,
    pays: Pays,
) -> Result<(), WaitError> {
    // A signal handler's wait that interrupted its thread's own wait or critical section
    // must not queue (`reentry.rs`).
    let Some(_episode) = crate::reentry::episode() else {
        return Err(WaitError::Interrupted);
    };
    // A deadline already passed ends the wait here, as the kernel's timer would at once: the
    // wait is linearisable at the load that matched, its timeout at the clock read after it.
    // (It spun, queued and slept until the kernel's timer fired: ~25 µs for nothing.)
    if timeout.is_some_and(|t| t.expired()) {
        return Err(WaitError::TimedOut);
    }
    with_thread(|td| {
        register(tables, td);
        // A paying waiter spins on the word before it queues (see the module docs): a change
        // seen here is a mismatch, linearisable at the load that saw it.
        if pays == Pays::Waiter && td.parker.spin_for(|| word.load() != expected) {
            return Err(WaitError::WouldBlock);
        }
        // SAFETY: this thread is between episodes: the previous one ended with its node idle
        // (reclaimed below) and every owed unpark received.
        let node = unsafe { td.plain_node() };
        let table = match enqueue(tables, &Want { waiter: node, word, expected, key, mask }, pays) {
            Ok(table) => table,
            Err(Why::Changed) => return Err(WaitError::WouldBlock),
            Err(Why::NoMemory) => unreachable!("one waiter allocates nothing"),
            Err(Why::Table(never)) => match never {},
        };
        let bell = table.bucket(&key).bell();
        let watch = match wakers {
            Wakers::Ufutex => None,
            Wakers::AlsoKernel => word.as_u32().map(|w| Watch { word: w, val: expected as u32, shared: false }),
        };
        // The paying waiter has spun already; the other spins for its unpark.
        match td.parker.park(1, timeout.as_ref(), Some(bell), watch.as_slice(), pays == Pays::Waker) {
            Ok(()) => {
                td.parker.reset();
                // SAFETY: a waker dequeued the node and its unpark has arrived: nobody else
                // references it any more.
                unsafe { node.reclaim() };
                Ok(())
            }
            Err(why) => {
                // Dequeued by a waker after all, or woken by the kernel on the watched word (a
                // legacy wait may return 0 without a ufutex waker): Ok.
                let woken = dequeue_self(tables, node);
                let r = if woken || matches!(why, ParkTimeout::Watched(_)) { Ok(()) } else { Err(why.into()) };
                await_unparks(&td.parker, u32::from(woken));
                // SAFETY: out of its queue (by us or a waker) and every owed unpark received.
                unsafe { node.reclaim() };
                r
            }
        }
    })
}
