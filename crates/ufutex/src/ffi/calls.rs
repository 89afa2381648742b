//! The exported functions. Each one: catch panics, validate (in the order of the kernel's
//! `kernel/futex/syscalls.c`), translate, call the core, and return as `syscall(2)` would.
//!
//! # Safety (for every function here)
//! The functions take any pointer and never crash on one that is NULL, misaligned or unmapped
//! when they are called: they answer `EINVAL`/`EFAULT` as the kernel does. What they need, as
//! the core reads the word again while queueing: memory found mapped must stay mapped until the
//! call returns (the kernel would give `EFAULT` there; we may crash).

use super::abi::{UfutexWaitv, UFUTEX_WAITV_MAX};
use super::fault::Compared;
use super::validate::{self, WordFlags};
use super::wake_op::WakeOp;
use super::{entry, fault, Errno};
use crate::deadline::Timeout;
use crate::domain::default_domain;
use crate::engine::FenceFree;
use crate::key::Key;
use crate::membarrier::Pays;
use crate::requeue::requeue_keys;
use crate::resolve::{resolve, Purpose};
use crate::shared;
use crate::table::Table;
use crate::tables::Slots;
use crate::wait::{wait_key, Wakers};
use crate::waitv::{try_waitv_watching, AlsoKernel, WaitEntry};
use crate::wake::{wake_private, wake_private_at, Report};
use crate::wake_op::wake_op;
use crate::word::{Size, WordRef};
use libc::{c_int, c_long, c_uint, c_ulong, c_void, clockid_t, timespec};
use std::ptr::NonNull;

/// A C `unsigned long` as the core's u64 (the same type on 64-bit Linux, narrower elsewhere).
#[allow(clippy::unnecessary_cast)]
fn ulong(v: c_ulong) -> u64 {
    v as u64
}

/// A word the core may load: `addr` was validated and just read successfully.
///
/// # Safety
/// - `addr` is aligned to the size and was read without a fault by this call; the caller of the
///   C function keeps it mapped until the call returns (this module's contract).
unsafe fn loadable(addr: usize, f: WordFlags) -> WordRef {
    // SAFETY: as this function's contract.
    unsafe { WordRef::from_raw(addr, f.size) }
}

/// A word the call goes on with only while it holds `val` (a wait, a compare-and-requeue), read
/// now: `EFAULT` if it does not read, `EAGAIN` unless it holds `val` (no queueing, no system
/// call); else the word, which the operation compares again where it must.
///
/// # Safety
/// - `addr` is aligned to the size; the caller of the C function keeps it mapped until the call
///   returns (this module's contract).
#[inline(always)] // a fault-safe load and a compare: no frame of its own
unsafe fn holding(addr: usize, f: WordFlags, val: u64) -> Result<WordRef, Errno> {
    if validate::current(addr, f.size)? != val {
        return Err(Errno::EAGAIN);
    }
    // SAFETY: `addr` is aligned and was just read; the caller keeps it mapped.
    Ok(unsafe { loadable(addr, f) })
}

/// A word the core only uses by address (NUMA resolution, a shared requeue's target, the
/// source of one that compares nothing): never loaded.
///
/// # Safety
/// - `addr` is aligned to the size; the returned word is passed only where its address and size
///   are used and nothing loads through it (`numa::resolve`; the shared requeue, whose kernel
///   mode hands the address to the kernel, which reads it safely).
unsafe fn address_only(addr: usize, f: WordFlags) -> WordRef {
    // SAFETY: alignment holds; the readability clause of `from_raw` is not exercised, as the
    // core never loads these words (see this function's contract).
    unsafe { WordRef::from_raw(addr, f.size) }
}

/// The key of a validated word (the kernel's `get_futex_key`): its address; with `UFUTEX_NUMA`
/// also its node — the node word after it is read through the fault-safe path (`EFAULT`), an
/// impossible node is `EINVAL`, and -1 is replaced by the memory policy's node (`UFUTEX_MPOL`)
/// or the caller's and written back (`EFAULT` if the page is not writable); with `UFUTEX_MPOL`
/// alone, the policy's node if any. For [`Purpose::Queue`] a node's first table is allocated
/// (`ENOMEM` if it cannot be).
#[inline(always)] // the plain case is one branch; returned through memory it cost a stall
fn key_of(addr: usize, f: WordFlags, purpose: Purpose) -> Result<Key, Errno> {
    if !f.numa && !f.mpol {
        return Ok(Key::private(addr));
    }
    numa_key_of(addr, f, purpose)
}

/// [`key_of`] for `UFUTEX_NUMA` / `UFUTEX_MPOL` words.
#[inline(never)]
fn numa_key_of(addr: usize, f: WordFlags, purpose: Purpose) -> Result<Key, Errno> {
    let node_word = if f.numa {
        let at = addr + f.size.bytes();
        if validate::current(at, f.size)? == f.size.max() {
            // -1 is written back below: on a page we may not write, EFAULT as the kernel's
            // store would give, not a crash on ours.
            fault::check_writable(at, f.size)?;
        }
        // SAFETY: the pair is aligned to twice the size, so the node word is aligned; it was just
        // read; the caller keeps it mapped for the call.
        Some(unsafe { loadable(at, f) })
    } else {
        None
    };
    // SAFETY: `addr` is aligned; `resolve` uses the word's address and size, never loads it.
    let word = unsafe { address_only(addr, f) };
    resolve(default_domain().tables(), word, node_word, f.mpol, purpose).map_err(|e| Errno(e.errno()))
}

