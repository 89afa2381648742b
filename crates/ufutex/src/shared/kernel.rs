//! `UFUTEX_SHARED=kernel`: process-shared words go to the kernel's futex on the word itself.
//!
//! In this mode a word without `UFUTEX_PRIVATE` never enters ufutex's tables: every operation
//! is one futex system call on the word's own memory, *without* `FUTEX2_PRIVATE`, so the kernel
//! keys it by the mapped object (inode and offset, or mm and address for private memory). It
//! therefore meets, in both directions, processes that call the futex system calls on the same
//! word directly, and waiters that map the word at different addresses.
//!
//! The kernel's futex is 32 bits wide only. How each size maps onto it:
//!
//! | size | wait | wake | exact? |
//! |---|---|---|---|
//! | U32 | `futex_wait` (455) on the word, the caller's mask as bitset | `futex_wake` (454) | yes |
//! | U8, U16 ("lanes") | `futex_wait` on the containing aligned u32, expecting its whole value, bitset = the mask moved onto the lane's bits; retried when only a neighbour changed | `futex_wake` on the u32 with that bitset | among words of the same size, yes |
//! | U64 | `futex_waitv` (449) on both halves | `futex_wake` on the half at the word's address | for the match-any mask only; other masks `EINVAL` |
//!
//! `requeue` is U32 → U32 only (`futex_requeue`, 456, or the legacy `FUTEX_REQUEUE` when no
//! value is compared); `waitv` takes U32 entries only, at most 128 (the kernel's limit).
//! Everything the kernel cannot do exactly returns [`SharedError::Invalid`] rather than a count
//! or a wake that differs from the other mode's.
//!
//! The one inexactness: words that *overlap* meet each other. A lane waiter sits on the kernel
//! futex of its containing u32, so a U32 wait or wake on that u32 (from ufutex or from a process
//! calling the kernel directly) meets the lanes whose bits its mask covers, and a U16 word meets
//! the two U8 words inside it; likewise a U32 word at either half of a U64 meets the U64's
//! waiters. The kernel itself has no 8, 16 or 64-bit futex to tell them apart. Words that do
//! not overlap never meet.
//!
//! Where the futex2 calls 454–456 do not exist (`ENOSYS`: kernels before 6.7, some sandboxes)
//! the legacy `FUTEX_WAIT_BITSET`, `FUTEX_WAKE_BITSET` and `FUTEX_CMP_REQUEUE` (shared) take
//! over with the same meaning; the legacy wait returns `EINTR` even for `SA_RESTART` handlers.
//! Without `futex_waitv` (before 5.16) U64 waits and `waitv` return
//! [`SharedError::Unsupported`].
//!
//! Memory model: the words live in memory shared with other processes and with the kernel,
//! outside any one program's memory model. A lane's containing u32 is read with a 32-bit atomic
//! load while other processes write its bytes with 8 or 16-bit stores; on the hardware this
//! runs on an aligned load is single-copy atomic, and it is exactly the read the kernel's own
//! futex compare makes. Under `cfg(ufutex_loom)` the words are loom objects that the kernel
//! cannot read, so every operation returns [`SharedError::Unsupported`].

use super::SharedError;
use crate::deadline::Timeout;
use crate::word::{Size, WordRef};
use std::sync::atomic::{AtomicBool, Ordering};

const SYS_FUTEX_WAITV: libc::c_long = 449;
const SYS_FUTEX_WAKE: libc::c_long = 454;
const SYS_FUTEX_WAIT: libc::c_long = 455;
const SYS_FUTEX_REQUEUE: libc::c_long = 456;
/// A 32-bit futex; with no `FUTEX2_PRIVATE` (128) beside it: the words are process-shared.
const FUTEX2_SIZE_U32: u32 = 0x02;
/// The kernel's `FUTEX_WAITV_MAX`.
const WAITV_MAX: usize = 128;
/// The bitset that matches every waiter (`FUTEX_BITSET_MATCH_ANY`).
const MATCH_ANY: u32 = u32::MAX;

