//! Process-shared futexes: words without `UFUTEX_PRIVATE`, which waiters in different processes
//! meet on when they map the same object (see `ARCHITECTURE.md`, "Process-shared waiting").
//!
//! Two modes, chosen once per process from the environment ([`mode`]):
//! - the default: ufutex's own shared table in a per-user segment (`segment`, `table`, ...);
//! - `UFUTEX_SHARED=kernel`: the kernel's futex on the word itself (`kernel`).
#![cfg_attr(ufutex_loom, allow(dead_code, unused_imports))]

// The parts the loom models run (a model segment, model threads for processes):
pub(crate) mod fault;
mod identity;
pub(crate) mod lock;
#[cfg(all(test, ufutex_loom))]
mod loom_tests;
mod park;
mod queue;
pub(crate) mod segment;
mod surgery;
// The parts that need the real system:
#[cfg(not(ufutex_loom))]
pub(crate) mod file;
pub(crate) mod kernel;
#[cfg(not(ufutex_loom))]
mod mixed;
#[cfg(not(ufutex_loom))]
mod ops;
#[cfg(not(ufutex_loom))]
pub(crate) mod process;

#[cfg(not(ufutex_loom))]
pub(crate) use mixed::waitv_mixed;
#[cfg(not(ufutex_loom))]
pub(crate) use ops::Entry;

use std::fmt;
#[cfg(not(ufutex_loom))]
use {
    crate::deadline::{Deadline, Timeout},
    crate::waitv::{WaitEntry, WAITV_MAX},
    crate::word::{word_of, Futex, WordRef},
    crate::MATCH_ANY,
};

/// Why a process-shared operation failed. Each variant is the errno the C ABI returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SharedError {
    /// `EAGAIN`: the word did not hold the expected value.
    WouldBlock,
    /// `ETIMEDOUT`: the deadline passed first.
    TimedOut,
    /// `EINTR`: a signal handler installed without `SA_RESTART` ran.
    Interrupted,
    /// `EFAULT`: the word's address is not mapped (or, for a shared word, not in memory the
    /// kernel's futex could use: a read-only private anonymous page), or the shared table's
    /// segment cannot be mapped.
    Fault,
    /// `EINVAL`: an argument the mode cannot honour exactly (see `UFUTEX_SHARED=kernel`).
    Invalid,
    /// `EACCES`: the user's shared table segment exists but is not safely owned (another owner,
    /// or group/other permission bits).
    Access,
    /// `ENOTRECOVERABLE`: the shared table segment is corrupt (remove it to reset; see the
    /// header).
    NotRecoverable,
    /// `ENOSPC`: a documented capacity of the shared table is reached (processes, or waiters of
    /// one process).
    NoSpace,
    /// `ENOMEM`: memory for the segment could not be had.
    NoMemory,
    /// `EOPNOTSUPP`: this combination is not available in this mode.
    Unsupported,
}

impl SharedError {
    /// The errno the C ABI returns for this error.
    pub fn errno(self) -> i32 {
        match self {
            SharedError::WouldBlock => libc::EAGAIN,
            SharedError::TimedOut => libc::ETIMEDOUT,
            SharedError::Interrupted => libc::EINTR,
            SharedError::Fault => libc::EFAULT,
            SharedError::Invalid => libc::EINVAL,
            SharedError::Access => libc::EACCES,
            SharedError::NotRecoverable => libc::ENOTRECOVERABLE,
            SharedError::NoSpace => libc::ENOSPC,
            SharedError::NoMemory => libc::ENOMEM,
            SharedError::Unsupported => libc::EOPNOTSUPP,
        }
    }

    /// The error for an errno a system call returned (anything unexpected is `Fault`).
    pub(crate) fn from_errno(e: i32) -> SharedError {
        match e {
            libc::EAGAIN => SharedError::WouldBlock,
            libc::ETIMEDOUT => SharedError::TimedOut,
            libc::EINTR => SharedError::Interrupted,
            libc::EINVAL => SharedError::Invalid,
            libc::EACCES | libc::EPERM => SharedError::Access,
            libc::ENOTRECOVERABLE => SharedError::NotRecoverable,
            libc::ENOSPC => SharedError::NoSpace,
            libc::ENOMEM => SharedError::NoMemory,
            libc::EOPNOTSUPP | libc::ENOSYS => SharedError::Unsupported,
            _ => SharedError::Fault,
        }
    }
}

