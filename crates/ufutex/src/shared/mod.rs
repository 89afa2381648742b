//! Process-shared futexes: words without `UFUTEX_PRIVATE`, which waiters in different processes
//! meet on when they map the same object (see `ARCHITECTURE.md`, "Process-shared waiting").
//!
//! Two modes, chosen once per process from the environment (`UFUTEX_SHARED`):
//! - the default: ufutex's own shared table in a per-user segment (`segment`, `table`, ...);
//! - `UFUTEX_SHARED=kernel`: the kernel's futex on the word itself (`kernel`).
#![cfg_attr(ufutex_loom, allow(dead_code, unused_imports))]

// The parts the loom models run (a model segment, model threads for processes):
mod engine;
pub(crate) mod fault;
mod identity;
pub(crate) mod known;
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
/// Non-exhaustive: match it with a catch-all arm.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use ufutex::shared::{self, SharedError};
/// let w = AtomicU32::new(1);
/// let e = shared::wait(&w, 0, None).unwrap_err();
/// assert_eq!(e, SharedError::WouldBlock);
/// assert_eq!(e.errno(), libc::EAGAIN);
/// ```
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
    /// `EINVAL`: no entries or too many for a [`waitv`], or an argument the mode cannot honour
    /// exactly (see `UFUTEX_SHARED=kernel`).
    Invalid,
    /// `EACCES`: the user's shared table segment exists but is not safely owned (another owner,
    /// or group/other permission bits).
    Access,
    /// `ENOTRECOVERABLE`: the shared table segment is corrupt, or of another version of
    /// ufutex that live processes still use (remove it to reset; see the header).
    NotRecoverable,
    /// `ENOSPC`: a documented capacity of the shared table is reached (processes, or waiters of
    /// one process).
    NoSpace,
    /// `ENOMEM`: the segment could not be created or mapped (no memory, or its directory is
    /// missing or read-only), memory for a call's entries could not be had, or every one of
    /// the 256 registrations of [`register_mapping`] is in use.
    NoMemory,
    /// `EOPNOTSUPP`: this combination is not available in this mode.
    Unsupported,
}

