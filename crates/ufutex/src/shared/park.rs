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
//!
//! # The bell
//!
//! A thread that waits on one record also sleeps (`futex_waitv`) on the bell of the bucket its
//! record is in ([`Bucket::bell`], a shared futex word in the segment), and says which in
//! `asleep` ([`ON_BELL`] | the bucket). A waker holding that bucket's lock that finds such a
//! thread asleep, with another on the bell, holds its kick back ([`Ring`]); when it is done
//! with the bucket it either rings the bell — bump it and `futex_wake` every thread on it, one
//! system call for all — or kicks each held thread on its own word, as without a bell:
//!
//! ```text
//!   waiter                                   waker (holding bucket b's lock)
//!   bell_seq = bell(b); seq = park_seq       record.state = Woken; park_seq += 1
//!   sleepers(b) += 1                         fence(SeqCst)
//!   asleep = ON_BELL | b; fence(SeqCst)      asleep == ON_BELL | b and sleepers(b) >= 2?
//!                                              -> hold back, ringing = 1
//!   any record Woken? -> done                ... (the other records it takes)
//!   futex_waitv(park_seq == seq,             at least two held, sleepers(b) <= 2 × held?
//!               bell(b) == bell_seq)           -> bell(b) += 1; futex_wake(bell(b), all)
//!   asleep = 0; sleepers(b) -= 1               else futex_wake(park_seq) for each; ringing = 0
//! ```
//!
//! No wakeup is lost: a held thread was seen asleep after its record was marked, so its look
//! came first; it read the bell before it said so, and the kernel compares both words under
//! its locks, so either its sleep finds the bell changed (or its own word: the bump) or the
//! ring's wake finds it queued on the bell. A ring also wakes the bucket's other sleepers
//! (other words' waiters, the same word's not taken): each finds no record Woken and sleeps
//! again, still queued, so a waker rings only when it took at least half the bell's sleepers.
//! `ringing` stands for the held kicks as `pending` stands for a single one: a waker that dies
//! before it rings leaves the ring to the next lock holder (`queue.rs`). A thread of a waitv
//! (several records, possibly in several buckets), or one that watches all the words the kernel
//! takes, sleeps without a bell.
//!
//! # Our own threads: kicked after the unlock
//!
//! A waker kicks (or rings for) the threads of its own process only after it let the bucket lock
//! go ([`Later`]): the marks and the bumps are made under the lock as above, and only the system
//! calls wait. The argument above does not depend on the lock being held for them, and no crash
//! can leave such a thread marked and asleep: a waker that dies takes it along. So the lock is
//! not held across a ring of many threads of one process, and a second waker of the bucket does
//! not sleep on the lock meanwhile (perf's `-S` wake-parallel through the preload library: two
//! wakers, one process; BENCHMARKS.md).
//!
//! Nor does the bell have to be the bucket's: a requeue moves a record to another bucket without
//! waking its thread, which sleeps on the bell of the bucket it came from (and says so in
//! `asleep`). A waker rings that bell for such threads, where the bell argument holds as well
//! (the thread read that bell before it named it) and no lock of that bucket is needed: a ring
//! only wakes. Its own process's threads are grouped by the bell each names ([`Later`]);
//! another process's are held back for one other bell besides the bucket's own, which the
//! bucket's `ringing` then names, so that a recoverer rings it too ([`Ring`]). A condition
//! variable's broadcast (a requeue, then wakes of the target) so wakes its sleepers with one
//! call instead of one each.

use super::segment::{Bucket, Record, Segment};
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

/// `asleep` of a thread that sleeps on its bucket's bell too: `ON_BELL | the bucket's index`.
pub(crate) const ON_BELL: u32 = 1 << 31;

/// Tell the thread that waits on `rec` (its park record's word) that a record changed: bump
/// the word. Its park record and what `asleep` said after the bump (0: not asleep — spinning,
/// about to look, or dead), or none (a corrupt park index).
fn bump<'s>(seg: &'s Segment, rec: &Record) -> Option<(&'s Record, u32)> {
    let park = seg.record(rec.park.load(Ordering::Relaxed)).ok()?;
    // Release: the thread that sees the new sequence sees the record's Woken state.
    park.park_seq.fetch_add(1, Ordering::Release);
    fence(Ordering::SeqCst); // pairs with the waiter's fence after `asleep = 1`
    Some((park, park.asleep.load(Ordering::Relaxed)))
}

