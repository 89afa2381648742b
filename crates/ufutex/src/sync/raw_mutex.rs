//! The handoff mutex: a state byte, parked on with the ufutex core, and a mode byte.
//!
//! # The state word
//!
//! | bit | name | meaning |
//! |---|---|---|
//! | 0 | `LOCKED` | a thread owns the lock (also set while a granted handoff is unclaimed) |
//! | 1 | `PARKED` | threads may be queued on the word with [`NORMAL_MASK`]: unlock must wake one |
//! | 2 | `HANDOFF` | the one starving waiter asked for the lock; it waits with [`HANDOFF_MASK`] |
//! | 3 | `GRANTED` | an unlock handed the lock to that waiter, which has not claimed it yet |
//!
//! Invariants: `GRANTED ⇒ LOCKED`, never `HANDOFF` and `GRANTED` together. `HANDOFF` without
//! `LOCKED` is a handoff *in flight*: the owner's unlock has released the lock (4) and is about
//! to grant it (6); the lock is the requester's, and no one else takes it ([`free`]).
//! At most one thread is the handoff requester: the one that holds `REQUESTER` in the mode
//! byte. Only it sets `HANDOFF`, and it alone clears `HANDOFF` (withdrawing, or taking the lock
//! in flight) or `GRANTED` (claiming) — or the granting unlock turns its `HANDOFF` into
//! `GRANTED`, or a quiet store erases it (below).
//!
//! # The mode byte: a quiet mutex unlocks with a plain store
//!
//! | bits | name | meaning |
//! |---|---|---|
//! | 0..4 | registered | threads registered to mark the word (below), up to 31 |
//! | 5 | `REQUESTER` | a thread holds the right to request a handoff (below) |
//! | 6 | `STICKY` | 32 or more were registered at once: the mode never decays again |
//! | 7 | `CONTENDED` | a registered thread's barrier completed since the mode was last `QUIET` |
//!
//! `QUIET` is 0: nobody registered, no barrier standing. An unlock that finds the mode `QUIET`
//! and the state exactly `LOCKED` releases with a plain store of 0 (4q) instead of an atomic
//! read-modify-write: a lock, 5 increments and an unlock took 9.3 ns instead of 13.3 on the
//! Intel host (BENCHMARKS.md). The store can erase a bit that a contender set between the
//! owner's load and its store, so:
//! - **Register and announce before marking.** A thread that will set `PARKED` or `HANDOFF` on
//!   a word that may be held ((2), (3), (5b), a give-up) first registers (a compare-and-swap
//!   adding one to the count), and stays registered until after its last mark: in the slow path
//!   from its first mark until it returns, elsewhere around the one mark. If its registration
//!   did not see `CONTENDED`, it runs the asymmetric barrier (`membarrier::waiter_barrier`,
//!   `membarrier(2)` where it works) before its first mark, then sets `CONTENDED` (Release). A
//!   registration that sees `CONTENDED` (Acquire) needs no barrier of its own: one completed
//!   before that bit was set. Spinning needs no registration: only marks can be erased.
//! - **The quiet owner looks again.** After its store (and `membarrier::fence_free_point`), the
//!   owner reads the mode again; if it is no longer `QUIET` it may have erased a `PARKED` or a
//!   request, and repairs: it does what (5) does (wake one waiter, (5b) restoring `PARKED` if
//!   more are queued) and wakes the requester (below).
//! - **The decay.** An owner that unlocks a mutex whose mode is exactly `CONTENDED` (nobody
//!   registered) makes it `QUIET` with a compare-and-swap, then unlocks quietly if the state
//!   allows. The next thread to mark finds no `CONTENDED` and runs the barrier again.
//!
//! Why no wakeup is lost: a thread that announced with its own barrier was registered before
//! it, so the mode is not `QUIET` from before the barrier until after its marks. The barrier
//! lands in a quiet owner's path somewhere. If after its first mode load and before its
//! second, the second sees the registration and repairs. If before the first, the owner sees a
//! non-`QUIET` mode and unlocks with the RMW (4). If after the second, the owner's store was
//! visible before the barrier ended, so the marking CAS (made after it) comes later in the
//! word's order and erases nothing. A thread that marks without a barrier registered while
//! `CONTENDED` was set, and the decay's compare-and-swap fails while anyone is registered: no
//! owner makes the mode `QUIET` between that registration and its last mark, and until then no
//! unlock is quiet. A decay that does succeed (Acquire) comes after the Release of every thread
//! that left, so its owner's look at the state sees their marks, and a state with a mark in it
//! is never released quietly. Where `membarrier` does not work ([`crate::membarrier::fence_free`]
//! is false) no unlock is quiet and the mode never decays.
//!
//! **Requests and the quiet store.** The store can erase a `HANDOFF` as it erases a `PARKED`:
//! one set between the owner's look at the state and its store. Two things make that harmless.
//! - **The right to request lives in the mode byte**, which no store overwrites. A waiter
//!   becomes the requester by setting `REQUESTER` (an RMW that found it clear, Acquire) before
//!   it sets `HANDOFF`, and clears it (Release) only once its `HANDOFF` and any `GRANTED` are
//!   gone from the state. So an erased request leaves no opening for a second requester, and
//!   the next one sees the state its predecessor left.
//! - **The repair wakes the requester too** ([`HANDOFF_MASK`]), besides one normal waiter. The
//!   erasing owner repairs: by the argument above its second look sees the requester's
//!   registration, which came before the request. Its wake comes after its store, so either the
//!   requester is queued and woken, or its wait's check sees the erased value and it looks
//!   again. A requester that finds neither `HANDOFF` nor `GRANTED` knows its request was erased:
//!   it takes the lock if it is free, else asks again (3). The repair cannot tell from the mode
//!   whether a request was erased (`REQUESTER` may be set after its look), so it always wakes
//!   the requester; one whose request stands just looks and waits on.
//!
//! So a waiter may ask as soon as it is starving, registered and announced. (Until the
//! fifteenth session the request lived in the state alone, and a waiter asked only once it had
//! seen the lock released or been woken; a wake from an earlier owner, still in its unlock, did
//! not prove that the owner of the moment was past its store, and loom found the lost wakeup at
//! three preemptions: `tests/loom_sync.rs`, `handoff_in_flight_at_three_preemptions`.)
//!
//! The price of the decay: the first thread to mark after it pays the barrier again (~0.1 µs,
//! or a few µs when it must interrupt the other CPU), at most once per contended episode, and
//! a park that follows it costs a 15–60 µs hop anyway. Its gain: a mutex whose contenders
//! spin, or whose contention has passed, unlocks with the store again (BENCHMARKS.md,
//! fourteenth and fifteenth sessions: the 2- and 8-thread cells of the lock sweep).
//!
//! # Transitions (each one CAS or RMW on the word; `debug_assert`ed where it is made)
//!
//! 1. **lock**: `s` without `LOCKED` or `HANDOFF` → `s | LOCKED` (Acquire). The uncontended
//!    case is `0 → LOCKED`. A thread that was *woken* adds `PARKED` too (the baton rule below).
//! 2. **park**: `s` with `LOCKED` or `HANDOFF` → `s | PARKED`, then wait on the word for
//!    `s | PARKED` with [`NORMAL_MASK`].
//! 3. **request**: a starving waiter holding `REQUESTER`, `s` with `LOCKED`, without
//!    `HANDOFF`/`GRANTED` → `s | HANDOFF`, then spin a little watching for `GRANTED`, then wait
//!    for the current value with [`HANDOFF_MASK`]. A requester that finds its request erased
//!    (neither bit) asks again the same way, or takes the lock if it is free (1).
//! 4. **unlock**: subtract `LOCKED` (Release): one `lock dec`, which keeps the other bits.
//!    Uncontended, `LOCKED → 0`, and that is all. Otherwise the lock is free, or in flight,
//!    from here on, and the unlock goes on with (6) or (5) — unless someone has taken the lock
//!    since (whose unlock then does it) or another unlock did it already.
//!    (4q) On a `QUIET` mutex (or one that decays now) whose state is exactly `LOCKED`: a
//!    plain store of 0 instead, then the look at the mode (above).
//! 5. **unlock, waking**: `PARKED → 0` (the lock free, no request), then wake one
//!    [`NORMAL_MASK`] waiter. (5b) If that wake saw another such waiter still queued:
//!    `s → s | PARKED` (the word may be free, or already taken again, by then). If the queue
//!    emptied in between, the bit is stale: the next unlock takes its slow path and finds the
//!    bucket empty (no syscall).
//! 6. **unlock, handing off**: `s | HANDOFF → s | LOCKED | GRANTED` (Release; `s` without
//!    `LOCKED`), then wake the [`HANDOFF_MASK`] waiter. Ownership passes to the requester at
//!    this CAS — or at (6'): the requester, finding its request in flight, takes the lock
//!    itself, `s | HANDOFF → s | LOCKED` (Acquire). One of the two CASes wins.
//! 7. **claim**: the requester, seeing `GRANTED`: `s → s & !GRANTED` (Acquire), adding `PARKED`
//!    if it owes the baton. It now owns the lock; it never released it in between.
//! 8. **withdraw**: a requester that timed out: `s | HANDOFF → s` — or, if the CAS finds
//!    `GRANTED` instead, it claims (7): the lock was handed over first, so the timed lock
//!    succeeds. (A request erased meanwhile leaves nothing to withdraw.)
//!
//! How each waiter learns what happened: a normal waiter never assumes ownership — after any
//! wakeup it competes again with (1). The requester owns the lock exactly when it sees
//! `GRANTED`, which only transition (6) sets and only it clears; the wake of (6) just makes
//! sure it looks (and may come late, reaching the next requester, which then just looks
//! again and finds no grant). So a handoff transfers ownership exactly once, whether the requester is
//! asleep, about to sleep, or timing out when it happens.
//!
//! **The baton rule.** Transition (5) clears `PARKED` although more waiters may still be
//! queued (the word cannot count them). (5b) restores it at once when the wake saw more; so
//! newcomers park behind the queue instead of spinning against it, which is what keeps the
//! per-thread shares even (see below). Whether or not (5b) ran, the woken thread carries the
//! duty to restore it: it
//! sets `PARKED` when it takes the lock (1), or before it parks again (2) — or, if it gives up
//! (a timed lock), sets it and wakes a successor itself if the lock is free. A condvar waiter
//! requeued onto the word may have been woken by (5), so a thread returning from a condvar wait
//! always relocks as a woken thread.
//!
//! # Choices (measured; the figures and commands are in BENCHMARKS.md, "The mutex")
//!
//! - Two bytes (the state and the mode, aligned to 2 so they share a cache line) rather than
//!   32 bits: the uncontended lock and unlock cost the same at either width, and `Mutex<u8>`
//!   takes 4 bytes instead of 8.
//! - The quiet unlock (4q): a plain store while nobody is registered to mark the word. The
//!   seventh session's plain-store unlock looked at the bucket after every store, which cost
//!   20–25% at 2 and 8 threads (the contender writes that line); the mode byte is on the
//!   mutex's own line, and turns the store off while a thread is registered to park.
//! - The contended unlock subtracts rather than compares and swaps (`LOCKED → 0`): 0.5 ns less
//!   on the AMD hosts, where a subtraction is also cheaper than std's swap. The price is the
//!   in-flight state of (6), where a CAS unlock kept `LOCKED` through the grant.
//! - Starvation threshold: a waiter that has tried for 1 ms (from the end of its spin, when it
//!   first gets ready to park: its clock starts there, not at its first failed CAS) asks for a
//!   handoff (see [`super::Starvation`]). Shorter thresholds were no fairer and spread more; a
//!   time threshold also bounds how often the lock stays held through a handoff. Until the
//!   twenty-eighth session the clock was read on entry to the slow path; starting it at the
//!   first look instead took 8 threads × 5 increments from 133–257 M to 241–310 M locks/s
//!   (medians of ten interleaved runs, BENCHMARKS.md), though the read is 0.3% of the samples
//!   there. Under loom, where there is no time, the threshold is one lost wakeup.
//! - The spin: busy rounds from ~1 µs, doubling to ~35 µs in all (about one sleep/wake hop),
//!   each ended by a speculation fence, then `sched_yield` rounds (see `spin.rs`).
//! - (5b), keeping `PARKED` when the unlock's wake leaves more waiters queued (parking_lot
//!   does the same), evens out the per-thread shares at no cost in throughput. Setting it only
//!   on a word that is held again lost that gain: it is the next holder of a *free* word, a
//!   barging newcomer, that must wake the next waiter.

