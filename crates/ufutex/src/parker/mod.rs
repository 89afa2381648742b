//! How one thread sleeps and is woken.
//!
//! A parker counts the unparks of the current *episode* (one wait, or one waitv). A waiter
//! parks until the count reaches what it needs; a waker that dequeued one of the thread's
//! nodes unparks it once (its `UnparkHandle`), after unlocking the bucket. The waiter ends the
//! episode with [`Parker::reset`] only once every waker that dequeued one of its nodes has
//! unparked it, so a late unpark can never leak into the next episode. After its increment an
//! unpark touches no memory of the parker (at most it passes the address to `futex_wake`), so
//! the thread may return, and even exit, as soon as it sees the count.
//!
//! One backend is compiled in: the Linux futex (default), a Mutex + Condvar fallback
//! (feature `fallback-parker`, also run by the test suite), or a loom model.

#[cfg(all(target_os = "linux", not(ufutex_loom)))]
pub(crate) mod futex;

// The one choice of backend: loom's model under loom, else the Linux futex parker, or the
// portable one with the `fallback-parker` feature or off Linux.
#[cfg_attr(ufutex_loom, path = "loom_model.rs")]
#[cfg_attr(all(not(ufutex_loom), any(feature = "fallback-parker", not(target_os = "linux"))), path = "fallback.rs")]
#[cfg_attr(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"), path = "linux.rs")]
mod backend;
pub(crate) use backend::{Parker, UnparkHandle, WakeBatch};

// Under loom's unit tests, the Linux parker also runs on a model of the kernel futex.
#[cfg(all(ufutex_loom, test))]
pub(crate) mod kernel_model;
#[cfg(all(ufutex_loom, test))]
pub(crate) use kernel_model as futex;
#[cfg(all(ufutex_loom, test))]
mod linux;