/// Wake a thread asleep on `park`'s word.
fn wake_park(park: &Record) -> usize {
    #[cfg(any(not(ufutex_loom), test))]
    return futex::wake_shared(&park.park_seq, 1);
    #[cfg(all(ufutex_loom, not(test)))]
    {
        let _ = park;
        0
    }
}

/// Wake the thread that waits on `rec` (its park record's word). Returns how many threads the
/// kernel woke (0: the thread was not asleep — spinning, about to look, or dead).
pub(crate) fn kick(seg: &Segment, rec: &Record) -> usize {
    match bump(seg, rec) {
        Some((park, asleep)) if asleep != 0 => wake_park(park),
        _ => 0,
    }
}

/// Ring `bucket`'s bell: every thread asleep on it wakes (and those whose records are not
/// Woken sleep again).
pub(crate) fn ring(bucket: &Bucket) {
    // Release: pairs with the waiter's Acquire read of the bell (it read the bell before it
    // said it may sleep, so this ring comes after that read); a waiter that read the old
    // value and has not slept yet fails the kernel's compare.
    bucket.bell.fetch_add(1, Ordering::Release);
    #[cfg(any(not(ufutex_loom), test))]
    futex::wake_shared(&bucket.bell, i32::MAX);
}

/// How many threads a [`Parks`] keeps without allocating.
const RING_INLINE: usize = 16;

/// Threads to wake later, by their park records, each with the bucket on whose bell it sleeps
/// too (if it does): the first [`RING_INLINE`] inline, then in a `Vec`, so that a wake of up to
/// that many allocates nothing under the lock. [`Ring`]'s and [`Later`]'s list.
struct Parks<'s> {
    first: [(Option<&'s Record>, Option<&'s Bucket>); RING_INLINE],
    more: Vec<(&'s Record, Option<&'s Bucket>)>,
    n: usize,
}

impl<'s> Parks<'s> {
    fn new() -> Parks<'s> {
        Parks { first: [(None, None); RING_INLINE], more: Vec::new(), n: 0 }
    }

    /// Keep `park`'s thread; `false` (and nothing kept) without memory for it.
    fn push(&mut self, park: &'s Record, bell: Option<&'s Bucket>) -> bool {
        if self.n < RING_INLINE {
            self.first[self.n] = (Some(park), bell);
        } else if self.more.try_reserve(1).is_ok() {
            self.more.push((park, bell));
        } else {
            return false;
        }
        self.n += 1;
        true
    }

    fn iter(&self) -> impl Iterator<Item = (&'s Record, Option<&'s Bucket>)> + Clone + '_ {
        let inline = self.first[..self.n.min(RING_INLINE)].iter().filter_map(|&(p, b)| Some((p?, b)));
        inline.chain(self.more.iter().copied())
    }

    fn clear(&mut self) {
        self.n = 0;
        self.more.clear();
    }

    /// Wake every thread kept: grouped by the bell each sleeps on, for the first
    /// [`GROUPED_BELLS`] bells found, each group by [`ring_or_kick`]; the threads of further
    /// bells, and those on none, each on its own word.
    fn wake_by_bell(&self) {
        let all = self.iter();
        let on = |o: Option<&Bucket>, b: &Bucket| o.is_some_and(|o| std::ptr::eq(o, b));
        let mut bells: [Option<&Bucket>; GROUPED_BELLS] = [None; GROUPED_BELLS];
        for b in all.clone().filter_map(|(_, b)| b) {
            match bells.iter_mut().find(|k| k.is_none_or(|k| std::ptr::eq(k, b))) {
                Some(k) => *k = Some(b),
                None => break,
            }
        }
        let grouped = |o: Option<&Bucket>| bells.iter().flatten().any(|&b| on(o, b));
        for &b in bells.iter().flatten() {
            ring_or_kick(b, all.clone().filter(|&(_, o)| on(o, b)).map(|(p, _)| p));
        }
        all.filter(|&(_, o)| !grouped(o)).for_each(|(p, _)| _ = wake_park(p));
    }
}

/// How many bells [`Parks::wake_by_bell`] groups its threads by.
const GROUPED_BELLS: usize = 4;

/// Wake `parks`, threads asleep on `bucket`'s bell: by one ring when it is worth it
/// (`parker::worth_ringing`: at least two, and no more other sleepers on the bell than they),
/// else each on its own word.
fn ring_or_kick<'s>(bucket: &Bucket, parks: impl Iterator<Item = &'s Record> + Clone) {
    let n = parks.clone().count();
    // Relaxed: a hint (see the field). The threads to wake are among the sleepers.
    let sleepers = bucket.sleepers.load(Ordering::Relaxed) as usize;
    if crate::parker::worth_ringing(n, sleepers.saturating_sub(n)) {
        ring(bucket);
    } else {
        parks.for_each(|park| _ = wake_park(park));
    }
}