use super::spin::Spin;
use super::starvation::Patience;
use super::{HANDOFF_MASK, NORMAL_MASK};
use crate::deadline::Timeout;
#[cfg(not(ufutex_loom))]
use crate::domain::default_domain;
use crate::domain::Domain;
use crate::error::WaitError;
use crate::key::Key;
use crate::membarrier::{fence_free, fence_free_point, waiter_barrier, Pays};
use crate::primitive::{AtomicU8, Ordering};
use crate::wait::wait_word;
use crate::wake::{wake_private, wake_word, Report};
use crate::word::{word_of, WordRef};

pub(crate) type State = u8;

pub(crate) const LOCKED: State = 1 << 0;
pub(crate) const PARKED: State = 1 << 1;
pub(crate) const HANDOFF: State = 1 << 2;
pub(crate) const GRANTED: State = 1 << 3;

/// The mode byte (module docs): nobody marks or is about to, so an unlock may be a plain store.
const QUIET: u8 = 0;
/// A barrier completed since the mode was last `QUIET`: a registered thread marks without one.
const CONTENDED: u8 = 0x80;
/// More threads than [`REGISTERED`] counts were registered at once: the mode never decays.
const STICKY: u8 = 0x40;
/// A thread holds the right to request a handoff (at most one does): the request's record that
/// no quiet store can erase (module docs).
const REQUESTER: u8 = 0x20;
/// The threads registered to mark the word (entering, or inside, the marking part of the slow
/// path), up to 31.
const REGISTERED: u8 = 0x1f;