/// Whether one of the futex2 calls 454–456 answered `ENOSYS`: then the legacy calls are used.
static NO_FUTEX2: AtomicBool = AtomicBool::new(false);

/// One entry of `futex_waitv` and `futex_requeue` (the kernel's `struct futex_waitv`).
#[repr(C)]
#[derive(Clone, Copy)]
struct WaitvEntry {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

const _: () = assert!(std::mem::size_of::<WaitvEntry>() == 24);

impl WaitvEntry {
    const EMPTY: WaitvEntry = WaitvEntry { val: 0, uaddr: 0, flags: 0, reserved: 0 };

    /// A shared 32-bit futex at `addr` expected to hold `val`.
    fn shared_u32(addr: usize, val: u32) -> WaitvEntry {
        WaitvEntry { val: u64::from(val), uaddr: addr as u64, flags: FUTEX2_SIZE_U32, reserved: 0 }
    }
}

/// The match-any mask of the Rust API (`u64::MAX`, whatever the word's size) as the word's own
/// all-ones, which is what the C ABI passes for it; any other mask as it is.
fn any_at(size: Size, mask: u64) -> u64 {
    if mask == u64::MAX {
        size.max()
    } else {
        mask
    }
}

/// Sleep while `word` holds `expected`, until a wake whose mask meets `mask` (see the module
/// docs for what each size meets), or `timeout` (absolute) passes.
///
/// The value is first compared in userspace: a mismatch returns without a system call.
///
/// # Errors
/// - [`SharedError::WouldBlock`]: the word did not hold `expected`;
/// - [`SharedError::TimedOut`], [`SharedError::Interrupted`]: as the kernel's `futex_wait`;
/// - [`SharedError::Invalid`]: `expected` or `mask` wider than the word (`u64::MAX`, the match-any
///   mask, fits every size), a mask of 0, or — for U64 — any mask but `u64::MAX`: `futex_waitv`, the only kernel wait on 64 bits, has no
///   bitset, so a narrower mask could not be honoured exactly;
/// - [`SharedError::Unsupported`]: a U64 wait where the kernel has no `futex_waitv`, or a loom
///   build;
/// - [`SharedError::Fault`]: the kernel could not use the word (e.g. read-only private memory).
pub(crate) fn wait(word: WordRef, expected: u64, mask: u64, timeout: Option<&Timeout>) -> Result<(), SharedError> {
    kernel_reachable()?;
    let mask = any_at(word.size(), mask);
    fits(word.size(), expected)?;
    fits(word.size(), mask)?;
    if mask == 0 {
        return Err(SharedError::Invalid); // the kernel's futex_wait: a bitset of 0
    }
    match word.size() {
        Size::U32 => {
            if word.load() != expected {
                return Err(SharedError::WouldBlock);
            }
            sys_wait(word.addr(), expected as u32, mask as u32, timeout).map_err(SharedError::from_errno)
        }
        Size::U8 | Size::U16 => wait_lane(Lane::of(word), expected, mask, timeout),
        Size::U64 => wait_u64(word, expected, mask, timeout),
    }
}

/// A lane's wait: the kernel's futex on the containing u32, retried while only the other lanes
/// of that u32 change (the kernel compares all 32 bits; our value is only the lane's). Each
/// retry keeps the same absolute deadline; neighbours that change without pause keep this
/// waiter retrying (one system call each) until they stop or the deadline passes.
fn wait_lane(lane: Lane, expected: u64, mask: u64, timeout: Option<&Timeout>) -> Result<(), SharedError> {
    let bitset = lane.bitset(mask)?;
    loop {
        let whole = lane.load();
        if lane.value(whole) != expected {
            return Err(SharedError::WouldBlock);
        }
        match sys_wait(lane.container, whole, bitset, timeout) {
            Ok(()) => return Ok(()),
            // The u32 changed between our load and the kernel's compare: look again. The lane
            // is compared before the deadline, as the kernel compares before it sleeps.
            Err(libc::EAGAIN) => {
                if lane.value(lane.load()) == expected && timeout.is_some_and(|t| t.expired()) {
                    return Err(SharedError::TimedOut);
                }
            }
            Err(e) => return Err(SharedError::from_errno(e)),
        }
    }
}

/// A U64 wait: `futex_waitv` on both 32-bit halves, each expecting its half of `expected`.
///
/// No lost wakeup: the kernel queues on the first half before it compares the second, and
/// [`wake`] wakes through the first half, so a store of the whole word that the compares miss
/// is followed by a wake that finds this waiter queued.
fn wait_u64(word: WordRef, expected: u64, mask: u64, timeout: Option<&Timeout>) -> Result<(), SharedError> {
    if mask != u64::MAX {
        return Err(SharedError::Invalid); // futex_waitv has no bitset
    }
    if word.load() != expected {
        return Err(SharedError::WouldBlock);
    }
    let [first, second] = halves(expected);
    let entries = [WaitvEntry::shared_u32(word.addr(), first), WaitvEntry::shared_u32(word.addr() + 4, second)];
    sys_waitv(&entries, timeout).map(drop).map_err(SharedError::from_errno)
}

/// Wake up to `n` waiters of `word` whose mask meets `mask`; returns how many were woken.
///
/// `n == 0` wakes nobody and makes no system call (the legacy fallback would wake one).
///
/// # Errors
/// - [`SharedError::Invalid`]: `mask` wider than the word, 0, or — for U64 — anything but
///   `u64::MAX` (U64 waiters sleep in `futex_waitv`, which has no bitset);
/// - [`SharedError::Fault`]: the kernel could not use the word;
/// - [`SharedError::Unsupported`]: a loom build.
pub(crate) fn wake(word: WordRef, n: usize, mask: u64) -> Result<usize, SharedError> {
    let mask = any_at(word.size(), mask);
    kernel_reachable()?;
    fits(word.size(), mask)?;
    if mask == 0 {
        return Err(SharedError::Invalid);
    }
    let (addr, bitset) = match word.size() {
        Size::U32 => (word.addr(), mask as u32),
        Size::U8 | Size::U16 => {
            let lane = Lane::of(word);
            (lane.container, lane.bitset(mask)?)
        }
        Size::U64 if mask == u64::MAX => (word.addr(), MATCH_ANY),
        Size::U64 => return Err(SharedError::Invalid),
    };
    if n == 0 {
        return Ok(0);
    }
    sys_wake(addr, bitset, n).map_err(SharedError::from_errno)
}

/// Wake up to `nr_wake` waiters of `from` and move up to `nr_requeue` more onto `to`; returns
/// woken + requeued, as the kernel does. With `Some(v)`, only if `from` holds `v`
/// (`futex_requeue`, the old `FUTEX_CMP_REQUEUE`); with `None`, unconditionally (the legacy
/// `FUTEX_REQUEUE`: `futex_requeue` always compares, and a value loaded here to feed it could
/// change before the kernel's compare and fail a call that compares nothing).
///
/// # Errors
/// - [`SharedError::Invalid`]: either word is not a U32. The kernel moves waiters between
///   32-bit futexes only; a lane or U64 waiter moved there would then be met by its new
///   neighbours' wakes and keep its old bitset, so no count would be exact. Also `expected`
///   wider than 32 bits;
/// - [`SharedError::WouldBlock`]: `from` did not hold `expected`;
/// - [`SharedError::Fault`]: the kernel could not use a word;
/// - [`SharedError::Unsupported`]: a loom build.
pub(crate) fn requeue(
    from: WordRef,
    expected: Option<u64>,
    to: WordRef,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, SharedError> {
    kernel_reachable()?;
    if from.size() != Size::U32 || to.size() != Size::U32 {
        return Err(SharedError::Invalid);
    }
    let cmp = match expected {
        Some(v) => {
            fits(Size::U32, v)?;
            if from.load() != v {
                return Err(SharedError::WouldBlock);
            }
            Some(v as u32)
        }
        None => None,
    };
    sys_requeue(from.addr(), to.addr(), cmp, nr_wake, nr_requeue).map_err(SharedError::from_errno)
}

/// Sleep while every word of `entries` holds its expected value, until one of them is woken or
/// `timeout` passes; returns the index of the woken entry (the kernel's `futex_waitv`, every
/// entry shared). The values are first compared in userspace, in order.
///
/// # Errors
/// - [`SharedError::Invalid`]: no entries, more than 128 (the kernel's limit), a value wider
///   than 32 bits, or an entry that is not a U32. The kernel's `futex_waitv` has no per-entry
///   bitset, so a lane there would be woken by its neighbours' wakes, and a U64 would need two
///   entries of which either's wake counts;
/// - [`SharedError::WouldBlock`]: an entry did not hold its value;
/// - [`SharedError::TimedOut`], [`SharedError::Interrupted`]: as the kernel's;
/// - [`SharedError::Unsupported`]: the kernel has no `futex_waitv`, or a loom build.
pub(crate) fn waitv(entries: &[(WordRef, u64)], timeout: Option<&Timeout>) -> Result<usize, SharedError> {
    kernel_reachable()?;
    if entries.is_empty() || entries.len() > WAITV_MAX {
        return Err(SharedError::Invalid);
    }
    for &(word, expected) in entries {
        if word.size() != Size::U32 {
            return Err(SharedError::Invalid);
        }
        fits(Size::U32, expected)?;
    }
    if entries.iter().any(|&(word, expected)| word.load() != expected) {
        return Err(SharedError::WouldBlock);
    }
    let mut v = [WaitvEntry::EMPTY; WAITV_MAX];
    for (e, &(word, expected)) in v.iter_mut().zip(entries) {
        *e = WaitvEntry::shared_u32(word.addr(), expected as u32);
    }
    sys_waitv(&v[..entries.len()], timeout).map_err(SharedError::from_errno)
}

/// A U8 or U16 word as its bits in the containing aligned u32, which the kernel's futex keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lane {
    /// The address of the containing u32 (`addr & !3`).
    container: usize,
    /// Where the lane's bits start in the u32's value.
    shift: u32,
    /// The lane's bits, unshifted (`0xFF` or `0xFFFF`).
    bits: u32,
}

impl Lane {
    /// The lane of a U8 or U16 word.
    fn of(word: WordRef) -> Lane {
        debug_assert!(matches!(word.size(), Size::U8 | Size::U16));
        let bytes = word.size().bytes();
        let offset = word.addr() & 3;
        // The byte at `offset` holds value bits 8*offset.. on little-endian, counted from the
        // top on big-endian.
        let first_byte = if cfg!(target_endian = "little") { offset } else { 4 - offset - bytes };
        Lane { container: word.addr() & !3, shift: 8 * first_byte as u32, bits: word.size().max() as u32 }
    }