impl SharedError {
    /// The errno the C ABI returns for this error (positive; one per variant).
    ///
    /// # Examples
    /// ```
    /// use ufutex::shared::SharedError;
    /// assert_eq!(SharedError::TimedOut.errno(), libc::ETIMEDOUT);
    /// assert_eq!(SharedError::NotRecoverable.errno(), libc::ENOTRECOVERABLE);
    /// ```
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

// `NoMemory`'s doc and message name the registrations' capacity as a literal.
#[cfg(not(ufutex_loom))]
const _: () = assert!(known::CAPACITY == 256, "update NoMemory's doc and message");

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
            SharedError::NoMemory => {
                "out of memory for shared futexes: the shared table cannot be created or mapped (no memory, or its \
                 directory is missing or read-only), or all 256 mapping registrations are in use"
            }
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
///
/// Kept in an atomic and read with `getenv` (no lock, no allocation): a signal handler's call
/// may come while its thread reads it the first time, and must not wait for that.
pub(crate) fn mode() -> Mode {
    use std::sync::atomic::{AtomicU8, Ordering};
    const UNKNOWN: u8 = 0;
    const TABLE: u8 = 1;
    const KERNEL: u8 = 2;
    static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);
    let mut m = MODE.load(Ordering::Relaxed);
    if m == UNKNOWN {
        // SAFETY: a NUL-terminated name. `getenv` races only with a `setenv` or `putenv` in
        // another thread at the same moment, which POSIX makes undefined for every `getenv`
        // (libc's own included); this library changes no variable.
        let v = unsafe { libc::getenv(c"UFUTEX_SHARED".as_ptr()) };
        // SAFETY: `getenv` gives null or a NUL-terminated string.
        let kernel = !v.is_null() && unsafe { std::ffi::CStr::from_ptr(v) } == c"kernel";
        m = if kernel { KERNEL } else { TABLE };
        // Relaxed: the value is the whole message; racing readers read the same environment.
        MODE.store(m, Ordering::Relaxed);
    }
    if m == KERNEL {
        Mode::Kernel
    } else {
        Mode::Table
    }
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
/// As [`wait`]. With `UFUTEX_SHARED=kernel` also [`SharedError::Invalid`] for a mask of 0 or
/// wider than the word, and for a 64-bit word with any mask but `u64::MAX` (in the default
/// mode a mask of 0 is taken, and no wake matches it).
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use std::time::Duration;
/// use ufutex::shared::{self, SharedError};
/// let w = AtomicU32::new(7);
/// assert_eq!(shared::wait_bitset(&w, 8, 0b10, None), Err(SharedError::WouldBlock));
/// let now = Some(Duration::ZERO.into()); // a deadline that has passed
/// assert_eq!(shared::wait_bitset(&w, 7, 0b10, now), Err(SharedError::TimedOut));
/// ```
#[cfg(not(ufutex_loom))]
pub fn wait_bitset<F: Futex>(
    f: &F,
    expected: F::Value,
    mask: u64,
    deadline: Option<Deadline>,
) -> Result<(), SharedError> {
    let timeout = deadline.map(Timeout::from);
    wait_word(word_of(f), F::value_bits(expected), mask, timeout.as_ref(), false)
}

/// Wake up to `n` threads waiting (process-shared) on `f`, in any process, oldest first: how
/// many. With no waiter anywhere this costs a fence and a load. It does not change the word:
/// change it first, so that a waiter that has not slept yet sees the change and returns.
///
/// # Errors
/// Only when the shared table cannot be used (see [`SharedError`]); with `UFUTEX_SHARED=kernel`,
/// [`SharedError::Fault`] if the kernel cannot use the word.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use ufutex::shared::{self, SharedError};
/// let w = AtomicU32::new(0);
/// std::thread::scope(|s| {
///     let t = s.spawn(|| shared::wait(&w, 0, None));
///     w.store(1, Ordering::Release);
///     let woken = shared::wake(&w, 1).unwrap(); // 0 if it had not slept yet
///     assert!(woken <= 1);
///     // Woken, or it saw the store before it slept.
///     assert!(matches!(t.join().unwrap(), Ok(()) | Err(SharedError::WouldBlock)));
/// });
/// ```
#[cfg(not(ufutex_loom))]
pub fn wake<F: Futex>(f: &F, n: usize) -> Result<usize, SharedError> {
    wake_bitset(f, n, MATCH_ANY)
}

/// [`wake`], waking only waiters whose mask shares a bit with `mask` (others are neither woken
/// nor counted).
///
/// # Errors
/// As [`wake`]. With `UFUTEX_SHARED=kernel` also [`SharedError::Invalid`] for a mask of 0 or
/// wider than the word, and for a 64-bit word with any mask but `u64::MAX`.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use ufutex::shared;
/// let w = AtomicU32::new(0);
/// std::thread::scope(|s| {
///     let t = s.spawn(|| shared::wait_bitset(&w, 0, 0b01, None));
///     assert_eq!(shared::wake_bitset(&w, 1, 0b10), Ok(0)); // never its bit
///     // Once it sleeps, a wake of its bit finds it.
///     while !t.is_finished() && shared::wake_bitset(&w, 1, 0b01).unwrap() == 0 {
///         std::thread::yield_now();
///     }
///     assert_eq!(t.join().unwrap(), Ok(()));
/// });
/// ```
#[cfg(not(ufutex_loom))]
pub fn wake_bitset<F: Futex>(f: &F, n: usize, mask: u64) -> Result<usize, SharedError> {
    wake_word(word_of(f), n, mask)
}

/// Promise that `[ptr, ptr + len)` stays mapped, to the same shared object, until
/// [`unregister_mapping`]: waits and wakes on words in it then skip the kernel query that
/// otherwise finds, for every operation that queues or dequeues, what backs the word (the
/// query costs 1–10 µs; a wait that sleeps and the wake that finds it make one each). The range
/// must be one mapping (`mmap`, `shmat`) of a shared object — a memfd, `shm_open` or other
/// file with `MAP_SHARED`, shared anonymous memory, a SysV segment — and overlap no registered
/// range. Other processes need not register theirs: a word's identity is the same either way.
///
/// The promise is not checked: if the range is unmapped or something else mapped there while
/// registered, waits and wakes on its words use the old object's identity and can miss each
/// other (a waiter then sleeps until its deadline). Memory safety does not depend on it.
/// Registrations are per process and a forked child inherits them, with the mappings.
///
/// # Errors
/// [`SharedError::Fault`] if nothing is mapped at `ptr`; [`SharedError::Invalid`] if `len` is 0
/// or the range is private memory, spans more than one mapping or overlaps a registered range;
/// [`SharedError::NoMemory`] if 256 ranges are registered (the library's named namespaces
/// count too).
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use ufutex::shared::{self, SharedError};
/// // SAFETY: a fresh shared mapping.
/// let p = unsafe {
///     libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE,
///                libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
/// };
/// assert_ne!(p, libc::MAP_FAILED);
/// shared::register_mapping(p.cast(), 4096)?;
/// // SAFETY: the mapping is 4096 bytes, aligned, and lives until the munmap below.
/// let word = unsafe { &*(p as *const AtomicU32) };
/// assert_eq!(shared::wake(word, 1), Ok(0));
/// assert_eq!(shared::register_mapping(p.cast(), 4096), Err(SharedError::Invalid)); // overlaps
/// shared::unregister_mapping(p.cast())?;
/// // SAFETY: ours, no longer used.
/// unsafe { libc::munmap(p, 4096) };
/// # Ok::<(), SharedError>(())
/// ```
#[cfg(not(ufutex_loom))]
pub fn register_mapping(ptr: *const u8, len: usize) -> Result<(), SharedError> {
    known::note(ptr as usize, len)
}

/// End the promise of [`register_mapping`] for the range that starts at `ptr`: the range may be
/// unmapped once this returns. No wait or wake on a word in it may be in flight meanwhile.
///
/// # Errors
/// [`SharedError::Invalid`] if no registered range starts at `ptr`.
#[cfg(not(ufutex_loom))]
pub fn unregister_mapping(ptr: *const u8) -> Result<(), SharedError> {
    known::forget(ptr as usize)
}

/// If `*from == expected`, wake up to `nr_wake` process-shared waiters on `from` and move up
/// to `nr_requeue` more to wait on `to`: woken + moved. A moved waiter is woken later through
/// `to`; its own wait returns `Ok` then. A waiter whose process died is taken out, neither
/// moved nor counted (as [`wake`] does not count it).
///
/// # Errors
/// [`SharedError::WouldBlock`] if `*from != expected`; as [`wake`] otherwise. With
/// `UFUTEX_SHARED=kernel` also [`SharedError::Invalid`] unless both words are 32 bits.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use ufutex::shared::{self, SharedError};
/// let (a, b) = (AtomicU32::new(0), AtomicU32::new(0));
/// assert_eq!(shared::requeue(&a, 1, &b, 1, 1), Err(SharedError::WouldBlock));
/// std::thread::scope(|s| {
///     let t = s.spawn(|| shared::wait(&a, 0, None));
///     // Move it to `b` once it sleeps on `a` (before that there is nothing to move).
///     while !t.is_finished() && shared::requeue(&a, 0, &b, 0, 1).unwrap() == 0 {
///         std::thread::yield_now();
///     }
///     b.store(1, Ordering::Release);
///     assert_eq!(shared::wake(&b, 1), Ok(1)); // it waits on `b` now
///     assert_eq!(t.join().unwrap(), Ok(()));
/// });
/// ```
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
/// woken entry (any woken one, not necessarily the lowest). [`SharedError::WouldBlock`] if any
/// entry's word does not hold its value.
///
/// # Errors
/// As [`wait`]; [`SharedError::Invalid`] for no entries or more than [`WAITV_MAX`]. With
/// `UFUTEX_SHARED=kernel` also [`SharedError::Invalid`] for more than 128 entries, an entry
/// that is not 32 bits, or one with a mask.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use ufutex::shared::{self, SharedError};
/// use ufutex::WaitEntry;
/// let (a, b) = (AtomicU32::new(0), AtomicU32::new(0));
/// assert_eq!(shared::waitv(&[], None), Err(SharedError::Invalid));
/// std::thread::scope(|s| {
///     let t = s.spawn(|| shared::waitv(&[WaitEntry::new(&a, 0), WaitEntry::new(&b, 0)], None));
///     b.store(1, Ordering::Release);
///     shared::wake(&b, 1).unwrap();
///     // Woken through `b`, or it saw the store before it slept.
///     assert!(matches!(t.join().unwrap(), Ok(1) | Err(SharedError::WouldBlock)));
/// });
/// ```
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
    waitv_words(&entries, timeout.as_ref(), false)
}