/// The raw handoff mutex: two bytes (see the module docs for the protocol).
///
/// Use it through [`super::Mutex`]; the raw methods are for building other primitives.
///
/// # Examples
/// ```
/// use lock_api::RawMutex as _;
/// let m = ufutex::sync::RawMutex::INIT;
/// m.lock();
/// assert!(!m.try_lock());
/// // SAFETY: this thread holds the lock.
/// unsafe { m.unlock() };
/// assert_eq!(std::mem::size_of_val(&m), 2);
/// ```
#[repr(C, align(2))]
pub struct RawMutex {
    state: AtomicU8,
    /// `CONTENDED` and `STICKY` and the count of registered threads; 0 is `QUIET` (module docs).
    mode: AtomicU8,
}

impl std::fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawMutex")
            .field("state", &self.state.load(Ordering::Relaxed))
            .field("mode", &self.mode.load(Ordering::Relaxed))
            .finish()
    }
}

/// Debug check of the word's invariants (module docs).
#[inline]
fn valid(s: State) -> bool {
    let locked_if_granted = s & GRANTED == 0 || s & LOCKED != 0;
    locked_if_granted && s & (HANDOFF | GRANTED) != (HANDOFF | GRANTED) && s & !0b1111 == 0
}

/// The bit a thread that takes the lock adds to the word: `PARKED` if it was woken and so owes
/// the baton (module docs, "The baton rule").
#[inline]
fn baton(woken: bool) -> State {
    if woken {
        PARKED
    } else {
        0
    }
}

/// Free for anyone to take: neither held nor being handed over (`HANDOFF` without `LOCKED` is a
/// handoff in flight: the lock is the requester's).
#[inline]
fn free(s: State) -> bool {
    s & (LOCKED | HANDOFF) == 0
}

/// What [`RawMutex::unlock_quiet`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quiet {
    /// Unlocked with a plain store; nothing more to do.
    Done,
    /// Unlocked with a plain store, and a contender registered meanwhile: the caller must run
    /// [`RawMutex::unlock_repair`].
    Repair,
    /// Not quiet, or the state is not exactly `LOCKED`: nothing done; unlock another way.
    No,
}

/// What the handoff requester finds when it looks at the word ([`RawMutex::look`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// The lock was granted, or was in flight, and is now ours.
    Ours,
    /// Another thread holds the lock; our request stands.
    Standing,
    /// Neither `HANDOFF` nor `GRANTED`: a quiet store erased our request (module docs).
    Erased,
    /// The word changed under our take of a lock in flight: look at this value again.
    Changed(State),
}

/// How a timed lock attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    Yes,
    TimedOut,
}

impl RawMutex {
    /// An unlocked mutex (`const`: usable in a `static`). Same as `RawMutex::INIT`.
    ///
    /// # Examples
    /// ```
    /// use lock_api::RawMutex as _;
    /// static LOCK: ufutex::sync::RawMutex = ufutex::sync::RawMutex::new();
    /// assert!(LOCK.try_lock());
    /// assert!(LOCK.is_locked());
    /// // SAFETY: this thread holds the lock.
    /// unsafe { LOCK.unlock() };
    /// ```
    #[cfg(not(ufutex_loom))]
    pub const fn new() -> RawMutex {
        RawMutex { state: AtomicU8::new(0), mode: AtomicU8::new(QUIET) }
    }

    /// An unlocked mutex.
    #[cfg(ufutex_loom)]
    pub fn new() -> RawMutex {
        RawMutex { state: AtomicU8::new(0), mode: AtomicU8::new(QUIET) }
    }

    #[inline]
    pub(crate) fn word(&self) -> WordRef {
        word_of(&self.state)
    }

    /// The raw state (for tests and the C ABI's checks).
    #[cfg(not(ufutex_loom))]
    #[inline]
    pub(crate) fn state(&self) -> State {
        self.state.load(Ordering::Relaxed)
    }

    /// Take the lock if it is free, without waiting.
    #[inline]
    pub(crate) fn try_lock_state(&self) -> bool {
        // The uncontended case first, by a CAS from 0 rather than a load: a load before a
        // read-modify-write of the same line costs a second ownership request (~1.5 ns here).
        let mut s = match self.state.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => now,
        };
        while free(s) {
            debug_assert!(valid(s), "state {s:#b}");
            // (1) Acquire: the critical section sees the previous owner's writes.
            match self.state.compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Lock, parking in `domain` when contended.
    #[doc(hidden)]
    #[inline]
    pub fn lock_in(&self, domain: &Domain) {
        if !self.fast_lock() {
            self.lock_contended(domain);
        }
    }

    /// The untimed slow path, out of line so the fast path needs no stack frame.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self, domain: &Domain) {
        let r = self.lock_slow(domain, None, false);
        debug_assert_eq!(r, Acquired::Yes);
    }

