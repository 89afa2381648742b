//! Argument checks, in the kernel's order, each with the kernel's errno. Pure functions over
//! integers, plus the untrusted reads of timespecs and waitv arrays (through `fault`).

use super::abi::{
    UfutexWaitv, UFUTEX_MPOL, UFUTEX_NUMA, UFUTEX_PRIVATE, UFUTEX_SIZE_MASK, UFUTEX_SIZE_U16, UFUTEX_SIZE_U32,
    UFUTEX_SIZE_U8, UFUTEX_VALID_MASK,
};
use super::fault::{read_u64, read_word};
use super::Errno;
use crate::deadline::{Clock, Timeout, Timespec};
use crate::word::Size;
use std::mem::size_of;
use std::sync::atomic::{AtomicBool, Ordering};

/// A word's flags, decoded (the kernel's `futex2_to_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordFlags {
    pub(crate) size: Size,
    pub(crate) private: bool,
    pub(crate) numa: bool,
    pub(crate) mpol: bool,
}

/// Unknown flag bits → `EINVAL`. Every size is valid here (the kernel takes only U32).
pub(crate) fn word_flags(flags: u32) -> Result<WordFlags, Errno> {
    if flags & !UFUTEX_VALID_MASK != 0 {
        return Err(Errno::EINVAL);
    }
    let size = match flags & UFUTEX_SIZE_MASK {
        UFUTEX_SIZE_U8 => Size::U8,
        UFUTEX_SIZE_U16 => Size::U16,
        UFUTEX_SIZE_U32 => Size::U32,
        _ => Size::U64, // UFUTEX_SIZE_U64: the mask leaves no other value
    };
    Ok(WordFlags {
        size,
        private: flags & UFUTEX_PRIVATE != 0,
        numa: flags & UFUTEX_NUMA != 0,
        mpol: flags & UFUTEX_MPOL != 0,
    })
}

/// A value or mask wider than the word → `EINVAL` (the kernel's `futex_validate_input`).
pub(crate) fn fits(size: Size, v: u64) -> Result<(), Errno> {
    if v > size.max() {
        Err(Errno::EINVAL)
    } else {
        Ok(())
    }
}

/// A wake mask of 0 matches nobody → `EINVAL`.
pub(crate) fn mask(m: u64) -> Result<u64, Errno> {
    if m == 0 {
        Err(Errno::EINVAL)
    } else {
        Ok(m)
    }
}

/// `nr`, `nr_wake`, `nr_requeue`: negative → `EINVAL` (later mainline's choice).
pub(crate) fn count(nr: libc::c_int) -> Result<usize, Errno> {
    usize::try_from(nr).map_err(|_| Errno::EINVAL)
}

/// An absolute timeout (`futex2_setup_timeout`): none if `ts` is null (the clock is then not
/// looked at); else the clock must be `CLOCK_MONOTONIC` or `CLOCK_REALTIME` (`EINVAL`), the
/// timespec readable (`EFAULT`) and valid: `tv_sec >= 0`, `0 <= tv_nsec < 1e9` (`EINVAL`).
#[inline(always)]
pub(crate) fn timeout(ts: usize, clockid: libc::clockid_t) -> Result<Option<Timeout>, Errno> {
    if ts == 0 {
        return Ok(None);
    }
    read_timeout(ts, clockid).map(Some)
}

#[inline(never)]
fn read_timeout(ts: usize, clockid: libc::clockid_t) -> Result<Timeout, Errno> {
    let clock = match clockid {
        libc::CLOCK_MONOTONIC => Clock::Monotonic,
        libc::CLOCK_REALTIME => Clock::Realtime,
        _ => return Err(Errno::EINVAL),
    };
    Ok(Timeout { clock, at: read_timespec(ts)? })
}

/// A relative timeout (the legacy `FUTEX_WAIT`'s): none if `ts` is null; else readable
/// (`EFAULT`) and valid (`EINVAL`) as an absolute one must be, and due that long from now on
/// CLOCK_MONOTONIC.
pub(crate) fn relative_timeout(ts: usize) -> Result<Option<Timeout>, Errno> {
    if ts == 0 {
        return Ok(None);
    }
    let rel = read_timespec(ts)?;
    let rel = std::time::Duration::new(rel.sec as u64, rel.nsec);
    Ok(Some(Timeout::from(crate::deadline::Deadline::from(rel))))
}