/// Wait while `*uaddr == val`: the `futex_wait` syscall. See `include/ufutex.h`.
///
/// # Safety
/// See the module documentation: memory found mapped stays mapped for the call.
#[no_mangle]
pub unsafe extern "C" fn ufutex_wait(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    // The most common failing wait — a private 32-bit word, no timeout — in this frame, told
    // with constants; it keeps no register across a call, so it saves none. Any other
    // call goes on with the same arguments (tail calls).
    // (No timeout and the plain flags, in one test.)
    if (timeout as usize | (flags ^ validate::PLAIN_U32) as usize) == 0
        && validate::plain_private_u32(uaddr as usize, ulong(val), ulong(mask))
    {
        // (Reads not ready yet: the general way.) The word compared where it lies: its value
        // is not needed beyond the compare (`fault::compare_u32_at_once`).
        // (No truncation: `plain_private_u32` found `val` within 32 bits.)
        if let Some(compared) = fault::compare_u32_at_once(uaddr as usize, val as u32) {
            return match compared {
                Compared::Equal => {
                    // The wait that sleeps: a taken branch is nothing to it.
                    std::hint::cold_path();
                    // SAFETY: forwarded contract.
                    unsafe { wait_whole(uaddr, val, mask, flags, timeout, clockid) }
                }
                // One errno store for both failures.
                failed => super::failed(if failed == Compared::Differs { Errno::EAGAIN } else { Errno::EFAULT }),
            };
        }
    }
    // SAFETY: forwarded contract.
    unsafe { wait_general(uaddr, val, mask, flags, timeout, clockid) }
}

/// [`ufutex_wait`] for every call but a plain private 32-bit one: the failing wait of other
/// sizes told at once, else the whole way.
///
/// # Safety
/// As [`ufutex_wait`].
#[inline(never)]
unsafe extern "C" fn wait_general(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    if let Some(r) = wait_fails_at_once(uaddr, val, mask, flags, timeout) {
        return r;
    }
    // SAFETY: forwarded contract. (The same arguments: a tail call, so this frame stays small.)
    unsafe { wait_whole(uaddr, val, mask, flags, timeout, clockid) }
}

/// [`ufutex_wait`] the whole way: every check, then the wait, with no shortcut (the tests hold
/// the shortcuts to it).
///
/// # Safety
/// As [`ufutex_wait`].
#[inline(never)]
pub(super) unsafe extern "C" fn wait_whole(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { wait_with(uaddr, val, mask, flags, Due::Absolute(timeout, clockid), Wakers::Ufutex) }
}

/// The common failing wait, told before anything else: a plain private word with no timeout,
/// whose value differs (`EAGAIN`) or which does not read (`EFAULT`) — as the whole way would
/// answer, finding nothing else wrong with such a call. `None` for every other call, which the
/// whole way answers. Inlined into the exported functions, so that this path runs in their
/// small frame and the whole way's large one is built only when it is needed.
#[inline(always)]
fn wait_fails_at_once(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    timeout: *const timespec,
) -> Option<c_long> {
    if !timeout.is_null() {
        return None;
    }
    let size = validate::plain_private(flags, uaddr as usize, ulong(val), ulong(mask))?;
    answer_read(fault::read_word_at_once(uaddr as usize, size)?, val)
}

/// What a plain private wait answers from the read of its word: a value other than `val` is
/// `EAGAIN`, a word that does not read `EFAULT`; `None` when the value is `val` (it goes on to
/// sleep: the whole way).
#[inline(always)]
fn answer_read(read: Result<u64, fault::Fault>, val: c_ulong) -> Option<c_long> {
    match read {
        Ok(v) if v == ulong(val) => {
            // The wait that sleeps: a taken branch is nothing to it. The failures fall through,
            // with one errno store for both.
            std::hint::cold_path();
            None
        }
        other => Some(super::failed(if other.is_ok() { Errno::EAGAIN } else { Errno::EFAULT })),
    }
}

/// Where a wait's timeout comes from.
#[derive(Clone, Copy)]
enum Due {
    /// An absolute time on a clock (futex2, `FUTEX_WAIT_BITSET`).
    Absolute(*const timespec, clockid_t),
    /// A time from now on CLOCK_MONOTONIC (the legacy `FUTEX_WAIT`).
    Relative(*const timespec),
}

/// [`ufutex_wait`] for the preload library's legacy waits: a 32-bit word is also woken by the
/// kernel's own wakes on it (a raw-syscall waker, a thread-exit wake), and may then return 0
/// although no ufutex waker dequeued it (`wait::Wakers::AlsoKernel`).
///
/// # Safety
/// As [`ufutex_wait`].
#[doc(hidden)]
pub unsafe fn preload_wait(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    if let Some(r) = wait_fails_at_once(uaddr, val, mask, flags, timeout) {
        return r;
    }
    // SAFETY: forwarded contract.
    unsafe { wait_with(uaddr, val, mask, flags, Due::Absolute(timeout, clockid), Wakers::AlsoKernel) }
}

/// [`preload_wait`] with a relative timeout on CLOCK_MONOTONIC (the legacy `FUTEX_WAIT`): null
/// for none; an unreadable one is `EFAULT`, an invalid one `EINVAL`.
///
/// # Safety
/// As [`ufutex_wait`].
#[doc(hidden)]
pub unsafe fn preload_wait_relative(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    timeout: *const timespec,
) -> c_long {
    if let Some(r) = wait_fails_at_once(uaddr, val, mask, flags, timeout) {
        return r;
    }
    // SAFETY: forwarded contract.
    unsafe { wait_with(uaddr, val, mask, flags, Due::Relative(timeout), Wakers::AlsoKernel) }
}