    /// Lock before `timeout` passes (`None`: wait forever).
    #[inline]
    pub(crate) fn lock_until_in(&self, domain: &Domain, timeout: Option<Timeout>) -> Acquired {
        if self.fast_lock() {
            return Acquired::Yes;
        }
        self.lock_slow(domain, timeout, false)
    }

    /// Lock, giving up after `timeout`; `true` if the lock was taken.
    #[doc(hidden)]
    pub fn try_lock_for_in(&self, domain: &Domain, timeout: std::time::Duration) -> bool {
        let t = Timeout::from(crate::Deadline::from(timeout));
        self.lock_until_in(domain, Some(t)) == Acquired::Yes
    }

    /// Relock after a condvar wait: always as a woken thread (the baton rule).
    pub(crate) fn relock_woken_in(&self, domain: &Domain) {
        let r = self.lock_slow(domain, None, true);
        debug_assert_eq!(r, Acquired::Yes);
    }

    /// Try to lock without waiting.
    #[doc(hidden)]
    #[inline]
    pub fn try_lock_in(&self) -> bool {
        self.try_lock_state()
    }

    /// Unlock, waking in `domain`. The caller must hold the lock; otherwise the mutex's state
    /// is corrupted (no memory unsafety: the raw mutex guards no data by itself).
    #[doc(hidden)]
    #[inline]
    pub fn unlock_in(&self, domain: &Domain) {
        // (4q) while nobody is registered to mark the word.
        match self.unlock_quiet() {
            Quiet::Done => return,
            Quiet::Repair => return self.unlock_repair(domain),
            Quiet::No => {}
        }
        // (4) Release: publishes the critical section to the next owner. A subtraction, not a
        // CAS: it keeps the other bits for the slow path and costs less (BENCHMARKS.md).
        // (Only compared, the old value becomes the flags of one `lock sub`.)
        if self.state.fetch_sub(LOCKED, Ordering::Release) != LOCKED {
            self.unlock_slow(domain);
        }
    }

    /// (4q) The quiet unlock, where the mutex is `QUIET` and its state exactly `LOCKED`: a plain
    /// store, then the look at the mode that catches a contender who registered meanwhile and
    /// may have set `PARKED` under the store (module docs). Otherwise it does nothing.
    #[inline]
    pub(crate) fn unlock_quiet(&self) -> Quiet {
        // Relaxed loads: they only choose the path; the look after the store makes it safe.
        // The mode first: while contended, the unlock is then one load before its RMW
        // (BENCHMARKS.md, thirteenth session, measured both orders).
        let mode = self.mode.load(Ordering::Relaxed);
        if mode != QUIET && (mode != CONTENDED || !self.decay()) {
            return Quiet::No;
        }
        if self.state.load(Ordering::Relaxed) != LOCKED || !fence_free() {
            return Quiet::No;
        }
        // Release: publishes the critical section to the next owner, as (4).
        #[cfg(not(ufutex_loom))]
        self.state.store(0, Ordering::Release);
        // Loom 0.7 lets a CAS that races a plain store succeed on the value the store replaced
        // and then shows the storer the CAS's value, which no C11 order allows (BENCHMARKS.md,
        // seventh session): modelled as a swap, which overwrites alike.
        #[cfg(ufutex_loom)]
        self.state.swap(0, Ordering::Release);
        fence_free_point();
        // Relaxed: ordered after the store by the announcer's barrier (module docs).
        if self.mode.load(Ordering::Relaxed) == QUIET {
            Quiet::Done
        } else {
            Quiet::Repair
        }
    }

    /// A quiet unlock that found the mode changed: its store may have erased a `PARKED` or a
    /// handoff request (module docs). The lock is free; do what (5) would have done, and wake
    /// the requester, if there is one, to look at its request again.
    #[cold]
    #[inline(never)]
    pub(crate) fn unlock_repair(&self, domain: &Domain) {
        self.wake_next(domain);
        wake_word(domain.tables(), self.word(), 1, HANDOFF_MASK, Pays::Waker);
    }

