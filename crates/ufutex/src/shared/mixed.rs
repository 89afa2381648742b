//! A waitv that mixes private and process-shared entries. The private entries queue in the
//! process's own tables and are woken through the thread's parker; the shared ones queue in the
//! shared table and are woken through the thread's park word in the segment. The thread sleeps
//! on both at once — its parker watches the park word (the kernel's `futex_waitv` over both
//! words) — and returns the highest index any waker took, as a waitv of one kind does.

use super::ops::{changed, Entry, Waiting};
use super::park::announce_sleep;
use super::{mode, Mode, SharedError};
use crate::deadline::{Deadline, Timeout};
use crate::engine::Want;
use crate::membarrier::Pays;
use crate::parker::{can_watch, Park, ParkTimeout, Watch, BLIND_SLICE};
use crate::private_table::register;
use crate::tables::Tables;
use crate::thread::{with_thread, ThreadData};
use crate::waiter::{enqueue_all, try_collect, Unqueued, Why};
use crate::waitv::{settle, WaitEntry};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Without a way to sleep on the park word too, a mixed waiter sleeps in slices of
/// [`BLIND_SLICE`] and looks at its shared entries between them. With it, slices as long as a
/// shared-only waiter's (see `park.rs`: a waker that died between marking an entry Woken and
/// kicking the thread).
const SLICE: Duration = Duration::from_millis(200);

/// Wait on `n` entries: `private[k] = (index, entry)` in `tables`, `shared[k] = (index, entry)`
/// in the shared table; every index in `0..n` once, `private`'s in ascending order. The highest
/// woken index, or why not. With `also_kernel` (the preload library's waits, see
/// `wait::Wakers::AlsoKernel`), the entries' 32-bit words are also woken by the kernel's own
/// wakes: such a wake, or a change of the value, ends the wait with that entry's index.
pub(crate) fn waitv_mixed(
    tables: &Tables,
    private: &[(usize, WaitEntry<'_>)],
    shared: &[(usize, Entry)],
    n: usize,
    timeout: Option<Timeout>,
    also_kernel: bool,
) -> Result<usize, SharedError> {
    if mode() == Mode::Kernel {
        // The kernel's waitv would have to sleep on every shared word and the parker at once,
        // with per-entry bitsets it does not have.
        return Err(SharedError::Invalid);
    }
    let entries: Vec<Entry> = try_collect(shared.iter().map(|&(_, e)| e)).ok_or(SharedError::NoMemory)?;
    let indices: Vec<usize> = try_collect(shared.iter().map(|&(i, _)| i)).ok_or(SharedError::NoMemory)?;
    // The words the kernel may wake (private ones as private futexes), and their indices.
    let mut watched: Vec<(usize, Watch<'_>)> = Vec::new();
    if also_kernel {
        watched.try_reserve_exact(n).map_err(|_| SharedError::NoMemory)?;
        watched.extend(private.iter().filter_map(|(i, e)| Some((*i, e.watch()?))));
        watched.extend(shared.iter().filter_map(|(i, e)| Some((*i, e.watch()?))));
    }
    // As every wait (`reentry.rs`).
    let Some(_episode) = crate::reentry::episode() else {
        return Err(SharedError::Interrupted);
    };
    with_thread(|td| {
        register(tables, td);
        // Spin before queueing, as a waitv of one kind does: a change is a mismatch.
        if td.parker.spin_for(|| private.iter().any(|(_, e)| e.changed()) || changed(&entries)) {
            return Err(SharedError::WouldBlock);
        }
        // SAFETY: this thread is between episodes (every wait ends its episode before returning).
        let nodes = unsafe { td.waitv_nodes(n) }.ok_or(SharedError::NoMemory)?;
        let wants: Vec<Want<'_, Tables>> = try_collect(private.iter().map(|(i, e)| {
            let (word, expected, mask) = e.parts();
            Want { waiter: &nodes[*i], word, expected, key: e.key(), mask }
        }))
        .ok_or(SharedError::NoMemory)?;
        let mut w = Waiting::new(&entries)?.with_indices(&indices);
        let (queued, mut outcome) = match enqueue_all(tables, &wants, Pays::Waiter) {
            Ok(()) => (wants.len(), None),
            Err(Unqueued { queued, why: Why::Changed }) => (queued, Some(SharedError::WouldBlock)),
            Err(Unqueued { queued, why: Why::NoMemory }) => (queued, Some(SharedError::NoMemory)),
            Err(Unqueued { why: Why::Table(never), .. }) => match never {},
        };
        let queued = &wants[..queued];
        if outcome.is_none() {
            outcome = w.queue().err();
        }
        let mut rung = None;
        if outcome.is_none() {
            match sleep(td, &w, timeout.as_ref(), &watched) {
                Ok(j) => rung = j.map(|j| watched[j].0),
                Err(e) => outcome = Some(e),
            }
        }
        // `settle` counts places among the nodes it is given: the k-th queued is `private[k]`
        // (ascending, so the highest place is the highest index).
        debug_assert!(private.windows(2).all(|p| p[0].0 < p[1].0));
        let private_best = settle(tables, td, queued.iter().map(|w| w.waiter)).map(|k| private[k].0);
        // Ended by a watched word: unless a waker of ours took an entry meanwhile, its index.
        let shared_best = match rung {
            Some(i) => w.finish_with(Ok(i)),
            None => w.finish(outcome),
        };
        match (private_best, shared_best) {
            (Some(a), Ok(b)) => Ok(a.max(b)),
            (Some(a), Err(_)) => Ok(a),
            (None, r) => r,
        }
    })
}