/// One waker's kicks in a bucket it holds locked, with the threads asleep on that bucket's bell
/// held back: woken all by one ring when at least two of them are and no more other threads
/// sleep on the bell than they, else each on its own word. A ring wakes every thread asleep on
/// the bell; those not taken find no record Woken and sleep again, so it costs at most one
/// spurious wakeup per thread woken on purpose, and saves the waker a kernel call per thread
/// and the switch to each woken thread that follows every single wake.
///
/// While threads are held back, the bucket's `ringing` says so: a waker that dies before
/// [`Ring::finish`] leaves the ring to whoever takes the lock over (`queue.rs`).
///
/// A thread whose record a requeue moved here sleeps on the bell of the bucket it came from. A
/// ring holds such threads back too, for one other bell (the first it meets; threads of further
/// bells are kicked each), and `ringing` names that bucket as well ([`ringing_owed`]): a bell can
/// be rung by anyone, with or without its bucket's lock (the bell argument, module docs).
pub(crate) struct Ring<'b> {
    bucket: &'b Bucket,
    index: u32,
    /// Whether threads are held back for this bucket's bell.
    own: bool,
    /// The index of the other bucket whose bell threads are held back for, if any.
    foreign: Option<u32>,
    /// The threads held back, each with the bucket whose bell it sleeps on.
    held: Parks<'b>,
}

/// `ringing`: this bucket's own bell is owed a ring.
const RING_OWN: u32 = 1;

/// The value of a bucket's `ringing` for rings owed on its own bell (`own`) and on bucket
/// `foreign`'s: [`RING_OWN`], | (1 + `foreign`) << 1. `None` if `foreign` does not fit.
fn ringing_value(own: bool, foreign: Option<u32>) -> Option<u32> {
    let f = match foreign {
        Some(f) => f.checked_add(1).filter(|&f| f <= u32::MAX >> 1)? << 1,
        None => 0,
    };
    Some(if own { RING_OWN | f } else { f })
}

/// Ring the bells that a bucket's `ringing` says are owed (a waker died before it rang them):
/// its own, and another bucket's if named (ignored if out of range: a corrupt value).
pub(crate) fn ringing_owed(seg: &Segment, bucket: &Bucket, ringing: u32) {
    if ringing & RING_OWN != 0 {
        ring(bucket);
    }
    if let Some(f) = (ringing >> 1).checked_sub(1) {
        if let Ok(other) = seg.bucket(f) {
            ring(other);
        }
    }
}

impl<'b> Ring<'b> {
    pub(crate) fn new(bucket: &'b Bucket, index: u32) -> Ring<'b> {
        Ring { bucket, index, own: false, foreign: None, held: Parks::new() }
    }

    /// [`kick`] `rec`'s thread, or hold it back for the ring if it sleeps on this bucket's
    /// bell (or on the one other bell the ring holds threads for), or leave it to `later` (a
    /// thread of the waker's own process, [`Later`]): how many threads were woken (0 if held
    /// back or left, as for a thread not asleep).
    pub(crate) fn kick(&mut self, seg: &'b Segment, rec: &Record, later: Option<&mut Later<'b>>) -> usize {
        let Some((park, asleep)) = bump(seg, rec) else { return 0 };
        if asleep == 0 {
            return 0;
        }
        // The bell it sleeps on: this bucket's, or another's (the one it was in when it slept,
        // before a requeue moved its record here).
        let bell = match asleep & !ON_BELL {
            _ if asleep & ON_BELL == 0 => None,
            i if i == self.index => Some((i, self.bucket)),
            i => seg.bucket(i).ok().map(|b| (i, b)),
        };
        if let Some(later) = later {
            // After the unlock any bell is as good to ring (module docs, "Our own threads").
            return later.push(park, bell.map(|(_, b)| b));
        }
        let Some((i, b)) = bell else { return wake_park(park) };
        let own = i == self.index;
        // A third bell (another foreign one) is not held for: its threads are kicked each.
        if !own && self.foreign.is_some_and(|f| f != i) {
            return wake_park(park);
        }
        let foreign = if own { self.foreign } else { Some(i) };
        let Some(ringing) = ringing_value(own || self.own, foreign) else { return wake_park(park) };
        // Relaxed: a hint (see the field). With fewer than two sleepers no ring can be worth
        // it; holding a thread back would only cost its waker a look at whether the thread's
        // process lives (`surgery::wake_one`), which the kick's answer gives for free.
        if b.sleepers.load(Ordering::Relaxed) < 2 || !self.held.push(park, Some(b)) {
            return wake_park(park);
        }
        (self.own, self.foreign) = (own || self.own, foreign);
        // Relaxed: read by a recoverer after it took the lock over (as `pending`).
        self.bucket.ringing.store(ringing, Ordering::Relaxed);
        0
    }

    /// Whether threads are held back for the ring.
    pub(crate) fn holds(&self) -> bool {
        self.held.n > 0
    }

    /// Wake every thread held back (one ring of each bell, or each on its own word); the
    /// bucket owes no ring after it.
    pub(crate) fn finish(self) {
        if !self.holds() {
            return;
        }
        // (Every thread held sleeps on this bucket's bell or on the one other.)
        self.held.wake_by_bell();
        self.bucket.ringing.store(0, Ordering::Relaxed);
    }
}

/// The kicks of threads of the waker's own process, made once the bucket lock is dropped
/// (`engine::Kicked`; module docs, "Our own threads"). Neither `pending` nor `ringing` stands
/// for them: a waker that dies takes these threads with it. A late kick that finds its thread
/// gone on to another sleep wakes it for nothing: it finds no record Woken and sleeps again.
pub(crate) struct Later<'s>(Parks<'s>);