    /// The owner, unlocking a `CONTENDED` mutex that nobody is registered on: make it `QUIET`
    /// again (the decay, module docs), so that this unlock and the next can be plain stores.
    /// `false` if a thread registered first, or where no unlock can be quiet.
    #[cold]
    #[inline(never)]
    fn decay(&self) -> bool {
        // Acquire: a thread that left after marking (its Release subtraction) published its
        // marks to our look at the state. Fails if anyone registered since our load.
        fence_free() && self.mode.compare_exchange(CONTENDED, QUIET, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Other threads are registered to mark the word (`me`: this thread's registration, if
    /// any): waiters are queuing on this lock, so a spin whose policy says so cuts its busy
    /// rounds short (`spin.rs`; the default does not). Not under loom: the spin's length is no
    /// part of the protocol, and the extra load would only grow the models.
    #[inline]
    fn crowded(&self, me: Option<&Marker<'_>>) -> bool {
        if cfg!(ufutex_loom) {
            return false;
        }
        // Relaxed: a hint for the spin; no data is read under it.
        (self.mode.load(Ordering::Relaxed) & REGISTERED) > u8::from(me.is_some_and(|m| m.counted))
    }

    /// Register to mark the word (module docs); see [`Marker`].
    fn marker(&self) -> Marker<'_> {
        let mut m = self.mode.load(Ordering::Relaxed);
        loop {
            if m & STICKY != 0 || m & REGISTERED == REGISTERED {
                // Too many at once to count: pin the mode instead (no decay from now on).
                // Acquire as below.
                let m = self.mode.fetch_or(STICKY, Ordering::Acquire);
                return Marker { mutex: self, counted: false, announced: m & CONTENDED != 0 };
            }
            // Acquire: pairs with the Release that set CONTENDED, so the barrier before that
            // precedes our marks.
            match self.mode.compare_exchange_weak(m, m + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Marker { mutex: self, counted: true, announced: m & CONTENDED != 0 },
                Err(now) => m = now,
            }
        }
    }

    /// Become the handoff requester, unless another thread is (module docs); see [`Request`].
    fn request(&self) -> Option<Request<'_>> {
        // A load first: while another thread requests, a starving waiter looks at every turn.
        if self.mode.load(Ordering::Relaxed) & REQUESTER != 0 {
            return None;
        }
        // Acquire: pairs with the last requester's Release (its drop), so our look at the state
        // comes after its request, grant and claim.
        (self.mode.fetch_or(REQUESTER, Ordering::Acquire) & REQUESTER == 0).then_some(Request { mutex: self })
    }

    /// Whether the lock is held (or being handed over).
    #[doc(hidden)]
    pub fn is_locked_in(&self) -> bool {
        !free(self.state.load(Ordering::Relaxed))
    }

    #[inline]
    pub(crate) fn fast_lock(&self) -> bool {
        // (1), uncontended: one CAS. Acquire as in `try_lock_state`.
        self.state.compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// (4), the uncontended unlock alone: whether it was that (else the caller takes
    /// [`RawMutex::unlock_in`]'s slow path, which wakes or hands off).
    #[cfg(not(ufutex_loom))]
    #[inline]
    pub(crate) fn fast_unlock(&self) -> bool {
        // Release as in `unlock_in`.
        self.state.compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed).is_ok()
    }

    /// (1) and (4) for a process that has one thread (the C ABI asks glibc): a free mutex
    /// taken, or a held one with nothing else set released, with a plain load and store.
    /// Sound only while no other thread can touch the word: the process has no other thread
    /// (a thread that starts later is ordered after these by its creation), and the word is
    /// the process's own (ufutex_mutex_t is never process-shared).
    #[cfg(not(ufutex_loom))]
    #[inline]
    pub(crate) fn swap_alone(&self, from: State, to: State) -> bool {
        if self.state.load(Ordering::Relaxed) != from {
            return false;
        }
        self.state.store(to, Ordering::Relaxed);
        true
    }

    /// Spin, then park until the lock is ours or `timeout` passes. `woken`: this thread owes
    /// the baton (module docs).
    #[cold]
    fn lock_slow(&self, domain: &Domain, timeout: Option<Timeout>, mut woken: bool) -> Acquired {
        // A deadline already passed: one more try (POSIX's timedlock takes a free lock whatever
        // the deadline), without the spin, and without marking the lock, whose owner would then
        // make a wake for nobody.
        if timeout.is_some_and(|t| t.expired()) {
            return if self.try_lock_state() { Acquired::Yes } else { Acquired::TimedOut };
        }
        let mut spin = Spin::new();
        let mut patience = Patience::new();
        // Registered and announced once this thread is about to mark or park, until it returns
        // (module docs); and the right to request a handoff, once it is starving and has it.
        let mut marker: Option<Marker<'_>> = None;
        let mut request: Option<Request<'_>> = None;
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(valid(s), "state {s:#b}");
            if free(s) {
                let new = s | LOCKED | baton(woken);
                // (1) Acquire, as in `try_lock_state`.
                match self.state.compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return Acquired::Yes,
                    Err(now) => s = now,
                }
                continue;
            }
            if s & (PARKED | HANDOFF) == 0 && spin.spin_among(|| self.crowded(marker.as_ref())) {
                s = self.state.load(Ordering::Relaxed);
                continue;
            }
            if marker.is_none() {
                marker.insert(self.marker()).announce();
                s = self.state.load(Ordering::Relaxed);
                continue;
            }
            if s & (HANDOFF | GRANTED) == 0 && patience.starving() {
                if request.is_none() {
                    request = self.request();
                }
                if request.is_some() {
                    // (3) Relaxed: nothing is published; the wait's (A) orders the check. (We keep
                    // the right until we return, after our request has left the state.)
                    match self.state.compare_exchange(s, s | HANDOFF, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => return self.await_handoff(domain, timeout, s | HANDOFF, woken),
                        Err(now) => s = now,
                    }
                    continue;
                }
            }
            if s & PARKED == 0 {
                // (2) Relaxed: the wait that follows re-checks the value under its bucket lock.
                if let Err(now) = self.state.compare_exchange(s, s | PARKED, Ordering::Relaxed, Ordering::Relaxed) {
                    s = now;
                    continue;
                }
                s |= PARKED;
            }
            // The value we sleep on has PARKED and LOCKED: the owner's unlock will wake someone,
            // so the baton is passed on.
            woken = false;
            match wait_word(domain.tables(), self.word(), u64::from(s), NORMAL_MASK, timeout, Pays::Waker) {
                Ok(()) => {
                    woken = true;
                    patience.passed_over();
                    spin.reset();
                }
                Err(WaitError::WouldBlock) | Err(WaitError::Interrupted) => {}
                Err(WaitError::TimedOut) => {
                    self.give_up(domain, woken);
                    return Acquired::TimedOut;
                }
            }
            s = self.state.load(Ordering::Relaxed);
        }
    }

    /// The requester's side: wait until an unlock grants the lock (7), or time out and
    /// withdraw (8). `s` is the value that our request CAS stored.
    fn await_handoff(&self, domain: &Domain, timeout: Option<Timeout>, mut s: State, woken: bool) -> Acquired {
        // The grant may be near (the owner may be running): spin before parking, so the lock
        // does not stay held, unused, through a wake-up hop.
        let mut spin = Spin::for_grant();
        loop {
            debug_assert!(valid(s), "state {s:#b}");
            match self.look(s, woken) {
                Look::Ours => return Acquired::Yes,
                Look::Standing => {}
                Look::Changed(now) => {
                    s = now;
                    continue;
                }
                Look::Erased => {
                    // A quiet store erased our request (module docs): take the lock if it is
                    // free (1, Acquire as there), else ask again (3, Relaxed as there).
                    let take = free(s);
                    let new = if take { s | LOCKED | baton(woken) } else { s | HANDOFF };
                    match self.state.compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed) {
                        Ok(_) if take => return Acquired::Yes,
                        Ok(_) => s = new,
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
            }
            if spin.spin() {
                s = self.state.load(Ordering::Relaxed);
                continue;
            }
            match wait_word(domain.tables(), self.word(), u64::from(s), HANDOFF_MASK, timeout, Pays::Waker) {
                // A granting unlock (6) wakes HANDOFF_MASK after setting GRANTED — but not
                // necessarily for us: its requester may have seen GRANTED and claimed before
                // that unlock got to its wake, and the wake then finds the *next* requester
                // (us) queued. A repair wakes it too, whether or not it erased our request. So
                // a wake is only a reason to look again, never proof of a grant.
                Ok(()) => s = self.state.load(Ordering::Relaxed),
                Err(WaitError::TimedOut) => return self.withdraw(domain, woken),
                Err(_) => s = self.state.load(Ordering::Relaxed),
            }
        }
    }

    /// (7) Take the granted lock. Acquire: pairs with the granting unlock's Release.
    fn claim(&self, mut s: State, woken: bool) {
        loop {
            debug_assert!(s & GRANTED != 0 && s & LOCKED != 0 && s & HANDOFF == 0, "claim from {s:#b}");
            let new = (s & !GRANTED) | baton(woken);
            match self.state.compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// The requester's look at the word `s`, taking the lock if it is its own: granted (7,
    /// claimed here) or in flight (6', taken here).
    fn look(&self, s: State, woken: bool) -> Look {
        if s & GRANTED != 0 {
            self.claim(s, woken);
            Look::Ours
        } else if s & HANDOFF == 0 {
            Look::Erased
        } else if s & LOCKED == 0 {
            match self.take_in_flight(s, woken) {
                Ok(()) => Look::Ours,
                Err(now) => Look::Changed(now),
            }
        } else {
            Look::Standing
        }
    }

    /// (6') The requester takes a lock released while its request stood (`HANDOFF` without
    /// `LOCKED`), racing the releasing unlock's grant: one of the two CASes wins. Acquire, as
    /// (1): the releasing unlock's subtraction was Release.
    fn take_in_flight(&self, s: State, woken: bool) -> Result<(), State> {
        debug_assert!(s & (LOCKED | GRANTED) == 0 && s & HANDOFF != 0, "in flight from {s:#b}");
        let new = (s & !HANDOFF) | LOCKED | baton(woken);
        self.state.compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed).map(|_| ())
    }

    /// (8) A requester timed out: take the request back, unless the lock was granted first.
    fn withdraw(&self, domain: &Domain, woken: bool) -> Acquired {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(valid(s), "state {s:#b}");
            match self.look(s, woken) {
                // Granted or in flight: the lock is ours before the deadline could drop the
                // request.
                Look::Ours => return Acquired::Yes,
                Look::Changed(now) => s = now,
                // Erased by a quiet store: nothing left to take back.
                Look::Erased => break,
                // Relaxed: nothing is published by dropping the request.
                Look::Standing => {
                    match self.state.compare_exchange_weak(s, s & !HANDOFF, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => break,
                        Err(now) => s = now,
                    }
                }
            }
        }
        self.give_up(domain, woken);
        Acquired::TimedOut
    }

    /// A woken thread that leaves without the lock passes the baton (module docs).
    fn give_up(&self, domain: &Domain, woken: bool) {
        if !woken {
            return;
        }
        // Either an owner's later unlock reads PARKED, or we read "unlocked".
        if free(self.mark_parked()) {
            wake_word(domain.tables(), self.word(), 1, NORMAL_MASK, Pays::Waker);
        }
    }

    /// The rest of an unlock whose subtraction (4) found more than `LOCKED`: it has released
    /// the lock already, and now hands it over (6) or wakes a waiter (5), unless someone has
    /// taken it since (whose unlock then does that) or done it for us (an unlock of theirs).
    #[cold]
    #[inline(never)]
    fn unlock_slow(&self, domain: &Domain) {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(valid(s), "state {s:#b}");
            if s & LOCKED != 0 {
                // Taken since: by the requester (6'), or by a locker once no request stood.
                return;
            }
            if s & HANDOFF != 0 {
                // (6) Release: the requester's claim (Acquire) sees our critical section.
                match self.state.compare_exchange_weak(
                    s,
                    (s & !HANDOFF) | LOCKED | GRANTED,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        wake_word(domain.tables(), self.word(), 1, HANDOFF_MASK, Pays::Waker);
                        return;
                    }
                    Err(now) => s = now,
                }
                continue;
            }
            if s & PARKED == 0 {
                return; // a request withdrawn, nobody parked
            }
            // (5) Relaxed: the subtraction released the lock; this only takes the bit that a
            // woken thread will restore (the baton rule).
            match self.state.compare_exchange_weak(s, s & !PARKED, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    self.wake_next(domain);
                    return;
                }
                Err(now) => s = now,
            }
        }
    }

    /// (5) The rest of an unlock that found PARKED: wake one waiter, and (5b) keep PARKED if
    /// the wake saw another one still queued.
    fn wake_next(&self, domain: &Domain) {
        let more =
            wake_private(domain.tables(), Key::private(self.word().addr()), 1, NORMAL_MASK, Report::Rest, Pays::Waker)
                .more;
        if more {
            // (5b) PARKED only says "unlock must wake"; the woken thread restores it too (the
            // baton rule). Also on a free word: whoever takes it next then wakes the next
            // waiter at its unlock, which is what keeps the queue moving.
            self.mark_parked();
        }
    }

    /// Set `PARKED` on a word that another thread may hold, announcing first (the mode byte,
    /// module docs); the state before. Relaxed RMW: the bit only says "unlock must wake", and
    /// the wake that follows it orders what it must.
    fn mark_parked(&self) -> State {
        let mut marker = self.marker();
        marker.announce();
        self.state.fetch_or(PARKED, Ordering::Relaxed)
        // (`marker` leaves here, after the mark.)
    }
}

