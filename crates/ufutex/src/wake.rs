//! Waking waiters on one key: the (B) side of the protocol in `wait.rs`, written once for every
//! table (`engine.rs`). A lock's unlock also asks whether a matching waiter was left queued.

#[cfg(not(ufutex_loom))]
use crate::engine::FenceFree;
use crate::engine::{infallible, Fate, Locked, Look, Pick, WaitTable, Woken as _};
use crate::key::Key;
use crate::membarrier::Pays;
#[cfg(not(ufutex_loom))]
use crate::table::Table;
use crate::tables::Tables;
use crate::word::WordRef;
#[cfg(not(ufutex_loom))]
use std::ptr::NonNull;

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
    /// Waiters dequeued and woken.
    pub(crate) count: usize,
    /// With [`Report::Rest`]: a matching waiter is still queued. Always `false` otherwise.
    pub(crate) more: bool,
}

const NONE: Woken = Woken { count: 0, more: false };

/// Which waiters a wake takes: up to `left` of its key whose mask shares a bit with `mask`,
/// oldest first; then, with [`Report::Rest`], it looks on for one more match (and stops there),
/// else it stops at once.
pub(crate) struct WakePick {
    left: usize,
    mask: u64,
    report: Report,
    more: bool,
}

impl WakePick {
    pub(crate) fn new(n: usize, mask: u64, report: Report) -> WakePick {
        WakePick { left: n, mask, report, more: false }
    }
}

impl Pick for WakePick {
    #[inline]
    fn pick(&mut self, ours: bool, mask: u64) -> Fate {
        match (ours && mask & self.mask != 0, self.left, self.report) {
            (true, 0, _) => {
                self.more = self.report == Report::Rest;
                Fate::Stop
            }
            (true, _, _) => {
                self.left -= 1;
                Fate::Wake
            }
            (false, 0, Report::Count) => Fate::Stop,
            (false, _, _) => Fate::Skip,
        }
    }

    #[inline]
    fn done(&self) -> bool {
        self.left == 0 && self.report == Report::Count
    }

    /// A waiter whose mask shares no bit with ours is skipped, whatever `left` and the report.
    #[inline]
    fn within(&self) -> u64 {
        self.mask
    }

    /// (It says only [`Fate::Wake`] to take a waiter.)
    fn not_taken(&mut self, _: Fate) {
        self.left += 1;
    }
}

/// Wake up to `n` waiters on `key` whose mask shares a bit with `mask`, oldest first. `pays`:
/// as every waiter of the word does (`membarrier.rs`; a table whose waiters always order
/// themselves ignores it).
#[inline(always)] // the no-waiter path is a few loads: inlined into every caller
pub(crate) fn wake<T: WaitTable>(
    t: &T,
    key: T::Key,
    n: usize,
    mask: u64,
    report: Report,
    pays: Pays,
) -> Result<Woken, T::Error> {
    if n == 0 {
        return Ok(NONE);
    }
    after_look(t, key, t.look(&key, pays), n, mask, report) // (B)
}

/// [`wake`] (`n` > 0) after its look.
#[inline(always)]
fn after_look<T: WaitTable>(
    t: &T,
    key: T::Key,
    look: Look<T::At>,
    n: usize,
    mask: u64,
    report: Report,
) -> Result<Woken, T::Error> {
    match look {
        Look::Nobody => Ok(NONE),
        // A signal handler's wake that interrupted its thread's critical section: made when
        // the thread leaves it, reported as none now (`reentry.rs`). `more`: conservatively yes.
        Look::Lock { .. } if t.defer_wake(&key, n, mask) => Ok(Woken { count: 0, more: report == Report::Rest }),
        Look::Lock { decay, at } => wake_locked(t, key, at, n, mask, report, decay),
    }
}

/// Leave a wake on a domain's `tables` for this thread to make when it leaves its critical
/// section (`reentry.rs`: the call comes from a signal handler that interrupted it). The
/// tables' count of deferred wakes keeps them alive until it is made.
#[cold]
#[inline(never)]
pub(crate) fn defer_private(tables: &Tables, key: Key, n: usize, mask: u64) {
    tables.deferral_made();
    crate::reentry::defer(run_private, std::ptr::from_ref(tables).cast(), key, n, mask);
}

