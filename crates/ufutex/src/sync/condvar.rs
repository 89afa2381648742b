//! The requeueing condition variable.
//!
//! A 32-bit sequence word that every notify increments, and the address of the mutex its
//! waiters use. A waiter reads the sequence while it holds the mutex, unlocks, and waits on the
//! word for that value (with [`NORMAL_MASK`]); any notify after the read either changes the
//! value first (the wait returns at once) or finds the waiter queued. `notify_all` wakes the
//! oldest waiter and requeues the rest onto the mutex word: the woken one relocks as a woken
//! thread, setting the mutex's `PARKED` bit (the baton rule in `raw_mutex.rs`), so each unlock
//! releases the next requeued waiter instead of all of them racing for the lock at once. The
//! mutex byte and the sequence word differ in size: the core's requeue works across sizes.
//!
//! # The mutex slot
//!
//! `mutex` moves one way: `0` (no waiter yet) → the address of the first waiter's mutex →
//! [`MIXED`] (a waiter came with another mutex; `notify_all` then wakes everyone instead of
//! requeueing). Every change is followed by an increment of the sequence (Release), and
//! `notify_all` increments it (Acquire) before reading the slot; so `notify_all` either sees
//! the change or its requeue, which compares the sequence it stored, fails and falls back to
//! waking everyone. A waiter is therefore never requeued onto a mutex it does not use.

use super::raw_mutex::RawMutex;
use super::NORMAL_MASK;
use crate::deadline::{Deadline, Timeout};
#[cfg(not(ufutex_loom))]
use crate::domain::default_domain;
use crate::domain::Domain;
use crate::error::WaitError;
use crate::membarrier::Pays;
use crate::primitive::{AtomicU32, AtomicUsize, Ordering};
use crate::requeue::requeue_words;
use crate::wait::wait_word;
use crate::wake::wake_word;
use crate::word::{word_of, Size, WordRef};
use crate::MATCH_ANY;

/// The slot value once two different mutexes were seen.
const MIXED: usize = usize::MAX;

/// A condition variable whose `notify_all` requeues waiters onto the mutex.
///
/// Waits may wake spuriously: always wait in a loop that checks the condition. A condvar is
/// meant to be used with one mutex; using it with several works, but from then on `notify_all`
/// wakes every waiter at once instead of requeueing them.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use ufutex::sync::{Condvar, Mutex};
///
/// let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
/// let waiters: Vec<_> = (0..3)
///     .map(|_| {
///         let p = pair.clone();
///         std::thread::spawn(move || {
///             let (m, cv) = &*p;
///             let mut g = m.lock();
///             while *g == 0 {
///                 cv.wait(&mut g);
///             }
///         })
///     })
///     .collect();
/// *pair.0.lock() = 1;
/// pair.1.notify_all();
/// for w in waiters {
///     w.join().unwrap();
/// }
/// let mut g = pair.0.lock();
/// assert!(pair.1.wait_for(&mut g, Duration::from_millis(1)).timed_out());
/// ```
#[repr(C)]
pub struct Condvar {
    seq: AtomicU32,
    mutex: AtomicUsize,
}

/// Whether a timed condvar wait returned because its deadline passed.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use ufutex::sync::{Condvar, Mutex};
/// let (m, cv) = (Mutex::new(()), Condvar::new());
/// let r = cv.wait_for(&mut m.lock(), Duration::from_millis(1));
/// assert!(r.timed_out());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// `true` if the wait ended by its deadline (the condition may still have become true);
    /// `false` if it was notified, or woke spuriously.
    ///
    /// # Examples
    /// ```
    /// use std::time::{Duration, Instant};
    /// use ufutex::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(false), Condvar::new());
    /// let mut g = m.lock();
    /// let deadline = Instant::now() + Duration::from_millis(1);
    /// while !*g {
    ///     if cv.wait_until(&mut g, deadline).timed_out() {
    ///         break; // still false: nobody set it
    ///     }
    /// }
    /// assert!(!*g);
    /// ```
    pub fn timed_out(self) -> bool {
        self.0
    }
}