/// A thread registered in the mode byte to mark the word: from before its first mark (or the
/// look at `CONTENDED` that lets it mark without a barrier) until after its last, so that no
/// owner makes the mutex `QUIET` again in between (module docs). Leaves when dropped.
struct Marker<'m> {
    mutex: &'m RawMutex,
    /// In the count (else the mode is `STICKY`, and never decays).
    counted: bool,
    /// A barrier completed since the mode was last `QUIET`: marks need no other.
    announced: bool,
}

impl Marker<'_> {
    /// Make sure no owner can unlock quietly past this thread's next mark (module docs).
    #[inline]
    fn announce(&mut self) {
        if !self.announced {
            self.announce_slow();
        }
    }

    #[cold]
    #[inline(never)]
    fn announce_slow(&mut self) {
        // The registration (the mode is not QUIET while we are counted) is what the quiet
        // owner's looks see; the barrier orders it before them, or our marks after its store.
        // Without `membarrier` no unlock is quiet: nothing to order, and no decay to attempt
        // at every unlock (STICKY).
        let bits = if fence_free() {
            waiter_barrier();
            CONTENDED
        } else {
            CONTENDED | STICKY
        };
        // Release: a thread that reads CONTENDED (Acquire) marks after the barrier too.
        self.mutex.mode.fetch_or(bits, Ordering::Release);
        self.announced = true;
    }
}

