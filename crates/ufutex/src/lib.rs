//! # ufutex — futex2 in userspace
//!
//! Address-keyed wait/wake on 8, 16, 32 and 64-bit atomic words, with the semantics of Linux's
//! futex2 system calls (`futex_wait`, `futex_wake`, `futex_waitv`, `futex_requeue`) but over
//! hashed wait-queue tables that live in this process. The common paths never enter the
//! kernel: a wake with no waiters and a wait whose value already differs cost a few loads.
//!
//! The model:
//! - a thread calls [`wait`] with the value it last saw; if the word still holds it (checked
//!   atomically with queueing), the thread sleeps until a [`wake`] or [`requeue`] on the same
//!   address dequeues it, or its [`Deadline`] passes;
//! - a waker changes the word *first*, then calls [`wake`]; no wakeup is ever lost;
//! - a successful return from a wait always means a waker dequeued the waiter — never spurious.
//!
//! The free functions use the process default [`Domain`], which sizes itself to the number of
//! threads that wait; a [`Domain`] of your own gives a private table with its own policy.
//!
//! ## Signal handlers
//! A signal handler may wake (a semaphore's post) whatever its thread was doing in this
//! library. A wake, requeue or wake-op that interrupts its thread inside a bucket's critical
//! section cannot take that lock: it is deferred, returns 0, and its waiters are woken by the
//! thread when it leaves the critical section, before the interrupted call returns (a deferred
//! requeue wakes the waiters it would have moved). A wait called from a handler that
//! interrupted its thread inside a wait or a critical section returns
//! [`WaitError::Interrupted`] without queueing. The same holds while the thread sets up the
//! process's use of the shared table (its first process-shared call), which a handler cannot
//! wait for. A thread's first wait allocates nothing (its waiter state is in static TLS), so a
//! handler may make it even where it interrupted `malloc`; what still allocates (the process's
//! first wait, a wait that grows process-wide state, a waitv longer than its thread's before,
//! a NUMA call that interrupts its thread's first NUMA call of the process) is listed in
//! `include/ufutex.h`, "Signals". No call may be left by `longjmp`.
//!
//! ## Fork
//! A child made by `fork` starts with none of the parent's waiters, as with the kernel's
//! private futexes: handlers installed with `pthread_atfork` at the process's first wait keep
//! resizes out of the fork and, in the child, empty every queue and free every lock. A wake in
//! the child therefore reaches the child's own waiters only, and counts them only; the parent's
//! waiters are untouched. A child made without the handlers (glibc's `_Fork`, a raw `clone`) is
//! told by a page that the library maps when it is loaded, and gets the same fresh start from
//! its first call that could meet the parent's waiters; a domain whose resize or query another
//! thread was making at that fork stops resizing in the child. A fork from a signal handler
//! that interrupted its thread inside this library leaves the queues as they are (the
//! interrupted call goes on in the child). Process-shared words ([`shared`]) are keyed by their
//! object, so parent and child meet on them as before.
#![doc = include_str!("../../../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]

mod api;
mod brief_lock;
mod deadline;
mod domain;
mod engine;
mod error;
#[cfg(not(ufutex_loom))] // the C ABI reads real memory; loom models only the core
mod ffi;
#[cfg(not(ufutex_loom))] // loom models the handlers' locking (`tables::hold_for_fork`), not fork
mod fork;
#[cfg(not(ufutex_loom))] // as fork.rs (its start's protocol is modelled: `primitive::start_once`)
mod fork_mark;
#[cfg(all(test, ufutex_loom))]
mod fork_models;
mod gate;
mod group;
#[cfg(target_os = "linux")]
mod hot_code;
mod key;
#[cfg(all(not(ufutex_loom), target_os = "linux"))] // what loading the library sets up; not modelled
mod load;
mod lock;
mod membarrier;
#[cfg(target_os = "linux")]
pub mod named;
#[cfg(not(ufutex_loom))]
mod node_pool;
mod numa;
mod once;
mod pages;
mod parker;
mod primitive;
mod private_table;
mod queue;
mod reentry;
#[cfg(test)]
mod reentry_tests;
mod requeue;
mod resolve;
#[cfg(target_os = "linux")]
pub mod shared;
mod spill;
mod spin_cost;
pub mod sync;
mod table;
mod tables;
#[cfg(all(test, not(ufutex_loom)))]
mod test_child;
mod thread;
mod topology;
#[cfg(all(test, not(ufutex_loom)))]
mod toy_table;
mod wait;
mod waiter;
mod waitv;
mod wake;
mod wake_op;
mod word;