impl From<crate::error::WaitError> for SharedError {
    fn from(e: crate::error::WaitError) -> SharedError {
        match e {
            crate::error::WaitError::WouldBlock => SharedError::WouldBlock,
            crate::error::WaitError::TimedOut => SharedError::TimedOut,
            crate::error::WaitError::Interrupted => SharedError::Interrupted,
        }
    }
}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SharedError::WouldBlock => "futex word did not hold the expected value",
            SharedError::TimedOut => "futex wait timed out",
            SharedError::Interrupted => "futex wait interrupted by a signal",
            SharedError::Fault => "futex word (or the shared table) is not mapped",
            SharedError::Invalid => "argument not supported exactly in this shared mode",
            SharedError::Access => "the user's shared futex table is not safely owned",
            SharedError::NotRecoverable => "the shared futex table is corrupt",
            SharedError::NoSpace => "a capacity of the shared futex table is reached",
            SharedError::NoMemory => "no memory for the shared futex table",
            SharedError::Unsupported => "not supported in this shared mode",
        })
    }
}

impl std::error::Error for SharedError {}

/// Which shared mode this process runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// ufutex's own per-user shared table (the default).
    Table,
    /// `UFUTEX_SHARED=kernel`: the kernel's futex on the word itself.
    Kernel,
}

/// The mode, read from `UFUTEX_SHARED` once per process: `kernel` → [`Mode::Kernel`]; unset,
/// empty or `table` → [`Mode::Table`]; anything else is also the table (and never a silent
/// switch between two processes that spelled it alike).
pub(crate) fn mode() -> Mode {
    static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var_os("UFUTEX_SHARED") {
        Some(v) if v == "kernel" => Mode::Kernel,
        _ => Mode::Table,
    })
}

/// Sleep while `*f == expected`, until a process-shared [`wake`] or [`requeue`] on the same
/// word — from this or any other process that maps the same object, at any address — dequeues
/// this thread, or `deadline` passes.
///
/// The word is keyed like the kernel's shared futex: by the object behind its page (a memfd,
/// `shm_open` object, `MAP_SHARED` file, SysV segment, or `MAP_SHARED|MAP_ANONYMOUS` memory
/// inherited across `fork`) and the offset in it. A word in process-private memory (heap, stack,
/// `MAP_PRIVATE`) is keyed by process and address, and never meets a private futex
/// ([`crate::wait`]) on the same address.
///
/// # Errors
/// [`SharedError::WouldBlock`], [`SharedError::TimedOut`], [`SharedError::Interrupted`] as
/// [`crate::wait`]; the others when the shared table cannot be used (see [`SharedError`]).
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// // A word in memory that a forked child would share.
/// let p = unsafe {
///     libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE,
///                libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
/// };
/// assert_ne!(p, libc::MAP_FAILED);
/// let word = unsafe { &*(p as *const AtomicU32) };
/// assert_eq!(ufutex::shared::wait(word, 1, None), Err(ufutex::shared::SharedError::WouldBlock));
/// assert_eq!(ufutex::shared::wake(word, 1), Ok(0));
/// ```
#[cfg(not(ufutex_loom))]
pub fn wait<F: Futex>(f: &F, expected: F::Value, deadline: Option<Deadline>) -> Result<(), SharedError> {
    wait_bitset(f, expected, MATCH_ANY, deadline)
}

/// [`wait`], woken only by wakes whose mask shares a bit with `mask`.
///
/// # Errors
/// As [`wait`].
#[cfg(not(ufutex_loom))]
pub fn wait_bitset<F: Futex>(
    f: &F,
    expected: F::Value,
    mask: u64,
    deadline: Option<Deadline>,
) -> Result<(), SharedError> {
    let timeout = deadline.map(Timeout::from);
    wait_word(word_of(f), F::value_bits(expected), mask, timeout.as_ref())
}