impl Drop for Marker<'_> {
    fn drop(&mut self) {
        if self.counted {
            // Release: an owner that decays the mode after this (Acquire) sees our marks.
            self.mutex.mode.fetch_sub(1, Ordering::Release);
        }
    }
}

/// The right to request a handoff: `REQUESTER` in the mode byte, held by at most one thread
/// (module docs). Taken by [`RawMutex::request`]; given up when dropped, which the holder does
/// only once its request has left the state (claimed, taken, withdrawn, or erased and not
/// made again).
struct Request<'m> {
    mutex: &'m RawMutex,
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // Release: the next requester (Acquire) sees the state we leave.
        self.mutex.mode.fetch_and(!REQUESTER, Ordering::Release);
    }
}

impl Default for RawMutex {
    fn default() -> Self {
        RawMutex::new()
    }
}

// SAFETY:
// - `lock`/`try_lock` return only with LOCKED set by this thread's own CAS (1) or by a handoff
//   granted to this thread (6, 7), and no other thread can set LOCKED while it is set, so at
//   most one thread holds the lock; the Acquire/Release pairs publish the critical sections.
// - `GuardMarker = GuardSend`: nothing ties the lock to the thread that took it.
#[cfg(not(ufutex_loom))]
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex::new();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.lock_in(default_domain());
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.try_lock_state()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.unlock_in(default_domain());
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.is_locked_in()
    }
}

// SAFETY: as for `lock_api::RawMutex`: a timed lock that returns `true` took the lock by (1)
// or (7); one that returns `false` holds nothing (a withdrawn request or a timed-out park).
#[cfg(not(ufutex_loom))]
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = std::time::Duration;
    type Instant = std::time::Instant;

    fn try_lock_for(&self, timeout: std::time::Duration) -> bool {
        self.try_lock_for_in(default_domain(), timeout)
    }

    fn try_lock_until(&self, deadline: std::time::Instant) -> bool {
        let t = Timeout::from(crate::Deadline::Monotonic(deadline));
        self.lock_until_in(default_domain(), Some(t)) == Acquired::Yes
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn invariants_of_the_word() {
        assert!(valid(0));
        assert!(valid(LOCKED | PARKED | HANDOFF));
        assert!(valid(LOCKED | GRANTED));
        assert!(valid(HANDOFF | PARKED), "a handoff in flight");
        assert!(!free(HANDOFF), "in flight is not free");
        assert!(free(PARKED));
        assert!(!valid(GRANTED));
        assert!(!valid(LOCKED | HANDOFF | GRANTED));
        assert!(!valid(0x10));
    }

    #[test]
    fn a_request_in_flight_is_the_requesters() {
        let d = Domain::new(crate::DomainConfig::new()).unwrap();
        let m = RawMutex::new();
        // The owner's unlock has subtracted LOCKED and not yet granted (4 before 6).
        m.state.store(HANDOFF | PARKED, Ordering::Relaxed);
        assert!(!m.try_lock_state(), "nobody else takes it");
        assert!(m.is_locked_in());
        // The requester takes it (6'), keeping PARKED; the unlock's grant then finds it taken.
        assert_eq!(m.take_in_flight(HANDOFF | PARKED, false), Ok(()));
        assert_eq!(m.state(), LOCKED | PARKED);
        m.unlock_slow(&d); // the late end of that unlock: taken since, nothing to do
        assert_eq!(m.state(), LOCKED | PARKED);
        m.unlock_in(&d); // the requester's own unlock: wakes (nobody), clears PARKED
        assert_eq!(m.state(), 0);
    }

    #[test]
    fn handoff_bits_drive_unlock() {
        let d = Domain::new(crate::DomainConfig::new()).unwrap();
        let m = RawMutex::new();
        m.lock_in(&d);
        // A request with nobody asleep yet: the unlock releases, then grants (LOCKED again).
        m.state.fetch_or(HANDOFF, Ordering::Relaxed);
        m.unlock_in(&d);
        assert_eq!(m.state(), LOCKED | GRANTED);
        assert!(!m.try_lock_state());
        // The requester claims (owing the baton) and unlocks: PARKED makes it wake (nobody).
        m.claim(m.state(), true);
        assert_eq!(m.state(), LOCKED | PARKED);
        m.unlock_in(&d);
        assert_eq!(m.state(), 0);
    }

    #[test]
    fn crowded_means_someone_else_is_registered() {
        let m = RawMutex::new();
        assert!(!m.crowded(None));
        let a = m.marker();
        assert!(!m.crowded(Some(&a)), "our own registration is not a crowd");
        assert!(m.crowded(None), "a spinner that is not registered sees one");
        let b = m.marker();
        assert!(m.crowded(Some(&a)));
        drop((a, b));
        assert!(!m.crowded(None));
    }

    #[test]
    fn the_mode_counts_markers_decays_when_none_and_sticks_past_31() {
        let m = RawMutex::new();
        // Without membarrier the first announcement pins the mode (no unlock is quiet there).
        let announced = if fence_free() { CONTENDED } else { CONTENDED | STICKY };
        {
            let mut a = m.marker();
            assert!(!a.announced && a.counted);
            a.announce();
            let b = m.marker();
            assert!(b.announced, "a registration that sees CONTENDED needs no barrier");
            // (Once STICKY, a registration is not counted.)
            let counted = if fence_free() { 2 } else { 1 };
            assert_eq!(m.mode.load(Ordering::Relaxed), announced | counted);
            assert!(!m.decay(), "no decay while anyone is registered");
        }
        assert_eq!(m.mode.load(Ordering::Relaxed), announced);
        assert_eq!(m.decay(), fence_free(), "nobody registered: QUIET again (where it can be)");
        if !fence_free() {
            return;
        }
        assert_eq!(m.mode.load(Ordering::Relaxed), QUIET);
        let many: Vec<_> = (0..REGISTERED).map(|_| m.marker()).collect();
        let extra = m.marker();
        assert!(!extra.counted, "the 32nd is not counted");
        assert_eq!(m.mode.load(Ordering::Relaxed) & (STICKY | REGISTERED), STICKY | REGISTERED);
        drop((many, extra));
        assert_eq!(m.mode.load(Ordering::Relaxed) & (STICKY | REGISTERED), STICKY);
        assert!(!m.decay(), "a sticky mode never decays");
    }

    #[test]
    fn one_requester_at_a_time_and_an_erased_request_leaves_nothing_to_withdraw() {
        let d = Domain::new(crate::DomainConfig::new()).unwrap();
        let m = RawMutex::new();
        let r = m.request().expect("the right is free");
        assert!(m.request().is_none(), "a second requester");
        // Another thread holds the lock and its quiet store erased our request: the look tells
        // an erased request from a standing one (asking again is the next test's).
        m.state.store(LOCKED, Ordering::Relaxed);
        assert_eq!(m.look(LOCKED, false), Look::Erased);
        assert_eq!(m.look(LOCKED | HANDOFF, false), Look::Standing);
        // A timed-out requester whose request was erased has nothing to withdraw.
        assert_eq!(m.withdraw(&d, false), Acquired::TimedOut);
        assert_eq!(m.state(), LOCKED);
        drop(r);
        assert_eq!(m.mode.load(Ordering::Relaxed) & REQUESTER, 0);
        assert!(m.request().is_some(), "free again once the last requester left");
    }

    /// A requester asleep on its request, which a quiet store then erases (module docs): the
    /// erasing owner's repair wakes it, and it takes the free lock — or, when another thread
    /// holds the lock by then, asks again and is granted it at that owner's unlock.
    #[test]
    fn a_requester_whose_request_was_erased_is_woken_and_gets_the_lock() {
        for taken_since in [false, true] {
            let d = Domain::new(crate::DomainConfig::new()).unwrap();
            let m = RawMutex::new();
            m.state.store(LOCKED, Ordering::Relaxed);
            std::thread::scope(|s| {
                let requester = s.spawn(|| {
                    let _right = m.request().expect("the right is free");
                    m.state.fetch_or(HANDOFF, Ordering::Relaxed);
                    // A hang guard, not a speed check: a requester never woken times out and
                    // fails the assertion below instead of hanging the test.
                    let guard = Timeout::from(crate::Deadline::from(std::time::Duration::from_secs(20)));
                    m.await_handoff(&d, Some(guard), LOCKED | HANDOFF, false)
                });
                while d.queued_waiters() == 0 {
                    std::thread::yield_now();
                }
                // The quiet store lands over the request; a thread may take the lock at once.
                m.state.store(if taken_since { LOCKED } else { 0 }, Ordering::Relaxed);
                m.unlock_repair(&d);
                if taken_since {
                    // The requester asks again; that owner's unlock grants the lock to it.
                    while m.state() != LOCKED | HANDOFF && !requester.is_finished() {
                        std::thread::yield_now();
                    }
                    m.unlock_in(&d);
                }
                assert_eq!(requester.join().unwrap(), Acquired::Yes);
            });
            assert_eq!(m.state(), LOCKED, "the requester owns the lock (taken_since: {taken_since})");
            assert_eq!(m.mode.load(Ordering::Relaxed) & REQUESTER, 0, "the right was given up");
            assert_eq!(d.queued_waiters(), 0);
        }
    }

    #[test]
    fn timed_out_requester_that_was_granted_owns_the_lock() {
        let d = Domain::new(crate::DomainConfig::new()).unwrap();
        let m = RawMutex::new();
        m.state.store(LOCKED | GRANTED, Ordering::Relaxed);
        assert_eq!(m.withdraw(&d, false), Acquired::Yes);
        assert_eq!(m.state(), LOCKED);
        m.state.store(LOCKED | HANDOFF, Ordering::Relaxed);
        assert_eq!(m.withdraw(&d, false), Acquired::TimedOut);
        assert_eq!(m.state(), LOCKED);
    }
}

