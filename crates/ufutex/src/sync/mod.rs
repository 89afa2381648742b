//! A handoff mutex and a requeueing condition variable built on the ufutex operations.
//!
//! - [`RawMutex`]: two bytes. An uncontended lock is one atomic, its unlock a plain store
//!   while no thread is registered to park on it (one atomic while one is); neither enters a
//!   bucket; a contended lock spins a little, then parks with [`crate::wait_bitset`] on the
//!   lock byte itself (8-bit futex words are a ufutex feature); unlock wakes one waiter only
//!   when one is parked. A waiter that has been passed over for too long asks for a *handoff*:
//!   the next unlock gives it the lock directly instead of releasing it, which bounds
//!   unfairness while keeping the throughput of a barging lock the rest of the time.
//! - [`Condvar`]: a 32-bit sequence word; `notify_all` wakes one waiter and *requeues* the
//!   others onto the mutex's word, where each unlock releases the next — no thundering herd.
//!
//! [`Mutex`] and [`MutexGuard`] are the `lock_api` types over [`RawMutex`].
//!
//! # Examples
//! ```
//! use std::sync::Arc;
//! use ufutex::sync::{Condvar, Mutex};
//!
//! let pair = Arc::new((Mutex::new(false), Condvar::new()));
//! let p2 = pair.clone();
//! let t = std::thread::spawn(move || {
//!     let (lock, cv) = &*p2;
//!     *lock.lock() = true;
//!     cv.notify_one();
//! });
//! let (lock, cv) = &*pair;
//! let mut ready = lock.lock();
//! while !*ready {
//!     cv.wait(&mut ready);
//! }
//! t.join().unwrap();
//! ```

mod condvar;
pub(crate) mod raw_mutex;
mod spin;
mod starvation;

pub use condvar::{Condvar, WaitTimeoutResult};
pub use raw_mutex::RawMutex;
#[doc(hidden)]
#[cfg(not(ufutex_loom))]
pub use spin::{set_spin_policy, SpinPolicy};
#[doc(hidden)]
pub use starvation::{set_starvation_policy, Starvation};

/// A mutual-exclusion lock over a `T`, on a two-byte [`RawMutex`].
///
/// Not fair, but bounded: a waiter that has tried for about 1 ms is handed the lock at the
/// next unlock. Not poisoned by a panic; not reentrant (locking twice on one thread deadlocks).
///
/// # Examples
/// ```
/// use ufutex::sync::Mutex;
/// let counter = Mutex::new(0u32);
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| *counter.lock() += 1);
///     }
/// });
/// let g = counter.lock();
/// assert!(counter.try_lock().is_none());
/// drop(g);
/// assert_eq!(counter.into_inner(), 4);
/// ```
#[cfg(not(ufutex_loom))]
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;

/// The RAII guard of a [`Mutex`]; unlocks when dropped. It is `Send` when `T` is: the lock is
/// not tied to the thread that took it.
///
/// # Examples
/// ```
/// use ufutex::sync::{Mutex, MutexGuard};
/// fn push(mut g: MutexGuard<'_, Vec<u8>>, v: u8) {
///     g.push(v);
/// } // unlocked here
/// let m = Mutex::new(Vec::new());
/// push(m.lock(), 1);
/// push(m.lock(), 2);
/// assert_eq!(*m.lock(), [1, 2]);
/// ```
#[cfg(not(ufutex_loom))]
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;

/// Wait mask of threads parked on a mutex word for an ordinary wakeup (including condvar
/// waiters, which keep their mask when requeued onto the mutex).
pub(crate) const NORMAL_MASK: u64 = 0b01;
/// Wait mask of the one waiter that asked for a handoff; only a granting unlock wakes it.
pub(crate) const HANDOFF_MASK: u64 = 0b10;