pub use api::{requeue, wait, wait_bitset, waitv, wake, wake_bitset};
pub use deadline::Deadline;
pub use domain::{Domain, DomainConfig};
pub use error::WaitError;
pub use numa::{NumaFutex, NumaWaitEntry, NumaWord};
pub use resolve::NumaError;
pub use tables::Slots;
pub use waitv::{WaitEntry, WAITV_MAX};
pub use word::Futex;

/// Whether that is decided already, without deciding it (it is decided when the library is
/// loaded: a test checks the linker kept that).
#[doc(hidden)]
#[cfg(not(ufutex_loom))]
pub use membarrier::decided as wakes_fence_decided;
/// Whether this process's wakes leave out their fence (`membarrier` works here).
#[doc(hidden)]
#[cfg(not(ufutex_loom))]
pub use membarrier::fence_free as wakes_fence_free;
/// What the library measured about this host (a benchmark report states it): ns per spin hint.
#[doc(hidden)]
pub use spin_cost::hint_ns as calibrated_spin_hint_ns;

/// The C ABI's entry points, and two the preload library alone uses (`crates/ufutex-preload`),
/// callable from Rust. Not a stable interface.
#[doc(hidden)]
#[cfg(not(ufutex_loom))]
pub mod preload {
    pub use crate::ffi::abi::UfutexWaitv;
    pub use crate::ffi::calls::{
        preload_requeue, preload_wait, preload_wait_relative, preload_waitv, ufutex_hash_get_slots,
        ufutex_hash_set_slots, ufutex_requeue, ufutex_wait, ufutex_waitv, ufutex_wake, ufutex_wake_op,
    };

    /// Refuse process-shared words with `EOPNOTSUPP` (so that the caller can give them to the
    /// kernel), or take them (the default).
    pub fn refuse_shared(refuse: bool) {
        crate::ffi::validate::refuse_shared(refuse)
    }

    /// Answer a private wake, requeue or wake-op of a NULL word that it does not read as the
    /// kernel does (`true`: a word like any other, nobody waits there unless a requeue moved
    /// them), or with `EFAULT` (`false`, the default: the C ABI's contract).
    pub fn pass_null(pass: bool) {
        crate::ffi::validate::pass_null(pass)
    }

    /// The error, if any, that the kernel's `FUTEX_WAIT` gives its relative `timeout` before it
    /// looks at anything else: `EFAULT` if it cannot be read (it is read without trusting it),
    /// `EINVAL` if it is malformed.
    pub fn relative_timeout_error(timeout: *const libc::timespec) -> Option<i32> {
        crate::ffi::validate::relative_timeout(timeout as usize).err().map(|e| e.0)
    }

    /// Return as a failed system call does, as the entry points above do: `errno` set to
    /// `errno`, -1.
    #[inline]
    pub fn fail(errno: i32) -> std::ffi::c_long {
        crate::ffi::failed(crate::ffi::Errno(errno))
    }
}
#[doc(hidden)]
pub use word::WordRefOpaque;

/// The mask that matches every waiter (`FUTEX_BITSET_MATCH_ANY`): the mask of [`wait`] and
/// [`wake`], which are [`wait_bitset`] and [`wake_bitset`] with it.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// let w = AtomicU32::new(0);
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         while w.load(Ordering::Acquire) == 0 {
///             let _ = ufutex::wait_bitset(&w, 0, 0b100, None);
///         }
///     });
///     w.store(1, Ordering::Release);
///     ufutex::wake_bitset(&w, 1, ufutex::MATCH_ANY); // any mask shares a bit with it
/// });
/// ```
pub const MATCH_ANY: u64 = u64::MAX;