    /// The lane's value within `whole`, a value of the containing u32.
    fn value(self, whole: u32) -> u64 {
        u64::from((whole >> self.shift) & self.bits)
    }

    /// The kernel bitset for a lane mask: the mask moved onto the lane's bits, so that waiters
    /// and wakers of other lanes of the same u32 never share a bit.
    fn bitset(self, mask: u64) -> Result<u32, SharedError> {
        let bitset = ((mask & u64::from(self.bits)) as u32) << self.shift;
        if bitset == 0 {
            return Err(SharedError::Invalid); // nothing of the mask is in the lane: matches nobody
        }
        Ok(bitset)
    }

    /// Load the containing u32.
    fn load(self) -> u32 {
        // SAFETY:
        // - `container` is 4-aligned by construction;
        // - it is mapped and readable: it lies in the same page as the lane's word (pages are
        //   4-aligned multiples of 4 bytes), which the caller's `WordRef` guarantees is readable
        //   for the whole operation;
        // - not under loom (`kernel_reachable` returned first), so the memory is plain memory
        //   the hardware loads atomically; other processes' narrower stores to it are outside
        //   this program's memory model (see the module docs).
        let whole = unsafe { WordRef::from_raw(self.container, Size::U32) };
        whole.load() as u32
    }
}

/// The two 32-bit halves of a U64 value, in address order (first at the word's address).
fn halves(v: u64) -> [u32; 2] {
    let b = v.to_ne_bytes();
    [u32::from_ne_bytes([b[0], b[1], b[2], b[3]]), u32::from_ne_bytes([b[4], b[5], b[6], b[7]])]
}

/// A value or mask wider than the word → `Invalid` (the kernel's `futex_validate_input`).
fn fits(size: Size, v: u64) -> Result<(), SharedError> {
    if v > size.max() {
        Err(SharedError::Invalid)
    } else {
        Ok(())
    }
}

/// `Unsupported` under loom, whose atomics are not memory the kernel can read.
fn kernel_reachable() -> Result<(), SharedError> {
    if cfg!(ufutex_loom) {
        Err(SharedError::Unsupported)
    } else {
        Ok(())
    }
}

/// A kernel count: an `int`. More than `i32::MAX` tasks cannot exist (pids stop at 2^22), so
/// clamping never changes how many are woken or moved.
fn kernel_count(n: usize) -> libc::c_int {
    n.min(i32::MAX as usize) as libc::c_int
}

/// The thread's errno after a failed system call.
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A system call's result: the non-negative return, or the errno.
fn result(r: libc::c_long) -> Result<usize, i32> {
    usize::try_from(r).map_err(|_| errno())
}

/// The timespec and clock a timeout hands the kernel (none: no deadline, the clock unused).
fn kernel_timeout(timeout: Option<&Timeout>) -> (Option<libc::timespec>, libc::clockid_t) {
    (timeout.map(|t| t.at().to_libc()), timeout.map_or(libc::CLOCK_MONOTONIC, |t| t.clock.id()))
}

/// Whether a futex2 call's answer means it does not exist; remembers it for every later call.
fn futex2_missing(r: &Result<usize, i32>) -> bool {
    let missing = *r == Err(libc::ENOSYS);
    if missing {
        // Relaxed: a cached answer; a thread that misses it makes one more ENOSYS call.
        NO_FUTEX2.store(true, Ordering::Relaxed);
    }
    missing
}

/// The kernel's shared wait on the u32 at `addr`: sleep while it holds `val`, until a wake
/// whose bitset meets `bitset`, or the absolute `timeout`. `Ok` only when woken.
fn sys_wait(addr: usize, val: u32, bitset: u32, timeout: Option<&Timeout>) -> Result<(), i32> {
    let (ts, clock) = kernel_timeout(timeout);
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    // Relaxed: a cached answer (see `futex2_missing`).
    if !NO_FUTEX2.load(Ordering::Relaxed) {
        // SAFETY:
        // - futex_wait(uaddr, val, mask, flags, timeout, clockid) only reads `uaddr` (checked by
        //   the kernel itself: an unusable address is EFAULT, never a userspace access) and
        //   `ts_ptr`, which is null or points to `ts`, alive until the call returns.
        let r = result(unsafe {
            libc::syscall(
                SYS_FUTEX_WAIT,
                addr,
                libc::c_ulong::from(val),
                libc::c_ulong::from(bitset),
                FUTEX2_SIZE_U32,
                ts_ptr,
                clock,
            )
        });
        if !futex2_missing(&r) {
            return r.map(drop);
        }
    }
    legacy_wait(addr, val, bitset, ts.as_ref(), clock)
}

/// The legacy `FUTEX_WAIT_BITSET`, shared (no `FUTEX_PRIVATE_FLAG`): [`sys_wait`] where
/// `futex_wait` does not exist; `ts` is an absolute deadline on `clock`.
fn legacy_wait(
    addr: usize,
    val: u32,
    bitset: u32,
    ts: Option<&libc::timespec>,
    clock: libc::clockid_t,
) -> Result<(), i32> {
    let ts_ptr = ts.map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    let realtime = if clock == libc::CLOCK_REALTIME { libc::FUTEX_CLOCK_REALTIME } else { 0 };
    // SAFETY:
    // - FUTEX_WAIT_BITSET reads only `addr` (kernel-checked: EFAULT if unusable) and the
    //   timespec at `ts_ptr` (null, or `ts`, borrowed for the call); it ignores uaddr2 (null).
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            addr,
            libc::FUTEX_WAIT_BITSET | realtime,
            val,
            ts_ptr,
            std::ptr::null::<u32>(),
            bitset,
        )
    };
    result(r).map(drop)
}