/// The decay, model-checked where it races: the mode is `CONTENDED` with nobody registered (a
/// contended episode just ended) while the owner unlocks and a contender arrives. The owner may
/// make the mode `QUIET` and unlock with a plain store; the contender either registered first
/// (the decay fails) or finds the mode `QUIET` and announces with its barrier. Run with
/// `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib`.
#[cfg(all(test, ufutex_loom))]
mod loom_models {
    use super::*;
    use crate::sync::{set_starvation_policy, Starvation};
    use crate::{DomainConfig, Slots};
    use loom::sync::Arc;

    fn domain() -> Arc<Domain> {
        let d = Arc::new(Domain::new(DomainConfig::new().slots(Slots::Fixed(2))).expect("domain"));
        // The domain's thread counter, made before any model thread exists (see tests/loom_sync.rs).
        let w = crate::primitive::AtomicU32::new(0);
        let _ = d.wait(&w, 0, Some(std::time::Duration::ZERO.into()));
        d
    }

    /// A mutex held by this thread after a contended episode: `CONTENDED`, nobody registered.
    fn held_after_contention() -> Arc<RawMutex> {
        let m = Arc::new(RawMutex::new());
        m.state.store(LOCKED, Ordering::Relaxed);
        m.mode.store(CONTENDED, Ordering::Relaxed);
        m
    }

    /// The owner unlocks (decaying) while a contender arrives, parks and takes the lock; then
    /// the owner locks again behind it. Both finish (no lost wakeup), the lock ends free, and
    /// nobody is left registered.
    #[test]
    fn decay_races_an_arriving_contender() {
        set_starvation_policy(Some(Starvation::Never));
        // At least 4 preemptions: an erased registration needs the owner preempted between
        // its looks and the contender between its registration and its mark (a decay that
        // stores instead of compare-and-swaps passes at 3 and fails at 4; 0.6 s here).
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(model.preemption_bound.map_or(4, |b| b.max(4)));
        model.check(|| {
            let d = domain();
            let m = held_after_contention();
            let contender = {
                let (d, m) = (d.clone(), m.clone());
                loom::thread::spawn(move || {
                    m.lock_in(&d);
                    m.unlock_in(&d);
                })
            };
            m.unlock_in(&d);
            m.lock_in(&d);
            m.unlock_in(&d);
            contender.join().unwrap();
            assert_eq!(m.state.load(Ordering::Relaxed) & (LOCKED | HANDOFF | GRANTED), 0);
            assert_eq!(m.mode.load(Ordering::Relaxed) & REGISTERED, 0);
        });
        set_starvation_policy(None);
    }
}