/// A caller's `struct __kernel_timespec` (two 64-bit fields), read without trusting it
/// (`EFAULT`) and checked: `tv_sec >= 0`, `0 <= tv_nsec < 1e9` (`EINVAL`).
fn read_timespec(ts: usize) -> Result<Timespec, Errno> {
    let sec = read_u64(ts)? as i64;
    let nsec = read_u64(ts + 8)?;
    if sec < 0 || nsec >= 1_000_000_000 {
        return Err(Errno::EINVAL);
    }
    Ok(Timespec { sec, nsec: nsec as u32 })
}

/// One past the highest user address on any 64-bit Linux (57-bit virtual addresses); a word
/// that reaches above it is in the kernel's half (the kernel's `access_ok` → `EFAULT`).
const USER_END: usize = (1 << 56) - 4096;

/// The common case, told in a few instructions: `flags` name a private word of some size with
/// no NUMA or MPOL bit, at a non-null `addr` aligned to that size, in user space, and `a` and
/// `b` (a value and a mask, or a mask twice) fit the size, the mask not 0. Its size then; `None`
/// for everything else, which the whole validation answers (for these it finds nothing wrong).
#[inline(always)]
pub(crate) fn plain_private(flags: u32, addr: usize, a: u64, mask: u64) -> Option<Size> {
    if flags & !UFUTEX_SIZE_MASK != UFUTEX_PRIVATE {
        return None;
    }
    let size = match flags & UFUTEX_SIZE_MASK {
        UFUTEX_SIZE_U8 => Size::U8,
        UFUTEX_SIZE_U16 => Size::U16,
        UFUTEX_SIZE_U32 => Size::U32,
        _ => Size::U64,
    };
    let fits = a <= size.max() && mask <= size.max() && mask != 0;
    let placed = addr != 0 && addr.is_multiple_of(size.bytes()) && addr <= USER_END - size.bytes();
    (fits && placed).then_some(size)
}

/// The word's address (`get_futex_key`): misaligned → `EINVAL` (a NUMA pair must be aligned to
/// twice the size); in the kernel's half → `EFAULT`; NULL → `EFAULT` for process-shared words
/// (the kernel faults resolving such a key), as for NUMA/MPOL words; process-shared words →
/// `EOPNOTSUPP` while [`refuse_shared`] says so (the preload library's default).
///
/// A NULL private word passes, as in the kernel: the call that reads it fails there with
/// `EFAULT` (which keeps the kernel's order in `waitv`); calls that never read the word check
/// [`nonnull`] instead.
pub(crate) fn address(addr: u64, f: WordFlags) -> Result<usize, Errno> {
    let addr = usize::try_from(addr).map_err(|_| Errno::EFAULT)?;
    let align = if f.numa { 2 * f.size.bytes() } else { f.size.bytes() };
    if addr % align != 0 {
        return Err(Errno::EINVAL);
    }
    if addr > USER_END - align {
        return Err(Errno::EFAULT);
    }
    if !f.private && (addr == 0 || SHARED_REFUSED.load(Ordering::Relaxed)) {
        return Err(if addr == 0 { Errno::EFAULT } else { Errno::EOPNOTSUPP });
    }
    if (f.numa || f.mpol) && addr == 0 {
        return Err(Errno::EFAULT); // the kernel faults reading the node word / the policy
    }
    Ok(addr)
}

/// Whether process-shared words are refused with `EOPNOTSUPP` (see [`refuse_shared`]).
static SHARED_REFUSED: AtomicBool = AtomicBool::new(false);

/// Refuse (`true`) or take (`false`, the default) process-shared words in this process: the
/// preload library refuses them so that they go to the kernel, which every process — preloaded
/// or not — meets on.
pub(crate) fn refuse_shared(refuse: bool) {
    SHARED_REFUSED.store(refuse, Ordering::Relaxed);
}

/// A word that is never read (a wake, a requeue target) must still not be NULL → `EFAULT` (our
/// contract; the kernel's private wake would not notice).
pub(crate) fn nonnull(addr: usize) -> Result<usize, Errno> {
    if addr == 0 {
        Err(Errno::EFAULT)
    } else {
        Ok(addr)
    }
}

/// The word's current value, read without trusting the address (`EFAULT` if unmapped).
#[inline(always)]
pub(crate) fn current(addr: usize, size: Size) -> Result<u64, Errno> {
    Ok(read_word(addr, size)?)
}