/// The untyped shared wait every front end calls, in this process's [`mode`]. `also_kernel`:
/// the kernel's own wakes of the (32-bit) word end it too, as they end a wait in the kernel
/// (the preload library's waits: `ops::wait_watching`).
#[cfg(not(ufutex_loom))]
pub(crate) fn wait_word(
    word: WordRef,
    expected: u64,
    mask: u64,
    timeout: Option<&Timeout>,
    also_kernel: bool,
) -> Result<(), SharedError> {
    match mode() {
        Mode::Table => ops::wait_watching(&[ops::Entry { word, expected, mask }], timeout, also_kernel).map(|_| ()),
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

/// The shared `FUTEX_WAKE_OP` (the C ABI's): `op` applies the operation to the u32 at `b` in
/// the table's mode; `encoded` is the same operation as the kernel takes it, and `errno` makes
/// the kernel's errors `E` (its `ENOSYS` for an unknown comparison has no [`SharedError`]).
#[cfg(not(ufutex_loom))]
pub(crate) fn wake_op_words<E: From<SharedError>>(
    a: usize,
    b: usize,
    nr1: usize,
    nr2: usize,
    (encoded, errno): (u32, impl FnOnce(i32) -> E),
    op: impl FnOnce() -> Result<bool, E>,
) -> Result<usize, E> {
    match mode() {
        Mode::Table => ops::wake_op(a, b, nr1, nr2, op),
        Mode::Kernel => kernel::wake_op(a, b, nr1, nr2, encoded).map_err(errno),
    }
}

/// The untyped shared waitv (every entry shared).
#[cfg(not(ufutex_loom))]
pub(crate) fn waitv_words(
    entries: &[ops::Entry],
    timeout: Option<&Timeout>,
    also_kernel: bool,
) -> Result<usize, SharedError> {
    match mode() {
        Mode::Table => ops::wait_watching(entries, timeout, also_kernel),
        Mode::Kernel => {
            let v: Vec<(WordRef, u64)> = entries
                .iter()
                .map(|e| if e.mask == MATCH_ANY { Ok((e.word, e.expected)) } else { Err(SharedError::Invalid) })
                .collect::<Result<_, _>>()?;
            kernel::waitv(&v, timeout)
        }
    }
}