/// What every backend's `Parker` does: one per thread, counting the unparks of an episode.
pub(crate) trait Park {
    /// What a waker takes under the bucket lock and uses after unlocking it.
    type Handle;
    fn new() -> Self;
    /// Spin a while (the backend's policy) for `need` unparks of this episode; whether they
    /// arrived.
    fn spin(&self, need: u32) -> bool;
    /// Spin the same while for `done`, before a waiter queues (see `wait.rs`); whether it came.
    fn spin_for(&self, done: impl Fn() -> bool) -> bool;
    /// Sleep until `need` unparks of this episode have arrived, or `timeout` passes, or (Linux)
    /// a signal handler runs. `bell`: the bell of the bucket the thread's one node was queued
    /// in, which a backend may sleep on too, or go by to choose where the thread sleeps (see
    /// [`Bell`]).
    /// `watch`: words the kernel may wake directly, slept on too where the backend can (Linux
    /// with `futex_waitv`; past [`MAX_WATCH`], one fewer with a `bell`, looked at between
    /// slices of [`BLIND_SLICE`]); a wake or change of `watch[i]` ends the park with
    /// [`ParkTimeout::Watched`]`(i)`.
    fn sleep(
        &self,
        need: u32,
        timeout: Option<&Timeout>,
        bell: Option<&Bell>,
        watch: &[Watch<'_>],
    ) -> Result<(), ParkTimeout>;
    /// End the episode; only once every unpark owed to it has arrived.
    fn reset(&self);
    fn handle(&self) -> Self::Handle;
    /// A waker took this thread's node and will unpark it soon: start fetching what the unpark
    /// writes (a hint, nothing else), so that a waker of many overlaps those misses instead of
    /// taking them one after another.
    fn expect_unpark(&self) {}

    /// Wait until `need` unparks of this episode have arrived: spin (if `spin`), then sleep
    /// (see [`Park::sleep`] for the other arguments).
    fn park(
        &self,
        need: u32,
        timeout: Option<&Timeout>,
        bell: Option<&Bell>,
        watch: &[Watch<'_>],
        spin: bool,
    ) -> Result<(), ParkTimeout> {
        if spin && self.spin(need) {
            return Ok(());
        }
        self.sleep(need, timeout, bell, watch)
    }
}

/// A futex word that the kernel itself may wake (the preload library's waits: a thread-exit
/// wake, or a wake made with a raw system call that bypasses the library), watched while the
/// thread sleeps: the thread also sleeps in the kernel on it, expecting `val`.
#[derive(Clone, Copy)]
#[cfg_attr(any(feature = "fallback-parker", ufutex_loom), allow(dead_code))] // only the Linux parker watches
pub(crate) struct Watch<'a> {
    pub(crate) word: &'a crate::primitive::AtomicU32,
    pub(crate) val: u32,
    /// The word is in memory shared between processes (woken with the kernel's shared futex):
    /// a process-shared waiter's park word.
    pub(crate) shared: bool,
}

/// The most words one park without a bell watches: `futex_waitv` takes 128, and the parker
/// sleeps on its own word besides (and on a bell, when it has one, in place of one more).
#[cfg_attr(any(feature = "fallback-parker", ufutex_loom), allow(dead_code))]
pub(crate) const MAX_WATCH: usize = 127;

/// The slices in which a thread sleeps that watches words it cannot sleep on (past
/// [`MAX_WATCH`], or without `futex_waitv`), looking at their values between them.
#[cfg_attr(any(feature = "fallback-parker", ufutex_loom), allow(dead_code))]
pub(crate) const BLIND_SLICE: std::time::Duration = std::time::Duration::from_millis(1);

/// Whether this backend can sleep on a [`Watch`] word (else a waiter that needs one sleeps in
/// short slices and looks).
#[cfg_attr(ufutex_loom, allow(dead_code))] // the process-shared waitv only
pub(crate) fn can_watch() -> bool {
    #[cfg(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"))]
    return futex::has_waitv();
    #[cfg(not(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux")))]
    false
}

/// In a forked child (`fork.rs`): the slots the parent's sleeping threads held are free
/// (the Linux parker's ring words; other backends keep nothing process-wide).
#[cfg_attr(ufutex_loom, allow(dead_code))]
pub(crate) fn forget_sleepers() {
    #[cfg(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"))]
    backend::forget_slots();
}

/// A handle that unparks its thread by itself (backends without a bell).
#[cfg_attr(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"), allow(dead_code))]
pub(crate) trait Unpark {
    fn unpark(self);
}

use crate::deadline::Timeout;

/// A bucket's *bell*: one kernel futex word that a thread parked from that bucket without a
/// ring slot (`linux.rs`: all taken) also sleeps on (with `futex_waitv`, next to its own
/// word), so that a waker waking many of them enters the kernel once — the kernel then wakes
/// them all in one call, as it does for threads that share a futex word — instead of once per
/// thread. Its address also tells such a thread which ring word to look for a slot on first.
///
/// Only the Linux parker rings it; a ring is a hint on top of the per-thread words, never the
/// only way a wake arrives (see `linux.rs`). Lives in the bucket, so it stays at one address
/// for as long as the domain lives (tables are never freed while it does).
pub(crate) struct Bell {
    #[cfg_attr(any(ufutex_loom, feature = "fallback-parker", not(target_os = "linux")), allow(dead_code))]
    seq: crate::primitive::AtomicU32,
    /// Nodes first queued in this bucket (their *home*) that are still queued, wherever a
    /// requeue or resize has moved them since: the threads that may be asleep on this bell.
    /// A hint, never relied on for correctness (a std atomic even under loom, which therefore
    /// does not explore it): a waker rings only when its own nodes are at least as many as the
    /// ones left.
    homed: std::sync::atomic::AtomicU32,
}

impl Bell {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> Bell {
            Bell { seq: crate::primitive::AtomicU32::new(0), homed: std::sync::atomic::AtomicU32::new(0) }
        }
    }