/// Copy and check a caller's waitv array (`futex_parse_waitv`), entry by entry: no memory for
/// it → `ENOMEM`; an entry not readable → `EFAULT`; an entry with unknown flag bits, a non-zero
/// `__reserved` or a value wider than its size → `EINVAL`. The first bad entry decides.
///
/// An 8-aligned array whose pages all read is copied with plain (atomic) loads after one
/// fault-safe read per page; any other goes entry by entry through the fault-safe reads, which
/// keeps the kernel's answer for an array that is only partly readable.
pub(crate) fn parse_waitv(ptr: usize, n: usize) -> Result<Vec<(UfutexWaitv, WordFlags)>, Errno> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
    let at = |i: usize| ptr.checked_add(i * size_of::<UfutexWaitv>()).ok_or(Errno::EFAULT);
    if ptr.is_multiple_of(8) && pages_read(ptr, n * size_of::<UfutexWaitv>()) {
        for i in 0..n {
            // SAFETY: `at(i)` is 8-aligned (so are `ptr` and the 24-byte entries) and every page
            // of the array was read just now; memory found mapped stays mapped for the call
            // (the C ABI's contract). Atomic loads: a caller writing the array meanwhile is a
            // race the kernel also tolerates, not undefined behaviour here.
            let e = unsafe { load_entry(at(i)?) };
            v.push((e, entry(&e)?));
        }
        return Ok(v);
    }
    for i in 0..n {
        let e = copy_entry(at(i)?)?;
        v.push((e, entry(&e)?));
    }
    Ok(v)
}

/// Whether every page of `[ptr, ptr + len)` (len > 0) reads: one fault-safe byte read a page.
fn pages_read(ptr: usize, len: usize) -> bool {
    const PAGE: usize = 4096;
    let Some(last) = ptr.checked_add(len - 1) else { return false };
    let mut at = ptr;
    loop {
        if read_word(at, Size::U8).is_err() {
            return false;
        }
        if at & !(PAGE - 1) == last & !(PAGE - 1) {
            return true;
        }
        at = (at & !(PAGE - 1)) + PAGE;
    }
}

/// Read one entry at `at` with three atomic loads.
///
/// # Safety
/// `at` is 8-aligned and the 24 bytes there are mapped readable for the call.
unsafe fn load_entry(at: usize) -> UfutexWaitv {
    use std::sync::atomic::{AtomicU64, Ordering};
    // SAFETY: forwarded contract: three aligned, readable u64s.
    let field = |off: usize| unsafe { AtomicU64::from_ptr((at + off) as *mut u64) }.load(Ordering::Relaxed);
    let tail = field(16).to_ne_bytes();
    UfutexWaitv {
        val: field(0),
        uaddr: field(8),
        flags: u32::from_ne_bytes([tail[0], tail[1], tail[2], tail[3]]),
        reserved: u32::from_ne_bytes([tail[4], tail[5], tail[6], tail[7]]),
    }
}

/// Read one `struct ufutex_waitv` at `at` (any alignment) without trusting it.
fn copy_entry(at: usize) -> Result<UfutexWaitv, Errno> {
    let field = |off: usize| -> Result<u64, Errno> { Ok(read_u64(at.checked_add(off).ok_or(Errno::EFAULT)?)?) };
    let (val, uaddr, tail) = (field(0)?, field(8)?, field(16)?.to_ne_bytes());
    let flags = u32::from_ne_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let reserved = u32::from_ne_bytes([tail[4], tail[5], tail[6], tail[7]]);
    Ok(UfutexWaitv { val, uaddr, flags, reserved })
}

