//! The free functions: the futex2 operations on the process default domain
//! ([`crate::Domain::default_domain`]), which sizes itself to the threads that wait. Each is
//! that domain's method of the same name.

use crate::deadline::Deadline;
use crate::domain::default_domain;
use crate::error::WaitError;
use crate::waitv::WaitEntry;
use crate::word::Futex;

/// Sleep while `*f == expected`, until a [`crate::wake`] or [`crate::requeue`] on the same
/// address dequeues this thread, or `deadline` passes.
///
/// The comparison is made at the word's width, atomically with queueing: a waker that stores a
/// new value and then calls `wake` cannot miss this waiter. Waiters on one address are woken
/// oldest first. A successful return is never spurious: it means a waker dequeued this thread.
/// A wake racing the deadline either wins (the wait returns `Ok`) or does not count this waiter.
///
/// # Errors
/// - [`WaitError::WouldBlock`]: `*f != expected` when checked;
/// - [`WaitError::TimedOut`]: the deadline passed first (a deadline already in the past times
///   out at once, after the value check);
/// - [`WaitError::Interrupted`]: a signal handler installed without `SA_RESTART` ran (with
///   `SA_RESTART` the wait goes on with the same deadline).
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// let flag = Arc::new(AtomicU32::new(0));
/// let f2 = flag.clone();
/// let t = std::thread::spawn(move || {
///     while f2.load(Ordering::Acquire) == 0 {
///         let _ = ufutex::wait(&*f2, 0, None);
///     }
/// });
/// flag.store(1, Ordering::Release);
/// ufutex::wake(&*flag, 1);
/// t.join().unwrap();
/// ```
pub fn wait<F: Futex>(f: &F, expected: F::Value, deadline: Option<Deadline>) -> Result<(), WaitError> {
    default_domain().wait(f, expected, deadline)
}

/// [`wait`], woken only by wakes whose mask shares a bit with `mask` (a mask of 0 matches no
/// wake: such a wait ends only by timeout or signal).
///
/// # Errors
/// As [`wait`].
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU64;
/// let w = AtomicU64::new(7);
/// assert_eq!(ufutex::wait_bitset(&w, 8, 0b10, None), Err(ufutex::WaitError::WouldBlock));
/// ```
pub fn wait_bitset<F: Futex>(
    f: &F,
    expected: F::Value,
    mask: u64,
    deadline: Option<Deadline>,
) -> Result<(), WaitError> {
    default_domain().wait_bitset(f, expected, mask, deadline)
}

/// Wake up to `n` threads waiting on `f`, oldest first; returns how many were woken.
///
/// Store the new value *before* calling: a waiter that checked the old value is then either
/// woken here or sees the new value and does not sleep. With no waiters this makes no syscall
/// and writes nothing. `n == 0` wakes nobody and returns 0; `usize::MAX` wakes all.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU8, Ordering};
/// let w = AtomicU8::new(0);
/// w.store(1, Ordering::Release);
/// assert_eq!(ufutex::wake(&w, usize::MAX), 0); // nobody was waiting
/// ```
pub fn wake<F: Futex>(f: &F, n: usize) -> usize {
    default_domain().wake(f, n)
}

/// [`wake`], counting and waking only waiters whose mask shares a bit with `mask`.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU16;
/// let w = AtomicU16::new(0);
/// assert_eq!(ufutex::wake_bitset(&w, 1, 0b1), 0);
/// ```
pub fn wake_bitset<F: Futex>(f: &F, n: usize, mask: u64) -> usize {
    default_domain().wake_bitset(f, n, mask)
}

/// Sleep until a waker dequeues this thread from any of `entries`, or `deadline` passes.
///
/// Entries are queued in index order, each compared atomically with its queueing. Returns the
/// index of a woken entry — the highest among those a waker dequeued; which of several racing
/// wakes that is, is not promised. Duplicate entries are allowed: each is its own waiter, and a
/// wake that dequeues two of them counts two.
///
/// # Errors
/// - [`WaitError::WouldBlock`]: some entry's word did not hold its value — unless an earlier
///   entry was already woken in that window, in which case its index is returned;
/// - [`WaitError::TimedOut`], [`WaitError::Interrupted`]: as for [`crate::wait`].
///
/// # Panics
/// If `entries` is empty or longer than [`WAITV_MAX`](crate::WAITV_MAX). If memory for the
/// waiters (a node per entry, kept by the thread for its next waitv) cannot be had, the process
/// aborts, as a `Vec` that cannot grow does; the C ABI's `ufutex_waitv` answers `ENOMEM`.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU16, AtomicU64};
/// use ufutex::{waitv, WaitEntry, WaitError};
/// let (a, b) = (AtomicU16::new(1), AtomicU64::new(2));
/// let entries = [WaitEntry::new(&a, 1), WaitEntry::new(&b, 3)];
/// assert_eq!(waitv(&entries, None), Err(WaitError::WouldBlock)); // b holds 2, not 3
/// ```
pub fn waitv(entries: &[WaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, WaitError> {
    default_domain().waitv(entries, deadline)
}

/// If `*from == expected`, wake up to `nr_wake` waiters of `from` (oldest first, any mask) and
/// move up to `nr_requeue` more to wait on `to`, behind `to`'s existing waiters (when `to` is
/// `from`, they are counted and stay in their places, as with the kernel's requeue). Returns
/// woken + moved. The comparison is made with both queues locked, so it is atomic with the
/// moves.
///
/// A moved waiter keeps its mask and deadline; it is later woken through `to`.
///
/// # Errors
/// [`WaitError::WouldBlock`] if `*from != expected`.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// let (from, to) = (AtomicU32::new(5), AtomicU32::new(0));
/// assert_eq!(ufutex::requeue(&from, 5, &to, 1, usize::MAX), Ok(0));
/// assert_eq!(ufutex::requeue(&from, 4, &to, 1, 1), Err(ufutex::WaitError::WouldBlock));
/// ```
pub fn requeue<F: Futex>(
    from: &F,
    expected: F::Value,
    to: &F,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, WaitError> {
    default_domain().requeue(from, expected, to, nr_wake, nr_requeue)
}