    /// In a forked child (`fork.rs`): none of the parent's nodes is queued.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn forget(&self) {
        // Relaxed: a hint (see the field), and the child has one thread. Written only if not 0,
        // as `primitive::reset_in_child` writes (which takes the crate's atomic type; this one
        // is std's even under loom).
        if self.homed() != 0 {
            self.homed.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A node made this bucket its home (`Idle → Queued` here).
    pub(crate) fn homed_arrived(&self) {
        // Relaxed: a hint (see the field).
        self.homed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A node of this home left its queue (woken or cancelled), wherever it was.
    pub(crate) fn homed_left(&self) {
        // Relaxed: a hint (see the field).
        self.homed.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many nodes of this home are queued. At 0, a ring wakes nobody it should not (bar
    /// threads queueing right now, which only see a spurious wakeup).
    pub(crate) fn homed(&self) -> u32 {
        // Relaxed: a hint (see the field).
        self.homed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a waker that took `taken` nodes of this home should ring: at least two, and no
    /// more nodes of the home left queued than it took. A ring wakes every thread asleep on
    /// the bell; those still queued find their count short and sleep again. So a ring costs at
    /// most one spurious wakeup per thread it wakes on purpose, and saves the waker one kernel
    /// entry per thread — and, worse than the entry, the switch to each woken thread that the
    /// scheduler makes right after every single wake (it places a woken thread on the waker's
    /// CPU and lets it run first), which one ring for all of them makes once.
    pub(crate) fn worth_ringing(&self, taken: usize) -> bool {
        worth_ringing(taken, self.homed() as usize)
    }
}

/// Whether a waker that took `taken` of the threads asleep on a bell should ring it, with
/// `left` others that may sleep there too: at least two, and no more left than taken (so a
/// ring costs at most one spurious wakeup per thread woken on purpose). The rule of both
/// tables' bells ([`Bell::worth_ringing`], the shared table's `shared::park::Ring`).
pub(crate) fn worth_ringing(taken: usize, left: usize) -> bool {
    taken >= 2 && left <= taken
}

/// The unparks of one waker for a backend without a bell: each thread at once.
#[cfg_attr(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"), allow(dead_code))]
pub(crate) struct Direct<H>(std::marker::PhantomData<H>);

#[cfg_attr(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"), allow(dead_code))]
impl<H: Unpark> Direct<H> {
    pub(crate) fn new() -> Direct<H> {
        Direct(std::marker::PhantomData)
    }

    pub(crate) fn may_ring(&mut self, _bell: &Bell) {}

    pub(crate) fn unpark(&mut self, handle: H, _home: *const Bell) {
        handle.unpark();
    }

    pub(crate) fn finish(self) {}
}

/// How a kernel wait ended.
#[cfg(any(all(target_os = "linux", not(ufutex_loom)), all(ufutex_loom, test)))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelWait {
    /// Woken, or a value had already changed, or a spurious return: re-check and retry.
    Retry,
    TimedOut,
    #[cfg_attr(ufutex_loom, allow(dead_code))] // the kernel model has no signals
    Interrupted,
}

/// How a park ended without reaching its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParkTimeout {
    TimedOut,
    /// Only the Linux parker sees signals.
    #[cfg_attr(any(feature = "fallback-parker", ufutex_loom), allow(dead_code))]
    Interrupted,
    /// The watched word of this index was woken or changed (Linux parker only).
    #[cfg_attr(any(feature = "fallback-parker", ufutex_loom), allow(dead_code))]
    Watched(usize),
}

impl From<ParkTimeout> for crate::WaitError {
    fn from(p: ParkTimeout) -> Self {
        match p {
            ParkTimeout::TimedOut => crate::WaitError::TimedOut,
            ParkTimeout::Interrupted => crate::WaitError::Interrupted,
            // Callers that watch a word handle this before converting (a legacy futex wait
            // may return 0 spuriously); anywhere else it is as good as a spurious wakeup.
            ParkTimeout::Watched(_) => crate::WaitError::Interrupted,
        }
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::Bell;

    /// A bell with `left` nodes of its home still queued.
    fn with_left(left: u32) -> Bell {
        let bell = Bell::new();
        (0..left).for_each(|_| bell.homed_arrived());
        bell
    }

    #[test]
    fn a_waker_rings_when_it_took_at_least_as_many_as_are_left() {
        // A wake of one never rings: its own futex wake is as cheap and wakes nobody else.
        assert!(!with_left(0).worth_ringing(1));
        assert!(!with_left(3).worth_ringing(2), "2 taken, 3 left");
        assert!(with_left(3).worth_ringing(3), "3 taken, 3 left");
        assert!(with_left(0).worth_ringing(2), "the last ones");
        let bell = with_left(1);
        bell.homed_left();
        assert_eq!(bell.homed(), 0);
    }
}