impl<'s> Later<'s> {
    pub(crate) fn new() -> Later<'s> {
        Later(Parks::new())
    }

    /// Leave `park`'s thread to [`Later::wake`]; `bell`: the bucket on whose bell it sleeps
    /// too. Without memory for it, a kick now (under the lock, as for another process's
    /// thread): how many threads that woke.
    fn push(&mut self, park: &'s Record, bell: Option<&'s Bucket>) -> usize {
        if self.0.push(park, bell) {
            0
        } else {
            wake_park(park)
        }
    }

    /// Kick every thread left here, with no bucket lock held: those asleep on one bucket's bell
    /// by one ring when it is worth it (as [`Ring::finish`]), the others each on its own word.
    pub(crate) fn wake(mut self) {
        self.kick_all();
    }

    /// [`Later::wake`]'s kicks, once: the list is empty after them.
    ///
    /// The threads are grouped by the bell they sleep on ([`Parks::wake_by_bell`]): a wake takes
    /// one bucket's records, but their threads may sleep on several bells (a wake-op takes two
    /// buckets'; requeued threads sleep on the bells of the buckets they came from).
    fn kick_all(&mut self) {
        self.0.wake_by_bell();
        self.0.clear();
    }
}

impl Drop for Later<'_> {
    /// An operation that failed after it took waiters (a corrupt segment further on, no memory
    /// for a move) drops its list without [`Later::wake`]: its threads' records are Woken, so
    /// they are kicked here all the same (under the lock, if the caller still holds it), not
    /// left to find out at the end of a sleep slice.
    fn drop(&mut self) {
        self.kick_all();
    }
}