/// [`defer_private`]'s wake, made.
fn run_private(ctx: *const (), key: Key, n: usize, mask: u64) {
    // SAFETY: `ctx` is the tables that `defer_private` was given, whose count of deferred
    // wakes (taken there) keeps them alive until it is given back below. They have not moved
    // since: a `Domain` holds its tables boxed (the default domain's are a static), so moving
    // the `Domain` leaves them where they are.
    let tables = unsafe { &*ctx.cast::<Tables>() };
    infallible(wake_deferred(tables, key, n, mask));
    tables.deferral_done();
}

/// A wake that a signal handler deferred (`reentry.rs`), made by its thread, which is counted
/// busy meanwhile (so it is not deferred again). It fences, as a waker that pays would: the
/// word's waiters may pay either way.
pub(crate) fn wake_deferred<T: WaitTable>(t: &T, key: T::Key, n: usize, mask: u64) -> Result<(), T::Error> {
    if let Look::Lock { decay, at } = t.look(&key, Pays::Waker) {
        wake_locked(t, key, at, n, mask, Report::Count, decay)?;
    }
    Ok(())
}

/// Take and wake under the bucket lock; `decay`: if nobody is waiting in the bucket, see
/// whether it may relax (`Locked::decay`).
#[inline(never)]
#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
fn wake_locked<T: WaitTable>(
    t: &T,
    key: T::Key,
    at: T::At,
    n: usize,
    mask: u64,
    report: Report,
    decay: bool,
) -> Result<Woken, T::Error> {
    let mut pick = WakePick::new(n, mask, report);
    let mut g = t.lock_at(&key, at)?;
    let mut woken = <<T::Locked<'_> as Locked>::Woken>::new();
    g.take(&mut pick, &mut woken, &mut Default::default())?;
    if decay && woken.len() == 0 {
        g.decay();
    }
    drop(g);
    Ok(Woken { count: woken.wake_all(), more: pick.more })
}

/// [`wake`] in a domain's tables, which cannot fail. A fence-free wake ([`Pays::Waiter`]) that
/// finds nobody runs inlined, with no call and no frame; the rest of it is out of line, so that
/// the inlined part stays small wherever it is inlined, and starts from the inlined look
/// (`wake_private_at`: looking again cost a contended wake 31 of its ~165 instructions).
/// ([`Pays::Waker`]'s wakes, `sync`'s, are inlined whole: their fence dwarfs a frame.)
#[inline(always)]
pub(crate) fn wake_private(tables: &Tables, key: Key, n: usize, mask: u64, report: Report, pays: Pays) -> Woken {
    if pays == Pays::Waiter {
        #[cfg(not(ufutex_loom))]
        match tables.look_if_fence_free(&key) {
            // The whole wake (with `n` 0 too: it wakes nobody either way).
            FenceFree::Nobody => return NONE,
            FenceFree::LockAt { at, busy } => return wake_private_at(tables, key, at, busy, n, mask, report),
            FenceFree::Unknown => {}
        }
        return wake_private_whole(tables, key, n, mask, report);
    }
    infallible(wake(tables, key, n, mask, report, pays))
}

/// [`wake_private`] after its look found waiters, or a bucket that is not FREE (`busy`), in
/// table `at`: what [`wake`] does after the same look.
#[cfg(not(ufutex_loom))]
#[inline(never)]
#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
pub(crate) fn wake_private_at(
    tables: &Tables,
    key: Key,
    at: NonNull<Table>,
    busy: bool,
    n: usize,
    mask: u64,
    report: Report,
) -> Woken {
    if n == 0 {
        return NONE;
    }
    let look = Look::Lock { decay: tables.decay_hint(&key, at, busy), at };
    infallible(after_look(tables, key, look, n, mask, report))
}

/// [`wake_private`] of [`Pays::Waiter`] the whole way, while `membarrier` is not yet known to
/// work (it looks again).
#[inline(never)]
fn wake_private_whole(tables: &Tables, key: Key, n: usize, mask: u64, report: Report) -> Woken {
    infallible(wake(tables, key, n, mask, report, Pays::Waiter))
}

/// [`wake`] of a private word, reporting the count.
#[inline]
pub(crate) fn wake_word(tables: &Tables, word: WordRef, n: usize, mask: u64, pays: Pays) -> usize {
    wake_private(tables, Key::private(word.addr()), n, mask, Report::Count, pays).count
}