/// One waitv entry's own fields: unknown flag bits or a non-zero `__reserved` → `EINVAL`; a
/// value wider than the size → `EINVAL`.
pub(crate) fn entry(e: &UfutexWaitv) -> Result<WordFlags, Errno> {
    if e.flags & !UFUTEX_VALID_MASK != 0 || e.reserved != 0 {
        return Err(Errno::EINVAL);
    }
    let f = word_flags(e.flags)?;
    fits(f.size, e.val)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_decode_and_reject_unknown_bits() {
        let f = word_flags(0x82).unwrap();
        assert_eq!((f.size, f.private, f.numa, f.mpol), (Size::U32, true, false, false));
        assert_eq!(word_flags(0x0f).unwrap().size, Size::U64);
        for bad in [0x10, 0x20, 0x40, 0x100, 0x8000_0000] {
            assert_eq!(word_flags(bad | 0x82), Err(Errno::EINVAL), "{bad:#x}");
        }
    }

    #[test]
    fn values_must_fit_the_size() {
        assert_eq!(fits(Size::U8, 0xff), Ok(()));
        assert_eq!(fits(Size::U8, 0x100), Err(Errno::EINVAL));
        assert_eq!(fits(Size::U16, 0x1_0000), Err(Errno::EINVAL));
        assert_eq!(fits(Size::U32, 1 << 32), Err(Errno::EINVAL));
        assert_eq!(fits(Size::U64, u64::MAX), Ok(()));
    }

    #[test]
    fn addresses_in_the_kernels_order() {
        let p = word_flags(0x82).unwrap();
        let numa = word_flags(0x86).unwrap();
        let shared = word_flags(0x02).unwrap();
        assert_eq!(address(0x1002, p), Err(Errno::EINVAL));
        assert_eq!(address(0, p), Ok(0)); // found when read, as the kernel
        assert_eq!(nonnull(0), Err(Errno::EFAULT));
        assert_eq!(address(0xffff_8000_0000_0000, p), Err(Errno::EFAULT));
        assert_eq!(address(USER_END as u64 - 4, p), Ok(USER_END - 4));
        assert_eq!(address(0x1004, numa), Err(Errno::EINVAL)); // a pair needs 8-byte alignment
        assert_eq!(address(0x1008, numa), Ok(0x1008));
        assert_eq!(address(0, numa), Err(Errno::EFAULT)); // the kernel faults on the node word
        assert_eq!(address(0x1002, shared), Err(Errno::EINVAL)); // alignment before sharing
        assert_eq!(address(0, shared), Err(Errno::EFAULT));
        assert_eq!(address(0x1000, shared), Ok(0x1000));
        assert_eq!(address(0x1000, p), Ok(0x1000));
    }

    #[test]
    fn timeouts_as_futex2_setup_timeout() {
        let ts = |sec: i64, nsec: i64| libc::timespec { tv_sec: sec, tv_nsec: nsec };
        let at = |t: &libc::timespec| t as *const libc::timespec as usize;
        assert_eq!(timeout(0, 12345), Ok(None)); // no timeout: the clock is not looked at
        let good = ts(5, 999_999_999);
        assert_eq!(timeout(at(&good), libc::CLOCK_BOOTTIME), Err(Errno::EINVAL));
        assert_eq!(timeout(8, libc::CLOCK_MONOTONIC), Err(Errno::EFAULT));
        assert_eq!(timeout(at(&ts(-1, 0)), libc::CLOCK_MONOTONIC), Err(Errno::EINVAL));
        assert_eq!(timeout(at(&ts(0, -1)), libc::CLOCK_REALTIME), Err(Errno::EINVAL));
        assert_eq!(timeout(at(&ts(0, 1_000_000_000)), libc::CLOCK_REALTIME), Err(Errno::EINVAL));
        let t = timeout(at(&good), libc::CLOCK_REALTIME).unwrap().unwrap();
        assert_eq!((t.clock, t.at), (Clock::Realtime, Timespec { sec: 5, nsec: 999_999_999 }));
    }

    #[test]
    fn counts_and_masks() {
        assert_eq!(count(-1), Err(Errno::EINVAL));
        assert_eq!(count(i32::MIN), Err(Errno::EINVAL));
        assert_eq!(count(0), Ok(0));
        assert_eq!(mask(0), Err(Errno::EINVAL));
        assert_eq!(mask(2), Ok(2));
    }

    #[test]
    fn waitv_entries_are_parsed_and_copied_untrusted() {
        let e = UfutexWaitv { val: 0x100, uaddr: 8, flags: 0x80, reserved: 0 };
        assert_eq!(entry(&e), Err(Errno::EINVAL)); // 0x100 does not fit a u8
        assert_eq!(entry(&UfutexWaitv { reserved: 1, val: 1, ..e }), Err(Errno::EINVAL));
        assert_eq!(entry(&UfutexWaitv { flags: 0x180, val: 1, ..e }), Err(Errno::EINVAL));
        assert!(entry(&UfutexWaitv { val: 0xff, ..e }).is_ok());
        let arr = [UfutexWaitv { val: 7, ..e }, UfutexWaitv { val: 9, uaddr: 9, flags: 0x83, reserved: 0 }];
        let parsed = parse_waitv(arr.as_ptr() as usize, 2).unwrap();
        assert_eq!(parsed.iter().map(|p| p.0).collect::<Vec<_>>(), arr);
        assert_eq!(parsed[1].1.size, Size::U64);
        assert_eq!(parse_waitv(8, 1), Err(Errno::EFAULT));
        // Entry by entry: a bad entry 0 is found before the unreadable entry 1.
        let bad = [UfutexWaitv { reserved: 1, ..e }];
        assert_eq!(parse_waitv(bad.as_ptr() as usize, 1), Err(Errno::EINVAL));
    }
}