/// The kernel's shared wake on the u32 at `addr`: up to `n` waiters whose bitset meets
/// `bitset`; returns how many. `n > 0` (the legacy call would wake one for 0).
fn sys_wake(addr: usize, bitset: u32, n: usize) -> Result<usize, i32> {
    debug_assert!(n > 0);
    let nr = kernel_count(n);
    // Relaxed: a cached answer (see `futex2_missing`).
    if !NO_FUTEX2.load(Ordering::Relaxed) {
        // SAFETY:
        // - futex_wake(uaddr, mask, nr, flags) never dereferences `uaddr` in userspace: the
        //   kernel looks it up (EFAULT if unusable) and reads no other memory.
        let r =
            result(unsafe { libc::syscall(SYS_FUTEX_WAKE, addr, libc::c_ulong::from(bitset), nr, FUTEX2_SIZE_U32) });
        if !futex2_missing(&r) {
            return r;
        }
    }
    legacy_wake(addr, bitset, nr)
}

/// Whether the kernel can key the shared u32 at `addr` (aligned, mapped): a `futex_wake` of
/// nobody (a count of 0) makes the key and wakes no one; `Err(EFAULT)` for a page it refuses
/// (read-only private memory, where nobody can wait). Where `futex_wake` does not exist,
/// nothing is asked (the kernel's `futex_waitv` still fails such a word when it sleeps on it).
pub(crate) fn keys(addr: usize) -> Result<(), i32> {
    // Relaxed: a cached answer (see `futex2_missing`).
    if NO_FUTEX2.load(Ordering::Relaxed) {
        return Ok(());
    }
    // SAFETY: futex_wake with a count of 0 only makes the key of the word at `addr` (the kernel
    // looks it up, EFAULT if unusable) and wakes nobody; it reads and writes no user memory.
    let r = result(unsafe { libc::syscall(SYS_FUTEX_WAKE, addr, libc::c_ulong::from(MATCH_ANY), 0, FUTEX2_SIZE_U32) });
    if futex2_missing(&r) {
        return Ok(());
    }
    r.map(drop)
}

