//! Parking across processes: a waiting thread sleeps on the `park_seq` word of its first record,
//! in the segment, with the kernel's shared futex; a waker in any process that maps the segment
//! marks the thread's record Woken, bumps that word and, if the thread may be asleep, wakes it
//! ([`kick`]).
//!
//! ```text
//!   waiter                                   waker (holding the bucket lock)
//!   seq = park_seq                           record.state = Woken
//!   spin on the records (yielding)           park_seq += 1
//!   asleep = 1; fence(SeqCst)                fence(SeqCst)
//!   any record Woken? -> asleep = 0, done    asleep == 1? -> futex_wake(park_seq)
//!   futex_wait(park_seq, seq); asleep = 0
//! ```
//!
//! Either the waker sees `asleep` and wakes (and a wait that had not begun sees `park_seq`
//! changed and returns at once), or the waiter's look after its fence sees Woken: a spinning
//! waiter costs its waker no system call.
//!
//! A waiter that watches its word (the preload library's waits: a wake that bypasses the
//! library must reach them) sleeps with `futex_waitv` on `park_seq` and on the word itself, both
//! as shared futexes. A kernel wake of the word, or a change of its value, ends the park without
//! a Woken record; the waiter then takes its records back as after a timeout (`ops::Waiting`),
//! so a waker of ours that took one first still counts it, and one that comes later finds
//! nothing. The handshake above is unchanged: the watch only adds a way out.

use super::segment::{Record, Segment};
use crate::primitive::{fence, Ordering};
// Under loom's unit tests the kernel futex is the parker's model of it (`parker/kernel_model.rs`),
// so the park below is model-checked with it (`loom_tests.rs`).
#[cfg(any(not(ufutex_loom), test))]
use {
    super::segment::REC_WOKEN,
    super::SharedError,
    crate::deadline::{Deadline, Timeout},
    crate::parker::futex::{self, KernelWait},
    crate::parker::{Watch, BLIND_SLICE, MAX_WATCH},
    std::time::{Duration, Instant},
};

/// How long a waiter spins on its records before it sleeps: a waker in another process takes
/// a few microseconds (a mapping query and a bucket). A time, not a count of spin hints, so it
/// is the same on every host; the spin yields the CPU every [`YIELD_EVERY`], so that
/// oversubscribed, the waker gets the CPU (alone on it, a yield returns at once). None under
/// loom (a model explores every interleaving of the looks instead).
#[cfg(not(ufutex_loom))]
const SPIN: Duration = Duration::from_micros(8);
#[cfg(all(ufutex_loom, test))]
const SPIN: Duration = Duration::ZERO;
#[cfg(any(not(ufutex_loom), test))]
const YIELD_EVERY: Duration = Duration::from_micros(1);

/// The longest a parked waiter sleeps before it looks at its records again (see [`park`]).
/// Under loom a waiter sleeps without slices, so that a lost wakeup shows as a deadlock.
#[cfg(not(ufutex_loom))]
const SLICE: Option<Duration> = Some(Duration::from_millis(200));
#[cfg(all(ufutex_loom, test))]
const SLICE: Option<Duration> = None;

/// Before a shared waiter queues, it spins on its words with its thread's adaptive budget, as a
/// private waiter does (`wait.rs`): `true` if `changed` came true; the wait then ends with
/// `WouldBlock`, linearisable at the load that saw the change. Queueing costs the waiter a
/// mapping query and its waker another (`identity.rs`); a partner that changes the word within
/// the spin costs neither, since its wake then finds the filter at zero. Under loom, one look.
#[cfg(any(not(ufutex_loom), test))]
pub(crate) fn spin_before_queueing(changed: impl Fn() -> bool) -> bool {
    use crate::parker::Park as _;
    crate::thread::with_thread(|td| td.parker.spin_for(changed))
}

/// Wake the thread that waits on `rec` (its park record's word). Returns how many threads the
/// kernel woke (0: the thread was not asleep — spinning, about to look, or dead).
pub(crate) fn kick(seg: &Segment, rec: &Record) -> usize {
    let Ok(park) = seg.record(rec.park.load(Ordering::Relaxed)) else { return 0 };
    // Release: the thread that sees the new sequence sees the record's Woken state.
    park.park_seq.fetch_add(1, Ordering::Release);
    fence(Ordering::SeqCst); // pairs with the waiter's fence after `asleep = 1`
    if park.asleep.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    #[cfg(any(not(ufutex_loom), test))]
    return futex::wake_shared(&park.park_seq, 1);
    #[cfg(all(ufutex_loom, not(test)))]
    0
}