impl std::fmt::Debug for Condvar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condvar").field("seq", &self.seq.load(Ordering::Relaxed)).finish()
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl Condvar {
    /// A condvar with no waiters (`const`: usable in a `static`). It is not tied to a mutex
    /// until its first wait.
    ///
    /// # Examples
    /// ```
    /// use ufutex::sync::{Condvar, Mutex};
    /// static READY: Mutex<bool> = Mutex::new(false);
    /// static CV: Condvar = Condvar::new();
    /// *READY.lock() = true;
    /// assert!(!CV.notify_one()); // nobody was waiting
    /// ```
    #[cfg(not(ufutex_loom))]
    pub const fn new() -> Condvar {
        Condvar { seq: AtomicU32::new(0), mutex: AtomicUsize::new(0) }
    }

    /// A condvar with no waiters.
    #[cfg(ufutex_loom)]
    pub fn new() -> Condvar {
        Condvar { seq: AtomicU32::new(0), mutex: AtomicUsize::new(0) }
    }

    fn seq_word(&self) -> WordRef {
        word_of(&self.seq)
    }

    /// Record `m` as the waiters' mutex (module docs: the mutex slot).
    fn register(&self, m: &RawMutex) {
        let me = m as *const RawMutex as usize;
        let mut cur = self.mutex.load(Ordering::Relaxed);
        loop {
            if cur == me || cur == MIXED {
                return;
            }
            let new = if cur == 0 { me } else { MIXED };
            // Relaxed: the sequence increment below publishes the change.
            match self.mutex.compare_exchange(cur, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    // Release: a later notify_all's Acquire increment sees the slot change.
                    self.seq.fetch_add(1, Ordering::Release);
                    return;
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Unlock `m` (held by the caller), wait for a notify or `deadline`, relock `m`. Returns
    /// `true` if the deadline passed. The core of every wait, with the domain explicit.
    #[doc(hidden)]
    pub fn wait_in(&self, domain: &Domain, m: &RawMutex, deadline: Option<Deadline>) -> bool {
        self.wait_timeout_in(domain, m, deadline.map(Timeout::from))
    }

    /// [`Condvar::wait_in`] with the core's timeout type (the C ABI's absolute timespec).
    pub(crate) fn wait_timeout_in(&self, domain: &Domain, m: &RawMutex, timeout: Option<Timeout>) -> bool {
        self.register(m);
        // Relaxed: read under the mutex; a notifier that changed the condition under it
        // increments after our unlock, so the wait below sees a different value or is woken.
        let seq = self.seq.load(Ordering::Relaxed);
        m.unlock_in(domain);
        let r = wait_word(domain.tables(), self.seq_word(), u64::from(seq), NORMAL_MASK, timeout, Pays::Waker);
        m.relock_woken_in(domain);
        r == Err(WaitError::TimedOut)
    }

    /// Wake one waiter, if any; returns whether one was woken.
    #[doc(hidden)]
    pub fn notify_one_in(&self, domain: &Domain) -> bool {
        // Relaxed: the wake's (B) fence orders this store before its look at the queue.
        self.seq.fetch_add(1, Ordering::Relaxed);
        wake_word(domain.tables(), self.seq_word(), 1, MATCH_ANY, Pays::Waker) > 0
    }

    /// Wake one waiter and requeue the others onto the mutex; returns woken + requeued.
    #[doc(hidden)]
    pub fn notify_all_in(&self, domain: &Domain) -> usize {
        // Acquire: sees every slot change whose increment precedes ours (module docs).
        let seq = self.seq.fetch_add(1, Ordering::Acquire).wrapping_add(1);
        let m = self.mutex.load(Ordering::Relaxed);
        if m == 0 || m == MIXED {
            return wake_word(domain.tables(), self.seq_word(), usize::MAX, MATCH_ANY, Pays::Waker);
        }
        // SAFETY:
        // - `m` is the address of a `RawMutex`, `#[repr(C)]` with its state `AtomicU8` first:
        //   the address of that byte, aligned for a one-byte word;
        // - every waiter queued on the sequence registered this mutex and keeps it alive until
        //   it relocks it; with no waiter queued the requeue moves nobody, and the core uses the
        //   target's address only as a key — it never loads the target word.
        let to = unsafe { WordRef::from_raw(m, Size::U8) };
        match requeue_words(domain.tables(), self.seq_word(), u64::from(seq), to, 1, usize::MAX, Pays::Waker) {
            Ok(n) => n,
            // The sequence moved on (a registration or another notify): wake everyone.
            Err(_) => wake_word(domain.tables(), self.seq_word(), usize::MAX, MATCH_ANY, Pays::Waker),
        }
    }
}

#[cfg(not(ufutex_loom))]
impl Condvar {
    /// The raw mutex under a guard.
    fn raw<'a, T: ?Sized>(guard: &'a super::MutexGuard<'_, T>) -> &'a RawMutex {
        // SAFETY:
        // - `raw` is unsafe because it allows unlocking under a live guard; we unlock and
        //   relock before returning, so the guard is valid again whenever the caller sees it.
        unsafe { lock_api::MutexGuard::mutex(guard).raw() }
    }

    /// Unlock the guard's mutex, wait for a notify, relock.
    ///
    /// # Examples
    /// See [`Condvar`].
    pub fn wait<T: ?Sized>(&self, guard: &mut super::MutexGuard<'_, T>) {
        self.wait_in(default_domain(), Self::raw(guard), None);
    }

    /// As [`Condvar::wait`], giving up at `deadline` (on the monotonic clock). The mutex is
    /// locked again on return, whatever the result; a deadline already past still unlocks and
    /// relocks it.
    ///
    /// # Examples
    /// ```
    /// use std::time::Instant;
    /// use ufutex::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(0), Condvar::new());
    /// let mut g = m.lock();
    /// assert!(cv.wait_until(&mut g, Instant::now()).timed_out());
    /// *g += 1; // still held
    /// ```
    pub fn wait_until<T: ?Sized>(
        &self,
        guard: &mut super::MutexGuard<'_, T>,
        deadline: std::time::Instant,
    ) -> WaitTimeoutResult {
        WaitTimeoutResult(self.wait_in(default_domain(), Self::raw(guard), Some(Deadline::Monotonic(deadline))))
    }

    /// As [`Condvar::wait`], giving up after `timeout`. The mutex is locked again on return,
    /// whatever the result.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ufutex::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(false), Condvar::new());
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         *m.lock() = true;
    ///         cv.notify_one();
    ///     });
    ///     let mut g = m.lock();
    ///     while !*g {
    ///         cv.wait_for(&mut g, Duration::from_secs(10));
    ///     }
    /// });
    /// ```
    pub fn wait_for<T: ?Sized>(
        &self,
        guard: &mut super::MutexGuard<'_, T>,
        timeout: std::time::Duration,
    ) -> WaitTimeoutResult {
        WaitTimeoutResult(self.wait_in(default_domain(), Self::raw(guard), Some(Deadline::from(timeout))))
    }

    /// Wake one waiting thread, the oldest; returns whether there was one. A notify with no
    /// waiter is not remembered.
    ///
    /// # Examples
    /// ```
    /// use ufutex::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(0u32), Condvar::new());
    /// assert!(!cv.notify_one());
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         let mut g = m.lock();
    ///         while *g == 0 {
    ///             cv.wait(&mut g);
    ///         }
    ///     });
    ///     *m.lock() = 1;
    ///     cv.notify_one();
    /// });
    /// ```
    pub fn notify_one(&self) -> bool {
        self.notify_one_in(default_domain())
    }

    /// Wake all waiting threads: one now, the others one per unlock of the mutex (they are
    /// requeued onto it). Returns how many were woken or requeued.
    ///
    /// # Examples
    /// ```
    /// use ufutex::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(false), Condvar::new());
    /// assert_eq!(cv.notify_all(), 0);
    /// std::thread::scope(|s| {
    ///     for _ in 0..3 {
    ///         s.spawn(|| {
    ///             let mut g = m.lock();
    ///             while !*g {
    ///                 cv.wait(&mut g);
    ///             }
    ///         });
    ///     }
    ///     *m.lock() = true;
    ///     cv.notify_all();
    /// });
    /// ```
    pub fn notify_all(&self) -> usize {
        self.notify_all_in(default_domain())
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use crate::sync::raw_mutex::{HANDOFF, LOCKED, PARKED};
    use crate::DomainConfig;
    use std::sync::Arc;

    fn settle(d: &Domain, n: usize) {
        while d.queued_waiters() != n {
            std::thread::yield_now();
        }
    }

    /// notify_all with the mutex held: one waiter woken, the rest moved onto the mutex word,
    /// whose PARKED bit the woken one sets; each unlock then releases the next.
    #[test]
    fn notify_all_moves_waiters_onto_the_mutex() {
        const N: usize = 4;
        let d = Arc::new(Domain::new(DomainConfig::new()).unwrap());
        let s = Arc::new((RawMutex::new(), Condvar::new()));
        let hs: Vec<_> = (0..N)
            .map(|_| {
                let (d, s) = (d.clone(), s.clone());
                std::thread::spawn(move || {
                    let (m, cv) = &*s;
                    m.lock_in(&d);
                    cv.wait_in(&d, m, None);
                    m.unlock_in(&d);
                })
            })
            .collect();
        let (m, cv) = &*s;
        settle(&d, N); // all on the condvar word
        m.lock_in(&d);
        assert_eq!(cv.notify_all_in(&d), N, "one woken + N-1 requeued");
        // The woken one parks on the held mutex next to the requeued ones, with PARKED — or,
        // if a spurious return made it look again once the starvation threshold (1 ms, counted
        // from its first look, after its spin) had passed, it asks for a handoff instead;
        // either way the unlock reaches it.
        settle(&d, N);
        let st = m.state();
        assert!(st == LOCKED | PARKED || st & (LOCKED | HANDOFF) == LOCKED | HANDOFF, "state {st:#b}");
        m.unlock_in(&d);
        for h in hs {
            h.join().unwrap();
        }
        // Free; PARKED may be left as a stale hint by a late (5b) (raw_mutex.rs).
        assert_eq!(m.state() & !PARKED, 0);
        assert_eq!(d.queued_waiters(), 0);
    }
}