/// The legacy `FUTEX_WAKE_BITSET`, shared: [`sys_wake`] where `futex_wake` does not exist.
/// `nr > 0` (it wakes one for 0).
fn legacy_wake(addr: usize, bitset: u32, nr: libc::c_int) -> Result<usize, i32> {
    // SAFETY:
    // - FUTEX_WAKE_BITSET reads no userspace memory but the key of `addr`, which the kernel
    //   checks; it ignores the timeout and uaddr2 slots (null).
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            addr,
            libc::FUTEX_WAKE_BITSET,
            nr,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            bitset,
        )
    };
    result(r)
}

/// The kernel's `futex_waitv` over `entries` (1 to 128, all shared U32) with the absolute
/// `timeout`: the index of the woken entry.
fn sys_waitv(entries: &[WaitvEntry], timeout: Option<&Timeout>) -> Result<usize, i32> {
    debug_assert!(!entries.is_empty() && entries.len() <= WAITV_MAX);
    let (ts, clock) = kernel_timeout(timeout);
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    // SAFETY:
    // - futex_waitv(waiters, nr, flags, timeout, clockid) reads `entries` (alive and `nr` long:
    //   borrowed for the call) and `ts_ptr` (null or `ts`, alive), and only reads the words
    //   they name through the kernel's own checked accesses (EFAULT if unusable).
    let r =
        unsafe { libc::syscall(SYS_FUTEX_WAITV, entries.as_ptr(), entries.len() as libc::c_uint, 0, ts_ptr, clock) };
    result(r)
}