/// # Safety
/// As [`ufutex_wait`].
#[inline(never)] // the whole way, out of the exported functions' fast path
unsafe fn wait_with(
    uaddr: *mut c_void,
    val: c_ulong,
    mask: c_ulong,
    flags: c_uint,
    due: Due,
    wakers: Wakers,
) -> c_long {
    entry(|| {
        let f = validate::word_flags(flags)?;
        validate::fits(f.size, ulong(val))?;
        validate::fits(f.size, ulong(mask))?;
        // The kernel sets the timeout up before `__futex_wait` looks at the mask.
        let timeout = match due {
            Due::Absolute(ts, clockid) => validate::timeout(ts as usize, clockid)?,
            Due::Relative(ts) => validate::relative_timeout(ts as usize)?,
        };
        let mask = validate::mask(ulong(mask))?;
        let addr = validate::address(uaddr as u64, f)?;
        if !f.private {
            // SAFETY: forwarded contract.
            return unsafe { wait_shared(addr, f, ulong(val), mask, timeout, wakers) };
        }
        // A NUMA/MPOL word's node is resolved before the value is compared, as the kernel
        // does; a plain word's key cannot fail, and is made only if the wait goes on.
        let node_key = if f.numa || f.mpol { Some(numa_key_of(addr, f, Purpose::Queue)?) } else { None };
        // SAFETY: `addr` is aligned; the caller keeps it mapped (the C ABI's contract).
        let word = unsafe { holding(addr, f, ulong(val)) }?;
        let key = node_key.unwrap_or(Key::private(addr));
        wait_key(default_domain().tables(), word, key, ulong(val), mask, timeout, wakers, Pays::Waiter)?;
        Ok(0)
    })
}

