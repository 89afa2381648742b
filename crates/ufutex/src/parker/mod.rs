//! How one thread sleeps and is woken.
//!
//! A parker counts the unparks of the current *episode* (one wait, or one waitv). A waiter
//! parks until the count reaches what it needs; a waker that dequeued one of the thread's
//! nodes calls [`UnparkHandle::unpark`] once, after unlocking the bucket. The waiter ends the
//! episode with [`Parker::reset`] only once every waker that dequeued one of its nodes has
//! unparked it, so a late unpark can never leak into the next episode. After its increment an
//! unpark touches no memory of the parker (at most it passes the address to `futex_wake`), so
//! the thread may return, and even exit, as soon as it sees the count.
//!
//! One backend is compiled in: the Linux futex (default), a Mutex + Condvar fallback
//! (feature `fallback-parker`, also run by the test suite), or a loom model.

#[cfg(all(target_os = "linux", not(ufutex_loom)))]
pub(crate) mod futex;

#[cfg(ufutex_loom)]
mod loom_model;
#[cfg(ufutex_loom)]
pub(crate) use loom_model::{Parker, UnparkHandle};

#[cfg(all(not(ufutex_loom), any(feature = "fallback-parker", not(target_os = "linux"))))]
mod fallback;
#[cfg(all(not(ufutex_loom), any(feature = "fallback-parker", not(target_os = "linux"))))]
pub(crate) use fallback::{Parker, UnparkHandle};

#[cfg(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"))]
mod linux;
#[cfg(all(not(ufutex_loom), not(feature = "fallback-parker"), target_os = "linux"))]
pub(crate) use linux::{Parker, UnparkHandle};

/// How a park ended without reaching its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParkTimeout {
    TimedOut,
    /// Only the Linux parker sees signals.
    #[cfg_attr(any(feature = "fallback-parker", ufutex_loom), allow(dead_code))]
    Interrupted,
}

impl From<ParkTimeout> for crate::WaitError {
    fn from(p: ParkTimeout) -> Self {
        match p {
            ParkTimeout::TimedOut => crate::WaitError::TimedOut,
            ParkTimeout::Interrupted => crate::WaitError::Interrupted,
        }
    }
}