/// Wake up to `n` threads waiting (process-shared) on `f`, in any process, oldest first: how
/// many. With no waiter anywhere this costs a fence and a load.
///
/// # Errors
/// Only when the shared table cannot be used (see [`SharedError`]).
#[cfg(not(ufutex_loom))]
pub fn wake<F: Futex>(f: &F, n: usize) -> Result<usize, SharedError> {
    wake_bitset(f, n, MATCH_ANY)
}

/// [`wake`], waking only waiters whose mask shares a bit with `mask`.
///
/// # Errors
/// As [`wake`].
#[cfg(not(ufutex_loom))]
pub fn wake_bitset<F: Futex>(f: &F, n: usize, mask: u64) -> Result<usize, SharedError> {
    wake_word(word_of(f), n, mask)
}

/// If `*from == expected`, wake up to `nr_wake` process-shared waiters on `from` and move up
/// to `nr_requeue` more to wait on `to`: woken + moved.
///
/// # Errors
/// [`SharedError::WouldBlock`] if `*from != expected`; as [`wake`] otherwise.
#[cfg(not(ufutex_loom))]
pub fn requeue<F: Futex>(
    from: &F,
    expected: F::Value,
    to: &F,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, SharedError> {
    requeue_words(word_of(from), Some(F::value_bits(expected)), word_of(to), nr_wake, nr_requeue)
}

/// Wait on any of `entries` (1 to [`WAITV_MAX`], any sizes), all process-shared: the index of a
/// woken entry.
///
/// # Errors
/// As [`wait`]; [`SharedError::Invalid`] for no entries or more than [`WAITV_MAX`].
#[cfg(not(ufutex_loom))]
pub fn waitv(entries: &[WaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, SharedError> {
    if entries.is_empty() || entries.len() > WAITV_MAX {
        return Err(SharedError::Invalid);
    }
    let timeout = deadline.map(Timeout::from);
    let entries: Vec<ops::Entry> = entries
        .iter()
        .map(|e| {
            let (word, expected, mask) = e.parts();
            ops::Entry { word, expected, mask }
        })
        .collect();
    waitv_words(&entries, timeout.as_ref())
}

/// The untyped shared wait every front end calls, in this process's [`mode`].
#[cfg(not(ufutex_loom))]
pub(crate) fn wait_word(word: WordRef, expected: u64, mask: u64, timeout: Option<&Timeout>) -> Result<(), SharedError> {
    match mode() {
        Mode::Table => ops::wait(&[ops::Entry { word, expected, mask }], timeout).map(|_| ()),
        Mode::Kernel => kernel::wait(word, expected, mask, timeout),
    }
}

/// The untyped shared wake.
#[inline]
#[cfg(not(ufutex_loom))]
pub(crate) fn wake_word(word: WordRef, n: usize, mask: u64) -> Result<usize, SharedError> {
    match mode() {
        Mode::Table => ops::wake(word.addr(), n, mask),
        Mode::Kernel => kernel::wake(word, n, mask),
    }
}

/// The untyped shared requeue (`expected`: `None` for the legacy `FUTEX_REQUEUE`).
#[cfg(not(ufutex_loom))]
pub(crate) fn requeue_words(
    from: WordRef,
    expected: Option<u64>,
    to: WordRef,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, SharedError> {
    match mode() {
        Mode::Table => ops::requeue(from, expected, to.addr(), nr_wake, nr_requeue),
        Mode::Kernel => kernel::requeue(from, expected, to, nr_wake, nr_requeue),
    }
}

/// The untyped shared waitv (every entry shared).
#[cfg(not(ufutex_loom))]
pub(crate) fn waitv_words(entries: &[ops::Entry], timeout: Option<&Timeout>) -> Result<usize, SharedError> {
    match mode() {
        Mode::Table => ops::wait(entries, timeout),
        Mode::Kernel => {
            let v: Vec<(WordRef, u64)> = entries
                .iter()
                .map(|e| if e.mask == MATCH_ANY { Ok((e.word, e.expected)) } else { Err(SharedError::Invalid) })
                .collect::<Result<_, _>>()?;
            kernel::waitv(&v, timeout)
        }
    }
}