/// A validated process-shared wait: the node word (if any) resolved and written back as for a
/// private word (the shared table has no per-node tables), the value compared, then the shared
/// table (or, with `UFUTEX_SHARED=kernel`, the kernel).
///
/// # Safety
/// See the module documentation: memory found mapped stays mapped for the call.
unsafe fn wait_shared(
    addr: usize,
    f: WordFlags,
    val: u64,
    mask: u64,
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Result<c_long, Errno> {
    if f.numa || f.mpol {
        numa_key_of(addr, f, Purpose::Wake)?;
    }
    // SAFETY: `addr` is aligned; the caller keeps it mapped (this function's contract).
    let word = unsafe { holding(addr, f, val) }?;
    shared::wait_word(word, val, mask, timeout.as_ref(), wakers == Wakers::AlsoKernel)?;
    Ok(0)
}

/// The legacy `FUTEX_REQUEUE` and `FUTEX_CMP_REQUEUE` for the preload library: wake up to
/// `nr_wake` waiters of the 32-bit word `uaddr` and move up to `nr_requeue` more to `uaddr2`;
/// with `cmp`, only while `uaddr` holds that value (else `EAGAIN`; `EFAULT` if it does not
/// read). Without it a private word is not read; a process-shared one (`shared`) is, as the
/// kernel looks each shared word's page up for its key (`EFAULT`), the source's first. `EINVAL`
/// for a negative count or a misaligned word, `EFAULT` for a NULL word or one in the kernel's
/// half. (The futex2 entry point, [`ufutex_requeue`], would take the same call through a
/// caller's waitv pair, parsed and checked entry by entry: work a legacy call, whose words are
/// plain by its op, need not do.)
#[doc(hidden)]
#[inline(never)] // its own frame: the dispatch's wait and wake paths stay as lean as they were
#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
pub fn preload_requeue(
    uaddr: *mut c_void,
    uaddr2: *mut c_void,
    nr_wake: c_int,
    nr_requeue: c_int,
    cmp: Option<u32>,
    shared: bool,
) -> c_long {
    if shared {
        return preload_requeue_shared(uaddr, uaddr2, nr_wake, nr_requeue, cmp);
    }
    entry(|| {
        let f = validate::word_flags(super::abi::UFUTEX_SIZE_U32 | super::abi::UFUTEX_PRIVATE)?;
        let (nr_wake, nr_requeue) = (validate::count(nr_wake)?, validate::count(nr_requeue)?);
        let from = validate::nonnull(validate::address(uaddr as u64, f)?)?;
        let to = validate::nonnull(validate::address(uaddr2 as u64, f)?)?;
        let (k1, k2) = (Key::private(from), Key::private(to));
        let check = match cmp {
            None => None,
            // SAFETY: `from` is aligned; the caller keeps it mapped (the C ABI's contract).
            Some(val) => Some((unsafe { holding(from, f, val.into()) }?, val.into())),
        };
        Ok(requeue_keys(default_domain().tables(), k1, k2, check, nr_wake, nr_requeue, Pays::Waiter)? as c_long)
    })
}

/// [`preload_requeue`] of process-shared words, out of the private requeue's frame (whose code
/// a requeue after a long sleep fetches line by line: BENCHMARKS.md). Each shared key is made
/// with its page looked up (EFAULT), source first.
#[inline(never)]
fn preload_requeue_shared(
    uaddr: *mut c_void,
    uaddr2: *mut c_void,
    nr_wake: c_int,
    nr_requeue: c_int,
    cmp: Option<u32>,
) -> c_long {
    entry(|| {
        let f = validate::word_flags(super::abi::UFUTEX_SIZE_U32)?;
        let (nr_wake, nr_requeue) = (validate::count(nr_wake)?, validate::count(nr_requeue)?);
        let from = validate::nonnull(validate::address(uaddr as u64, f)?)?;
        validate::current(from, f.size)?;
        let to = validate::nonnull(validate::address(uaddr2 as u64, f)?)?;
        validate::current(to, f.size)?;
        // SAFETY: both words are aligned and were just read; the caller keeps them mapped (the
        // C ABI's contract).
        unsafe { requeue_shared((from, f, cmp.map(u64::from)), (to, f), nr_wake, nr_requeue) }
    })
}

/// Wake up to `nr` waiters on `uaddr`: the `futex_wake` syscall. See `include/ufutex.h`.
///
/// # Safety
/// None needed beyond C's: a private wake never reads the word (it may be unmapped).
#[no_mangle]
#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
pub unsafe extern "C" fn ufutex_wake(uaddr: *mut c_void, mask: c_ulong, nr: c_int, flags: c_uint) -> c_long {
    // The most common wake (a plain private 32-bit word, a count of at least one, nobody
    // waiting) in this frame, told with constants, which makes no call: it looks, and a look
    // that finds nobody is the whole wake. `flags` is not needed after its one compare, so no
    // register is shuffled to keep it for the call that goes on.
    if flags == validate::PLAIN_U32 {
        if nr > 0 && validate::plain_private_u32(uaddr as usize, 0, ulong(mask)) {
            if let Some(r) = wake_plain(uaddr, mask, nr) {
                return r;
            }
        }
        return wake_whole(uaddr, mask, nr, validate::PLAIN_U32);
    }
    wake_general(uaddr, mask, nr, flags)
}

/// [`ufutex_wake`] of a plain private word (`nr` > 0, the mask fits the size and is not 0: all
/// checked), from its fence-free look: nobody is the whole wake (0), waiters go on in
/// [`wake_plain_at`]; `None` while `membarrier` is not known to work (the whole way then).
#[inline(always)] // into both callers' frames, whose no-waiter path makes no call
fn wake_plain(uaddr: *mut c_void, mask: c_ulong, nr: c_int) -> Option<c_long> {
    match default_domain().tables().look_if_fence_free(&Key::private(uaddr as usize)) {
        FenceFree::Nobody => Some(0),
        FenceFree::LockAt { at, busy } => Some(wake_plain_at(uaddr, mask, nr, at, busy)),
        FenceFree::Unknown => None,
    }
}

/// [`ufutex_wake`] of a plain private word (`nr` > 0, the mask fits the size and is not 0: all
/// checked) whose look found waiters, or a bucket that is not FREE, in table `at`: the rest of
/// the wake from that look, with no check or look made twice. (`extern "C"`, as the other
/// ways on from [`ufutex_wake`]: a function that cannot unwind into it is tail-called, so its
/// no-waiter path needs no frame.)
#[inline(never)]
#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
extern "C" fn wake_plain_at(uaddr: *mut c_void, mask: c_ulong, nr: c_int, at: NonNull<Table>, busy: bool) -> c_long {
    entry(|| {
        let (key, nr) = (Key::private(uaddr as usize), validate::count(nr)?);
        let tables = default_domain().tables();
        Ok(wake_private_at(tables, key, at, busy, nr, ulong(mask), Report::Count).count as c_long)
    })
}

/// [`ufutex_wake`] for every call but a plain private 32-bit one: the plain wake of the other
/// sizes from its look ([`wake_plain`]), else the whole way. (The same arguments: tail calls,
/// so the frames stay small.)
#[inline(never)]
extern "C" fn wake_general(uaddr: *mut c_void, mask: c_ulong, nr: c_int, flags: c_uint) -> c_long {
    if let (Some(_), Ok(1..)) = (validate::plain_private(flags, uaddr as usize, 0, ulong(mask)), usize::try_from(nr)) {
        if let Some(r) = wake_plain(uaddr, mask, nr) {
            return r;
        }
    }
    wake_whole(uaddr, mask, nr, flags)
}

/// [`ufutex_wake`] the whole way: every check, then the wake.
#[inline(never)]
extern "C" fn wake_whole(uaddr: *mut c_void, mask: c_ulong, nr: c_int, flags: c_uint) -> c_long {
    entry(|| {
        let f = validate::word_flags(flags)?;
        validate::fits(f.size, ulong(mask))?;
        let mask = validate::mask(ulong(mask))?;
        let nr = validate::count(nr)?;
        let addr = validate::nonnull(validate::address(uaddr as u64, f)?)?;
        // A NUMA node word is resolved (and -1 written back) even when `nr` is 0.
        let key = key_of(addr, f, Purpose::Wake)?;
        if !f.private {
            // The kernel's shared wake looks the page up: an unmapped word is EFAULT.
            validate::current(addr, f.size)?;
            // SAFETY: `addr` is aligned and was just read; the caller keeps it mapped.
            let word = unsafe { loadable(addr, f) };
            return Ok(shared::wake_word(word, nr, mask)? as c_long);
        }
        Ok(wake_private(default_domain().tables(), key, nr, mask, Report::Count, Pays::Waiter).count as c_long)
    })
}

/// Wait on any of `nr_futexes` words: the `futex_waitv` syscall. See `include/ufutex.h`.
///
/// # Safety
/// See the module documentation: memory found mapped stays mapped for the call.
#[no_mangle]
pub unsafe extern "C" fn ufutex_waitv(
    waiters: *mut UfutexWaitv,
    nr_futexes: c_uint,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    // The most common failing waitv in this frame, which keeps no register across a call and so
    // saves none; any other call goes on with the same arguments (tail calls). Those of one
    // untimed entry are passed on as the constants they were found to be, so that the shortcut
    // keeps only the array and the clock in registers for its fall-through; one timed entry
    // has a frame of its own (checking the timeout in this one took the untimed call 0.35 ns).
    if lone(waiters, nr_futexes, flags) {
        if !timeout.is_null() {
            // (Out of the untimed call's straight line: it is a jump either way.)
            std::hint::cold_path();
            // SAFETY: forwarded contract.
            return unsafe { waitv_lone_timed(waiters, timeout, clockid) };
        }
        if validate::one_plain_mismatch(waiters as usize) {
            return super::failed(Errno::EAGAIN);
        }
        // SAFETY: forwarded contract (the same arguments).
        return unsafe { waitv_general(waiters, 1, 0, std::ptr::null(), clockid) };
    }
    // SAFETY: forwarded contract.
    unsafe { waitv_general(waiters, nr_futexes, flags, timeout, clockid) }
}

/// [`ufutex_waitv`] of one entry with a timeout: the failing one answered here
/// ([`validate::one_plain_mismatch_timed`]), else the general way.
///
/// # Safety
/// As [`ufutex_waitv`].
#[inline(never)]
unsafe extern "C" fn waitv_lone_timed(
    waiters: *mut UfutexWaitv,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    if validate::one_plain_mismatch_timed(waiters as usize, timeout as usize, clockid) {
        return super::failed(Errno::EAGAIN);
    }
    // SAFETY: forwarded contract (the arguments as `ufutex_waitv` found them).
    unsafe { waitv_general(waiters, 1, 0, timeout, clockid) }
}

/// [`ufutex_waitv`] for every call but the failing one its shortcut answers.
///
/// # Safety
/// As [`ufutex_waitv`].
#[inline(never)]
unsafe extern "C" fn waitv_general(
    waiters: *mut UfutexWaitv,
    nr_futexes: c_uint,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { waitv_with(waiters, nr_futexes, flags, timeout, clockid, Wakers::Ufutex) }
}

/// Whether a waitv is of one entry (not NULL), with no flags: the call whose failure its
/// timeout and its entry alone can tell ([`validate::one_plain_mismatch_timed`];
/// [`validate::one_plain_mismatch`] without a timeout), as the kernel checks those arguments,
/// then the timeout, before it reads the entry (a NULL array is `EINVAL`, not a read).
#[inline(always)]
fn lone(waiters: *mut UfutexWaitv, nr_futexes: c_uint, flags: c_uint) -> bool {
    (flags as usize | (nr_futexes ^ 1) as usize) == 0 && !waiters.is_null()
}

/// [`ufutex_waitv`] for the preload library. The entries' 32-bit words are also woken by the
/// kernel's own wakes, as the wait of [`preload_wait`] is (such a wake ends the call with that
/// entry's index). And while process-shared words are refused (the preload library's default,
/// which leaves them to the kernel), a vector that mixes them with private words is still taken:
/// the private words wait here, the shared ones in the kernel, the thread asleep on all of them
/// (`waitv::AlsoKernel`); so a wake of either kind reaches it. A vector of shared words only, or
/// one whose shared words the kernel could not watch (not 32-bit, NUMA, or no `futex_waitv`),
/// is refused whole (`EOPNOTSUPP`) before anything is read.
///
/// # Safety
/// As [`ufutex_waitv`].
#[doc(hidden)]
pub unsafe fn preload_waitv(
    waiters: *mut UfutexWaitv,
    nr_futexes: c_uint,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    if lone(waiters, nr_futexes, flags)
        && validate::one_plain_mismatch_timed(waiters as usize, timeout as usize, clockid)
    {
        return super::failed(Errno::EAGAIN);
    }
    // SAFETY: forwarded contract.
    unsafe { waitv_with(waiters, nr_futexes, flags, timeout, clockid, Wakers::AlsoKernel) }
}

/// # Safety
/// As [`ufutex_waitv`].
#[inline(always)]
unsafe fn waitv_with(
    waiters: *mut UfutexWaitv,
    nr_futexes: c_uint,
    flags: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
    wakers: Wakers,
) -> c_long {
    entry(|| {
        if flags != 0 {
            return Err(Errno::EINVAL);
        }
        if nr_futexes == 0 || nr_futexes > UFUTEX_WAITV_MAX || waiters.is_null() {
            return Err(Errno::EINVAL);
        }
        let timeout = validate::timeout(timeout as usize, clockid)?;
        let (ptr, n) = (waiters as usize, nr_futexes as usize);
        // SAFETY: this call's contract: memory found mapped stays mapped until it returns, and
        // `words` is dropped before it does.
        let mut words = unsafe { fault::ReadPages::new() };
        // Every entry plain (a private word without a node): checked and compared in one pass,
        // allocating nothing; a wait that goes on takes a second pass that keeps the entries.
        match validate::plain_waitv_compare(ptr, n, &mut words) {
            Some(Err(e)) => Err(e),
            Some(Ok(())) => match waitv_plain(ptr, n, &mut words, timeout, wakers) {
                Some(r) => r,
                None => waitv_any(ptr, n, &mut words, timeout, wakers),
            },
            None => waitv_any(ptr, n, &mut words, timeout, wakers),
        }
    })
}

/// [`ufutex_waitv`] of an array found plain and matching: read, checked and compared again
/// (the caller may have changed it meanwhile), keeping the entries this time, then the wait.
/// `None` if an entry is no longer plain.
#[inline(never)]
fn waitv_plain(
    ptr: usize,
    n: usize,
    words: &mut fault::ReadPages,
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Option<Result<c_long, Errno>> {
    let mut entries = Vec::new();
    if entries.try_reserve_exact(n).is_err() {
        return Some(Err(Errno::ENOMEM));
    }
    let checked = validate::plain_waitv(ptr, n, words, |addr, size, v| {
        // SAFETY: `addr` is aligned to `size` and its word just read through `words`; the
        // caller keeps it mapped for the call (this module's contract).
        let word = unsafe { WordRef::from_raw(addr, size) };
        entries.push(WaitEntry::from_raw(word, v, crate::MATCH_ANY));
    })?;
    let also = AlsoKernel { own: wakers == Wakers::AlsoKernel, ..AlsoKernel::default() };
    Some(checked.and_then(|()| Ok(try_waitv_watching(default_domain().tables(), &entries, &also, timeout)? as c_long)))
}

/// [`ufutex_waitv`] of any array: parsed, then every key (alignment, NULL, support), then the
/// values in index order, as the kernel's `futex_wait_multiple_setup`.
#[inline(never)]
pub(super) fn waitv_any(
    ptr: usize,
    n: usize,
    words: &mut fault::ReadPages,
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Result<c_long, Errno> {
    let parsed = validate::parse_waitv(ptr, n)?;
    // Process-shared words that this process leaves to the kernel, beside private ones (see
    // `preload_waitv`): checked as the kernel would, then watched there.
    let beside_kernel =
        wakers == Wakers::AlsoKernel && validate::shared_refused() && parsed.iter().any(|(_, f)| !f.private);
    if beside_kernel && !kernel_can_watch(&parsed) {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut addrs = Vec::new();
    addrs.try_reserve_exact(parsed.len()).map_err(|_| Errno::ENOMEM)?;
    // NUMA/MPOL entries' nodes, if any entry has one.
    let mut node_keys: Vec<Option<Key>> = Vec::new();
    let any_node = parsed.iter().any(|(_, f)| f.numa || f.mpol);
    if any_node {
        node_keys.try_reserve_exact(parsed.len()).map_err(|_| Errno::ENOMEM)?;
    }
    // Each entry's key in index order, as the kernel's `get_futex_key` makes it: the address,
    // then the node (its node word read), then a shared word's page.
    for (e, f) in &parsed {
        let addr = if beside_kernel { validate::placed(e.uaddr, *f)? } else { validate::address(e.uaddr, *f)? };
        if any_node {
            node_keys.push(if f.numa || f.mpol { Some(numa_key_of(addr, *f, Purpose::Queue)?) } else { None });
        }
        if !f.private {
            // The kernel looks a shared word's page up while making its key (EFAULT).
            words.read(addr, f.size)?;
            if beside_kernel {
                // And it may refuse the page (read-only private memory, where nobody can
                // wait: `EFAULT`), before it compares any value.
                shared::kernel::keys(addr).map_err(Errno)?;
            }
        }
        addrs.push(addr);
    }
    let mut entries = Vec::new();
    entries.try_reserve_exact(parsed.len()).map_err(|_| Errno::ENOMEM)?;
    for (i, ((e, f), &addr)) in parsed.iter().zip(&addrs).enumerate() {
        if words.read(addr, f.size)? != e.val {
            return Err(Errno::EAGAIN);
        }
        let key = node_keys.get(i).copied().flatten().unwrap_or(Key::private(addr));
        // SAFETY: `addr` is aligned and was just read through `words`; the caller keeps it
        // mapped.
        let word = unsafe { loadable(addr, *f) };
        entries.push(WaitEntry::from_raw(word, e.val, crate::MATCH_ANY).with_key(key));
    }
    if beside_kernel {
        return waitv_beside_kernel(&parsed, &entries, timeout);
    }
    if parsed.iter().all(|(_, f)| f.private) {
        let also = AlsoKernel { own: wakers == Wakers::AlsoKernel, ..AlsoKernel::default() };
        return Ok(try_waitv_watching(default_domain().tables(), &entries, &also, timeout)? as c_long);
    }
    waitv_shared(&parsed, &entries, timeout, wakers)
}

/// Whether the kernel can watch every process-shared entry of a vector that has private ones too
/// (`futex_waitv` sleeps on 32-bit words, by address: no NUMA node word).
fn kernel_can_watch(parsed: &[(UfutexWaitv, WordFlags)]) -> bool {
    crate::parker::can_watch()
        && parsed.iter().any(|(_, f)| f.private)
        && parsed.iter().all(|(_, f)| f.private || (f.size == Size::U32 && !f.numa && !f.mpol))
}

/// [`ufutex_waitv`] of private entries queued here and process-shared ones left to the kernel
/// (see [`preload_waitv`]).
#[inline(never)]
fn waitv_beside_kernel(
    parsed: &[(UfutexWaitv, WordFlags)],
    entries: &[WaitEntry<'_>],
    timeout: Option<Timeout>,
) -> Result<c_long, Errno> {
    let (mut private, mut index, mut kernel_only) = (Vec::new(), Vec::new(), Vec::new());
    private.try_reserve_exact(entries.len()).map_err(|_| Errno::ENOMEM)?;
    index.try_reserve_exact(entries.len()).map_err(|_| Errno::ENOMEM)?;
    kernel_only.try_reserve_exact(entries.len()).map_err(|_| Errno::ENOMEM)?;
    for (i, ((_, f), e)) in parsed.iter().zip(entries).enumerate() {
        if f.private {
            private.push(*e);
            index.push(i);
        } else {
            let (word, expected, _) = e.parts();
            kernel_only.push((i, word, expected as u32)); // a 32-bit word (`kernel_can_watch`)
        }
    }
    let also = AlsoKernel { own: true, index: Some(&index), kernel_only: &kernel_only };
    Ok(try_waitv_watching(default_domain().tables(), &private, &also, timeout)? as c_long)
}

/// [`ufutex_waitv`] with process-shared entries, all of them or some.
#[inline(never)]
fn waitv_shared(
    parsed: &[(UfutexWaitv, WordFlags)],
    entries: &[WaitEntry<'_>],
    timeout: Option<Timeout>,
    wakers: Wakers,
) -> Result<c_long, Errno> {
    let mut private = Vec::new();
    let mut shared = Vec::new();
    for (i, ((_, f), e)) in parsed.iter().zip(entries).enumerate() {
        if f.private {
            private.push((i, *e));
        } else {
            let (word, expected, mask) = e.parts();
            shared.push((i, shared::Entry { word, expected, mask }));
        }
    }
    let i = if private.is_empty() {
        let v: Vec<shared::Entry> = shared.iter().map(|&(_, e)| e).collect();
        shared::waitv_words(&v, timeout.as_ref(), wakers == Wakers::AlsoKernel)?
    } else {
        shared::waitv_mixed(
            default_domain().tables(),
            &private,
            &shared,
            entries.len(),
            timeout,
            wakers == Wakers::AlsoKernel,
        )?
    };
    Ok(i as c_long)
}

/// Wake some waiters of `waiters[0]` and move others to `waiters[1]`: the `futex_requeue`
/// syscall. See `include/ufutex.h`.
///
/// # Safety
/// See the module documentation: memory found mapped stays mapped for the call.
#[no_mangle]
pub unsafe extern "C" fn ufutex_requeue(
    waiters: *mut UfutexWaitv,
    flags: c_uint,
    nr_wake: c_int,
    nr_requeue: c_int,
) -> c_long {
    entry(|| {
        if flags != 0 || waiters.is_null() {
            return Err(Errno::EINVAL);
        }
        let [(src, fs), (dst, fd)] = validate::parse_pair(waiters as usize)?;
        if src.flags != dst.flags {
            return Err(Errno::EINVAL);
        }
        let (nr_wake, nr_requeue) = (validate::count(nr_wake)?, validate::count(nr_requeue)?);
        let from = validate::address(src.uaddr, fs)?;
        if !fs.private {
            // Each shared key is made with its page looked up (EFAULT), source first.
            validate::current(from, fs.size)?;
        }
        let to = validate::nonnull(validate::address(dst.uaddr, fd)?)?;
        if !fd.private {
            validate::current(to, fd.size)?;
        }
        if !fs.private {
            // SAFETY: forwarded contract.
            return unsafe { requeue_shared((from, fs, Some(src.val)), (to, fd), nr_wake, nr_requeue) };
        }
        let (k1, k2) = (key_of(from, fs, Purpose::Queue)?, key_of(to, fd, Purpose::Queue)?);
        // SAFETY: `from` is aligned; the caller keeps it mapped (the C ABI's contract).
        let from = unsafe { holding(from, fs, src.val) }?;
        Ok(requeue_keys(default_domain().tables(), k1, k2, Some((from, src.val)), nr_wake, nr_requeue, Pays::Waiter)?
            as c_long)
    })
}

/// A validated process-shared requeue: node words resolved as for private words, the source
/// value compared (if `val`: the legacy `FUTEX_REQUEUE` compares nothing), then the shared
/// table (or the kernel).
///
/// # Safety
/// See the module documentation: memory found mapped stays mapped for the call.
unsafe fn requeue_shared(
    (from, fs, val): (usize, WordFlags, Option<u64>),
    (to, fd): (usize, WordFlags),
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<c_long, Errno> {
    if fs.numa || fs.mpol {
        numa_key_of(from, fs, Purpose::Wake)?;
        numa_key_of(to, fd, Purpose::Wake)?;
    }
    let from = match val {
        // SAFETY: `from` is aligned; the caller keeps it mapped (this function's contract).
        Some(val) => unsafe { holding(from, fs, val) }?,
        // SAFETY: `from` is aligned; without a value to compare the shared table uses its
        // address only, and the kernel mode hands it to the kernel, which reads it safely.
        None => unsafe { address_only(from, fs) },
    };
    // SAFETY: `to` is aligned; the shared table uses its address only, and the kernel mode hands
    // it to the kernel, which reads it safely.
    let to = unsafe { address_only(to, fd) };
    Ok(shared::requeue_words(from, val, to, nr_wake, nr_requeue)? as c_long)
}

/// Wake waiters of two 32-bit words, the second wake decided by an operation on the second
/// word made atomically with both wakes (the legacy `FUTEX_WAKE_OP`). See `include/ufutex.h`.
///
/// # Safety
/// See the module documentation: memory found mapped stays mapped for the call.
#[no_mangle]
pub unsafe extern "C" fn ufutex_wake_op(
    uaddr1: *mut c_void,
    uaddr2: *mut c_void,
    nr1: c_int,
    nr2: c_int,
    op: c_uint,
    flags: c_uint,
) -> c_long {
    entry(|| {
        let f = validate::word_flags(flags)?;
        if f.size != Size::U32 || f.numa || f.mpol {
            return Err(Errno::EINVAL);
        }
        let (nr1, nr2) = (validate::count(nr1)?, validate::count(nr2)?);
        // The kernel takes each word's key in turn, and a shared word's key is its page's:
        // the first word's page is looked up before the second word's alignment is checked,
        // the second's (for writing) before the operation is.
        let a1 = validate::nonnull(validate::address(uaddr1 as u64, f)?)?;
        if !f.private {
            validate::current(a1, Size::U32)?;
        }
        let a2 = validate::nonnull(validate::address(uaddr2 as u64, f)?)?;
        if !f.private {
            fault::check_writable(a2, Size::U32)?;
        }
        let encoded = op;
        let op = WakeOp::decode(op).check()?;
        if f.private {
            fault::check_writable(a2, Size::U32)?; // (a shared one's, above)
        }
        // SAFETY: `a2` is aligned to 4, mapped and writable (checked above), and the caller
        // keeps it mapped for the call (module contract); an AtomicU32 has the layout of a u32.
        let word2 = unsafe { &*(a2 as *const std::sync::atomic::AtomicU32) };
        if !f.private {
            return Ok(shared::wake_op_words(a1, a2, nr1, nr2, (encoded, Errno), || op.apply(word2))? as c_long);
        }
        let (k1, k2) = (Key::private(a1), Key::private(a2));
        Ok(wake_op(default_domain().tables(), k1, k2, nr1, nr2, || op.apply(word2))? as c_long)
    })
}

/// Promise that a shared mapping stays until unregistered: [`shared::register_mapping`]. See
/// `include/ufutex.h`.
#[no_mangle]
pub extern "C" fn ufutex_shared_register(addr: *const c_void, len: libc::size_t) -> c_long {
    entry(|| Ok(shared::register_mapping(addr.cast(), len).map(|()| 0)?))
}

/// End a registration: [`shared::unregister_mapping`]. See `include/ufutex.h`.
#[no_mangle]
pub extern "C" fn ufutex_shared_unregister(addr: *const c_void) -> c_long {
    entry(|| Ok(shared::unregister_mapping(addr.cast()).map(|()| 0)?))
}

/// Size the process default table: the analogue of `prctl(PR_FUTEX_HASH, SET_SLOTS)`.
#[no_mangle]
pub extern "C" fn ufutex_hash_set_slots(slots: c_ulong, flags: c_ulong) -> c_long {
    entry(|| {
        if flags != 0 {
            return Err(Errno::EINVAL);
        }
        let slots = match slots {
            0 => Slots::Large,
            n => Slots::Fixed(usize::try_from(n).map_err(|_| Errno::ENOMEM)?),
        };
        default_domain().set_slots(slots).map_err(|e| Errno(e.raw_os_error().unwrap_or(libc::EINVAL)))?;
        Ok(0)
    })
}

/// The process default table's slot count, 0 for the large fixed table: the analogue of
/// `prctl(PR_FUTEX_HASH, GET_SLOTS)`.
#[no_mangle]
pub extern "C" fn ufutex_hash_get_slots() -> c_long {
    entry(|| {
        let d = default_domain();
        Ok(if d.policy() == Slots::Large { 0 } else { d.slots() as c_long })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_einval_not_an_unwind_into_c() {
        let r = entry(|| panic!("a bug in the core"));
        assert_eq!(r, -1);
        // SAFETY: reading this thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EINVAL);
        assert_eq!(entry(|| Ok(7)), 7);
    }

    #[test]
    fn shared_register_errors_are_errnos() {
        let errno = || {
            // SAFETY: reading this thread's errno.
            unsafe { *libc::__errno_location() }
        };
        let heap = [0u8; 64];
        assert_eq!(ufutex_shared_register(heap.as_ptr().cast(), 64), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(ufutex_shared_register(std::ptr::null(), 64), -1);
        assert_eq!(errno(), libc::EFAULT);
        assert_eq!(ufutex_shared_unregister(heap.as_ptr().cast()), -1);
        assert_eq!(errno(), libc::EINVAL);
        // SAFETY: a fresh shared anonymous mapping, unmapped after its registration ends.
        unsafe {
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let p = libc::mmap(std::ptr::null_mut(), 4096, rw, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0);
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(ufutex_shared_register(p, 4096), 0);
            assert_eq!(ufutex_shared_register(p, 4096), -1);
            assert_eq!(errno(), libc::EINVAL);
            assert_eq!(ufutex_shared_unregister(p), 0);
            libc::munmap(p, 4096);
        }
    }

    #[test]
    fn hash_slots_validation() {
        assert_eq!(ufutex_hash_set_slots(64, 1), -1);
        assert_eq!(ufutex_hash_set_slots(3, 0), -1);
        assert_eq!(ufutex_hash_set_slots(1, 0), -1);
        // SAFETY: reading this thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EINVAL);
        assert_eq!(ufutex_hash_set_slots(1 << 40, 0), -1);
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::ENOMEM);
        assert!(ufutex_hash_get_slots() >= 2); // the default domain is never made Large here
    }
}