/// About to sleep on `park`'s word (or watch it): say so, then look once more. `true` if a
/// record is already Woken (then the caller does not sleep; `asleep` is cleared).
#[cfg(any(not(ufutex_loom), test))]
pub(crate) fn announce_sleep(
    park: &Record,
    woken: impl Fn() -> Result<bool, SharedError>,
) -> Result<bool, SharedError> {
    park.asleep.store(1, Ordering::Relaxed);
    fence(Ordering::SeqCst); // pairs with the waker's fence after its bump
    if woken()? {
        park.asleep.store(0, Ordering::Relaxed);
        return Ok(true);
    }
    Ok(false)
}

/// How a [`park`] ended.
#[cfg(any(not(ufutex_loom), test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parked {
    /// The record at this position of `recs` is Woken.
    Woken(usize),
    /// The watched word at this position was woken by the kernel, or changed.
    Watched(usize),
}

/// Sleep until one of `recs` is Woken, or why not. With `watch` (words and the values the wait
/// expects of them: the preload library's waits, see `wait::Wakers::AlsoKernel`), the thread
/// also sleeps on those words in the kernel, each as its [`Watch`] says, and a kernel wake of
/// one, or a change of its value, ends the park with [`Parked::Watched`] (the caller takes its
/// records back). Without `futex_waitv`, or for the words past [`MAX_WATCH`], such a waiter
/// sleeps in slices of [`BLIND_SLICE`] and looks at the values between them.
#[cfg(any(not(ufutex_loom), test))]
pub(crate) fn park(
    seg: &Segment,
    park: u32,
    recs: &[u32],
    timeout: Option<&Timeout>,
    watch: &[Watch<'_>],
) -> Result<Parked, SharedError> {
    let woken = || -> Result<Option<usize>, SharedError> {
        for (i, &r) in recs.iter().enumerate() {
            if seg.record(r)?.state.load(Ordering::Acquire) == REC_WOKEN {
                return Ok(Some(i));
            }
        }
        Ok(None)
    };
    let park = seg.record(park)?;
    let start = Instant::now();
    let mut next_yield = YIELD_EVERY;
    loop {
        if let Some(i) = woken()? {
            return Ok(Parked::Woken(i));
        }
        let spent = start.elapsed();
        if spent >= SPIN {
            break;
        }
        if spent >= next_yield {
            crate::primitive::yield_now();
            next_yield = spent + YIELD_EVERY;
        }
        for _ in 0..16 {
            crate::primitive::spin_hint();
        }
    }
    let kernel = if futex::has_waitv() { &watch[..watch.len().min(MAX_WATCH)] } else { &[] };
    // Sleep in slices: a waker that dies between marking a record Woken and kicking its thread
    // (holding the bucket lock) leaves the thread asleep; the slice bounds that.
    let len = if kernel.len() < watch.len() { Some(BLIND_SLICE) } else { SLICE };
    loop {
        let seq = park.park_seq.load(Ordering::Acquire);
        if announce_sleep(park, || woken().map(|w| w.is_some()))? {
            return Ok(Parked::Woken(woken()?.unwrap_or(0)));
        }
        let slice = len.map(|s| (s, Timeout::from(Deadline::from(s))));
        let until = match (timeout, &slice) {
            (Some(t), Some((len, _))) if t.remaining() < *len => Some(t),
            (_, Some((_, s))) => Some(s),
            (t, None) => t,
        };
        let (slept, rung) = if kernel.is_empty() {
            (futex::wait_shared(&park.park_seq, seq, until), None)
        } else {
            let park_word = Watch { word: &park.park_seq, val: seq, shared: true };
            match futex::waitv(&[park_word], kernel, until) {
                Ok(i) => (KernelWait::Retry, i.checked_sub(1)),
                Err(k) => (k, None),
            }
        };
        park.asleep.store(0, Ordering::Relaxed);
        if let Some(i) = woken()? {
            return Ok(Parked::Woken(i));
        }
        // Relaxed: a watched word that changed ends the park too (the kernel compared it and did
        // not sleep; its waker may wake through the kernel only).
        if let Some(i) = rung.or_else(|| watch.iter().position(|w| w.word.load(Ordering::Relaxed) != w.val)) {
            return Ok(Parked::Watched(i));
        }
        match slept {
            KernelWait::Retry => {}
            KernelWait::TimedOut if timeout.is_some_and(|t| t.expired()) => return Err(SharedError::TimedOut),
            KernelWait::TimedOut => {}
            KernelWait::Interrupted => return Err(SharedError::Interrupted),
        }
    }
}
