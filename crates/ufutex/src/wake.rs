//! Waking waiters on one key: the (B) side of the protocol in `wait.rs`. One path for every
//! caller; a lock's unlock also asks whether a matching waiter was left queued.

use crate::key::Key;
use crate::membarrier::{self, Pays};
use crate::primitive::Ordering;
use crate::queue::Step;
use crate::table::{Table, WakeList};
use crate::tables::Tables;
use crate::word::WordRef;

/// What a wake reports besides how many it woke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// Only the count.
    Count,
    /// Also whether a matching waiter was left queued (as seen under the bucket lock): a
    /// lock's unlock uses it to keep its "parked" bit.
    Rest,
}

/// The outcome of a wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Woken {
    /// Waiters dequeued and unparked.
    pub(crate) count: usize,
    /// With [`Report::Rest`]: a matching waiter is still queued. Always `false` otherwise.
    pub(crate) more: bool,
}

const NONE: Woken = Woken { count: 0, more: false };

/// Wake up to `n` waiters on `key` whose mask shares a bit with `mask`, oldest first. `pays`:
/// as every waiter of the word does (`membarrier.rs`).
#[inline(always)] // the no-waiter path is a few loads: inlined into every caller
pub(crate) fn wake(tables: &Tables, key: Key, n: usize, mask: u64, report: Report, pays: Pays) -> Woken {
    if n == 0 {
        return NONE;
    }
    let light = membarrier::waker_start(pays); // (B)
    let Some(table) = tables.table_if_any(&key) else {
        return NONE; // no table yet: nobody ever queued in this slot
    };
    let bucket = table.bucket(&key);
    if light && !bucket.fence().free() {
        return wake_fenced(tables, table, key, n, mask, report); // (B), out of line
    }
    // (B): Relaxed after the point; 0 means no waiter and a current table (table.rs invariant).
    if bucket.waiters().load(Ordering::Relaxed) == 0 {
        return NONE;
    }
    wake_locked(tables, table, key, n, mask, report, false)
}

/// [`wake`] in a bucket whose waiters do not pay for the (A)/(B) order (`membarrier::Fence`:
/// not FREE). The waker pays with the bucket's lock, not a fence: a waiter compares its word
/// under that lock (`waiter::place`), so a waker that takes it after its store either finds the
/// waiter queued or has made the store visible to the waiter's compare (the lock's release and
/// acquire order them). A fence and a lockless look at the count first would add a barrier,
/// and the count is rarely 0 here: the bucket is FENCED because threads sleep in it. A sampled
/// wake that finds nobody also sees whether the bucket may go back to FREE.
#[inline(never)]
fn wake_fenced<'t>(tables: &'t Tables, table: &'t Table, key: Key, n: usize, mask: u64, report: Report) -> Woken {
    let look = table.bucket(&key).fence().waker_looks(); // (B): the lock below
    wake_locked(tables, table, key, n, mask, report, look == membarrier::Waker::LookAtAge)
}

/// [`wake`] of a private word, reporting the count.
#[inline]
pub(crate) fn wake_word(tables: &Tables, word: WordRef, n: usize, mask: u64, pays: Pays) -> usize {
    wake(tables, Key::private(word.addr()), n, mask, Report::Count, pays).count
}

/// Take and unpark under the bucket lock; `decay`: if nobody is waiting in the bucket, see
/// whether it may go back to FREE (`membarrier::Fence::decay`).
#[inline(never)]
fn wake_locked<'t>(
    tables: &'t Tables,
    mut table: &'t Table,
    key: Key,
    n: usize,
    mask: u64,
    report: Report,
    decay: bool,
) -> Woken {
    let mut more = false;
    let list = loop {
        let mut g = table.bucket(&key).lock();
        if !tables.is_current(table) {
            drop(g);
            table = tables.table(&key);
            continue;
        }
        let mut list = WakeList::new();
        let mut left = n;
        // Take matching nodes until `n` are taken; then, with `Report::Rest`, look on for one
        // more match (and stop there), else stop at once.
        let pick = |k: &Key, m: u64| match (*k == key && m & mask != 0, left, report) {
            (true, 0, _) => {
                more = report == Report::Rest;
                Step::Stop
            }
            (true, _, _) => {
                left -= 1;
                Step::Take
            }
            (false, 0, Report::Count) => Step::Stop,
            (false, _, _) => Step::Skip,
        };
        // SAFETY: `g` holds the bucket lock; each taken node goes straight into `list`.
        unsafe { g.queue().take(pick, |node| list.push(node)) };
        if list.len() > 0 {
            // Relaxed under the lock: the dequeuer drops the count for the nodes it took. (Not
            // for none: a wake whose mask met nobody writes nothing of the line but the lock.)
            g.waiters().fetch_sub(list.len() as u32, Ordering::Relaxed);
        } else if decay && g.waiters().load(Ordering::Relaxed) == 0 {
            g.bucket().fence().decay();
        }
        break list;
    };
    let count = list.len();
    list.unpark_all();
    Woken { count, more }
}