/// Sleep until a private unpark arrives or a shared entry is Woken (`Ok(None)`), or one of
/// `watched` is woken by the kernel or changes (`Ok(Some(its position))`), or `timeout`.
fn sleep(
    td: &ThreadData,
    w: &Waiting<'_>,
    timeout: Option<&Timeout>,
    watched: &[(usize, Watch<'_>)],
) -> Result<Option<usize>, SharedError> {
    let park = w.park_record()?;
    let word = &park.park_seq;
    let watch = can_watch();
    // The park word, then `watched` (the parker looks at those it cannot sleep on between
    // slices of its own).
    let mut words = Vec::new();
    words.try_reserve_exact(1 + watched.len()).map_err(|_| SharedError::NoMemory)?;
    // Relaxed: as the parker's own look at its watched words.
    let changed = || watched.iter().position(|(_, w)| w.word.load(Ordering::Relaxed) != w.val);
    loop {
        // Acquire: pairs with a waker's bump, after its Woken store.
        let seq = word.load(Ordering::Acquire);
        if announce_sleep(park, None, || w.woken())? {
            return Ok(None);
        }
        let len = if watch { SLICE } else { BLIND_SLICE };
        let slice = Timeout::from(Deadline::from(len));
        let until = match timeout {
            Some(t) if t.remaining() < len => t,
            _ => &slice,
        };
        words.clear();
        if watch {
            words.push(Watch { word, val: seq, shared: true });
            words.extend(watched.iter().map(|&(_, w)| w));
        }
        let parked = td.parker.park(1, Some(until), None, &words, true);
        park.asleep.store(0, Ordering::Relaxed);
        match parked {
            Ok(()) => return Ok(None),
            Err(ParkTimeout::Watched(j)) if j > 0 => return Ok(Some(j - 1)),
            Err(_) if w.woken()? => return Ok(None),
            Err(_) if changed().is_some() => return Ok(changed()),
            Err(ParkTimeout::Watched(_)) => {}
            Err(ParkTimeout::TimedOut) if timeout.is_some_and(|t| t.expired()) => return Err(SharedError::TimedOut),
            Err(ParkTimeout::TimedOut) => {}
            Err(ParkTimeout::Interrupted) => return Err(SharedError::Interrupted),
        }
    }
}