/// About to sleep on `park`'s word (or watch it), and on the bell of `bell`'s bucket if given:
/// say so, then look once more. `true` if a record is already Woken (then the caller does not
/// sleep; `asleep` is cleared).
#[cfg(any(not(ufutex_loom), test))]
pub(crate) fn announce_sleep(
    park: &Record,
    bell: Option<u32>,
    woken: impl Fn() -> Result<bool, SharedError>,
) -> Result<bool, SharedError> {
    park.asleep.store(bell.map_or(1, |b| ON_BELL | b), Ordering::Relaxed);
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
    // A thread that waits on one record sleeps on its bucket's bell too (one word fewer to
    // watch: it takes a place in the kernel's vector).
    let bells = recs.len() == 1 && futex::has_waitv() && watch.len() < MAX_WATCH;
    loop {
        // The bell of the bucket the record is in now (a requeue may move it on; any bucket
        // is safe, since a waker rings only the bell `asleep` names, and only for a thread
        // whose record it took in that very bucket).
        let bell = if bells { bell_of(seg, recs[0]) } else { None };
        let seq = park.park_seq.load(Ordering::Acquire);
        let _sleeper = bell.map(|(_, b, _)| Sleeper::new(b));
        if announce_sleep(park, bell.map(|(i, _, _)| i), || woken().map(|w| w.is_some()))? {
            return Ok(Parked::Woken(woken()?.unwrap_or(0)));
        }
        let slice = len.map(|s| (s, Timeout::from(Deadline::from(s))));
        let until = match (timeout, &slice) {
            (Some(t), Some((len, _))) if t.remaining() < *len => Some(t),
            (_, Some((_, s))) => Some(s),
            (t, None) => t,
        };
        let park_word = Watch { word: &park.park_seq, val: seq, shared: true };
        let (slept, rung) = match bell {
            Some((_, b, rang)) => {
                let head = [park_word, Watch { word: &b.bell, val: rang, shared: true }];
                match futex::waitv(&head, kernel, until) {
                    Ok(i) => (KernelWait::Retry, i.checked_sub(head.len())),
                    Err(k) => (k, None),
                }
            }
            _ if kernel.is_empty() => (futex::wait_shared(&park.park_seq, seq, until), None),
            _ => match futex::waitv(&[park_word], kernel, until) {
                Ok(i) => (KernelWait::Retry, i.checked_sub(1)),
                Err(k) => (k, None),
            },
        };
        park.asleep.store(0, Ordering::Relaxed);
        drop(_sleeper);
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

/// The bell of the bucket record `r` is in (the bucket's index, the bucket, and the bell's
/// sequence now), if the record names a bucket of this segment.
#[cfg(any(not(ufutex_loom), test))]
fn bell_of(seg: &Segment, r: u32) -> Option<(u32, &Bucket, u32)> {
    let i = seg.record(r).ok()?.bucket();
    let b = seg.bucket(i).ok()?;
    // Acquire: pairs with a ring's Release (see `ring`). Read before `asleep` says which bell,
    // so a ring that wakes this thread comes after it.
    (i & ON_BELL == 0).then(|| (i, b, b.bell.load(Ordering::Acquire)))
}

/// A dead process's record, reaped by the process that claimed its slot (`process.rs`, which
/// no other thread of ours uses yet): if its thread was asleep on a bell, or about to sleep
/// there, count it out of that bucket's sleepers, which it can no longer leave by itself. (Its
/// thread counted itself just before it said so in `asleep`, and says it no longer is just before
/// it counts itself out: a death between the two leaves the count one off, a hint.)
pub(crate) fn forget_sleep(seg: &Segment, park: &Record) {
    // Relaxed: the dead thread wrote it last, and `sleepers` is a hint.
    let asleep = park.asleep.swap(0, Ordering::Relaxed);
    if asleep & ON_BELL == 0 {
        return;
    }
    if let Ok(b) = seg.bucket(asleep & !ON_BELL) {
        // Relaxed: a hint (see the field); never below 0, whatever a corrupt `asleep` names.
        let _ = b.sleepers.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// One thread counted in a bucket's `sleepers` for as long as it lives.
#[cfg(any(not(ufutex_loom), test))]
struct Sleeper<'b>(&'b Bucket);

#[cfg(any(not(ufutex_loom), test))]
impl<'b> Sleeper<'b> {
    fn new(b: &'b Bucket) -> Sleeper<'b> {
        // Relaxed: a hint (see the field).
        b.sleepers.fetch_add(1, Ordering::Relaxed);
        Sleeper(b)
    }
}

#[cfg(any(not(ufutex_loom), test))]
impl Drop for Sleeper<'_> {
    fn drop(&mut self) {
        // Relaxed: a hint (see the field).
        self.0.sleepers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    /// `ringing`'s values: bit 0 for the bucket's own bell, above it 1 + another bucket's index;
    /// an index that does not fit gives none (the waker then kicks instead of holding back).
    #[test]
    fn ringing_names_the_own_bell_and_one_other() {
        assert_eq!(ringing_value(true, None), Some(1));
        assert_eq!(ringing_value(false, Some(0)), Some(2));
        assert_eq!(ringing_value(true, Some(3)), Some(9));
        assert_eq!(ringing_value(false, Some((u32::MAX >> 1) - 1)), Some(u32::MAX - 1));
        assert_eq!(ringing_value(true, Some(u32::MAX >> 1)), None);
        assert_eq!(ringing_value(true, Some(u32::MAX)), None);
        for (own, other) in [(true, None), (false, Some(5)), (true, Some(7))] {
            let v = ringing_value(own, other).unwrap();
            assert_eq!((v & RING_OWN != 0, (v >> 1).checked_sub(1)), (own, other));
        }
    }
}