/// The kernel's shared requeue between the u32s at `from` and `to`, comparing `from` with `cmp`
/// if given; returns woken + requeued.
fn sys_requeue(from: usize, to: usize, cmp: Option<u32>, nr_wake: usize, nr_requeue: usize) -> Result<usize, i32> {
    let (nr_wake, nr_requeue) = (kernel_count(nr_wake), kernel_count(nr_requeue));
    // Relaxed: a cached answer (see `futex2_missing`).
    if let (Some(val), false) = (cmp, NO_FUTEX2.load(Ordering::Relaxed)) {
        let entries = [WaitvEntry::shared_u32(from, val), WaitvEntry::shared_u32(to, 0)];
        // SAFETY:
        // - futex_requeue(waiters, flags, nr_wake, nr_requeue) reads the two entries (alive for
        //   the call) and the words they name through the kernel's checked accesses.
        let r = result(unsafe { libc::syscall(SYS_FUTEX_REQUEUE, entries.as_ptr(), 0, nr_wake, nr_requeue) });
        if !futex2_missing(&r) {
            return r;
        }
    }
    legacy_requeue(from, to, cmp, nr_wake, nr_requeue)
}

/// The legacy `FUTEX_CMP_REQUEUE` (with `cmp`) or `FUTEX_REQUEUE` (without), shared: woken +
/// requeued.
fn legacy_requeue(
    from: usize,
    to: usize,
    cmp: Option<u32>,
    nr_wake: libc::c_int,
    nr_requeue: libc::c_int,
) -> Result<usize, i32> {
    let (op, val3) = match cmp {
        Some(val) => (libc::FUTEX_CMP_REQUEUE, val),
        None => (libc::FUTEX_REQUEUE, 0),
    };
    // SAFETY:
    // - FUTEX_(CMP_)REQUEUE takes nr_requeue in the timeout slot as an integer, never as a
    //   pointer, and reads only the two words' keys and `from`'s value, kernel-checked.
    let r = unsafe { libc::syscall(libc::SYS_futex, from, op, nr_wake, nr_requeue as libc::c_ulong, to, val3) };
    result(r)
}

/// The kernel's shared `FUTEX_WAKE_OP` on the u32s at `a` and `b`, `op` as `linux/futex.h`
/// encodes it: how many were woken. The kernel applies the operation.
///
/// # Errors
/// The kernel's errno as it is (`ENOSYS` for an unknown operation or comparison, which
/// [`SharedError`] has no name for); `EOPNOTSUPP` in a loom build.
pub(crate) fn wake_op(a: usize, b: usize, nr1: usize, nr2: usize, op: u32) -> Result<usize, i32> {
    kernel_reachable().map_err(SharedError::errno)?;
    let (nr1, nr2) = (kernel_count(nr1), kernel_count(nr2));
    // SAFETY:
    // - FUTEX_WAKE_OP takes nr2 in the timeout slot as an integer, never as a pointer; it reads
    //   both words' keys and reads and writes `b` through the kernel's checked accesses.
    let r = unsafe { libc::syscall(libc::SYS_futex, a, libc::FUTEX_WAKE_OP, nr1, nr2 as libc::c_ulong, b, op) };
    result(r)
}

#[cfg(all(test, not(ufutex_loom)))]
pub(crate) mod tests;
