//! Argument checks, in the kernel's order, each with the kernel's errno. Pure functions over
//! integers, plus the untrusted reads of timespecs and waitv arrays (through `fault`).

use super::abi::{
    UfutexWaitv, UFUTEX_MPOL, UFUTEX_NUMA, UFUTEX_PRIVATE, UFUTEX_SIZE_MASK, UFUTEX_SIZE_U16, UFUTEX_SIZE_U32,
    UFUTEX_SIZE_U64, UFUTEX_SIZE_U8, UFUTEX_VALID_MASK, UFUTEX_WAITV_MAX,
};
use super::fault::{read_u64s, read_u64s_at_once, read_word, read_word_at_once, ReadPages};
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

// The ABI's size codes are `Size`'s discriminants (`Size::from_code`).
const _: () = assert!(
    UFUTEX_SIZE_U8 == Size::U8 as u32
        && UFUTEX_SIZE_U16 == Size::U16 as u32
        && UFUTEX_SIZE_U32 == Size::U32 as u32
        && UFUTEX_SIZE_U64 == Size::U64 as u32
        && UFUTEX_SIZE_MASK == 3
);

/// Unknown flag bits → `EINVAL`. Every size is valid here (the kernel takes only U32).
pub(crate) fn word_flags(flags: u32) -> Result<WordFlags, Errno> {
    if flags & !UFUTEX_VALID_MASK != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(WordFlags {
        size: Size::from_code(flags),
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
    let clock = clock(clockid).ok_or(Errno::EINVAL)?;
    Ok(Timeout::new(clock, read_timespec(ts)?))
}

/// An absolute timeout's clock: `CLOCK_MONOTONIC` or `CLOCK_REALTIME`, `None` for any other.
#[inline(always)]
fn clock(clockid: libc::clockid_t) -> Option<Clock> {
    match clockid {
        libc::CLOCK_MONOTONIC => Some(Clock::Monotonic),
        libc::CLOCK_REALTIME => Some(Clock::Realtime),
        _ => None,
    }
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
    timespec(read_u64s(ts).ok_or(Errno::EFAULT)?).ok_or(Errno::EINVAL)
}

/// A timespec's two fields as read, if valid: `tv_sec >= 0`, `0 <= tv_nsec < 1e9`.
#[inline(always)]
fn timespec([sec, nsec]: [u64; 2]) -> Option<Timespec> {
    let sec = sec as i64;
    (sec >= 0 && nsec < 1_000_000_000).then_some(Timespec { sec, nsec: nsec as u32 })
}

/// One past the highest user address on any 64-bit Linux (57-bit virtual addresses); a word
/// that reaches above it is in the kernel's half (the kernel's `access_ok` → `EFAULT`).
const USER_END: usize = (1 << 56) - 4096;
const _: () = assert!(USER_END.is_multiple_of(4096)); // `plain_waitv` counts on it

/// The flags of the most common word of all (and the kernel's only size): private, 32 bits.
pub(crate) const PLAIN_U32: u32 = UFUTEX_PRIVATE | UFUTEX_SIZE_U32;

/// [`plain_private`] for flags that are [`PLAIN_U32`], told with constants (the general test
/// looks the size's maximum and alignment up in tables, which costs registers as well as loads).
#[inline(always)]
pub(crate) fn plain_private_u32(addr: usize, a: u64, mask: u64) -> bool {
    let placed = addr.wrapping_sub(1) < USER_END - 1 && addr & 3 == 0;
    (a | mask) <= u64::from(u32::MAX) && mask != 0 && placed
}

/// The common case, told in a few instructions: `flags` name a private word of some size with
/// no NUMA or MPOL bit, at a non-null `addr` aligned to that size, in user space, and `a` and
/// `b` (a value and a mask, or a mask twice) fit the size, the mask not 0. Its size then; `None`
/// for everything else, which the whole validation answers (for these it finds nothing wrong).
#[inline(always)]
pub(crate) fn plain_private(flags: u32, addr: usize, a: u64, mask: u64) -> Option<Size> {
    if flags == PLAIN_U32 {
        return plain_private_u32(addr, a, mask).then_some(Size::U32);
    }
    if flags & !UFUTEX_SIZE_MASK != UFUTEX_PRIVATE {
        return None;
    }
    let size = Size::from_code(flags);
    let fits = (a | mask) <= size.max() && mask != 0;
    // Not NULL, below USER_END, aligned; aligned below USER_END (a multiple of every size) is
    // also at most USER_END - size, as `address` asks.
    let placed = addr.wrapping_sub(1) < USER_END - 1 && addr & (size.bytes() - 1) == 0;
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
    let addr = placed(addr, f)?;
    if !f.private && shared_refused() {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(addr)
}

/// [`address`], for a process-shared word too while [`refuse_shared`] says so: a caller that
/// leaves such a word to the kernel still checks it as the kernel would.
pub(crate) fn placed(addr: u64, f: WordFlags) -> Result<usize, Errno> {
    let addr = usize::try_from(addr).map_err(|_| Errno::EFAULT)?;
    let align = if f.numa { 2 * f.size.bytes() } else { f.size.bytes() };
    // A power of two (1 to 16): a mask, not `%`, which compiled to a `div` (10–40 cycles,
    // the host's) on every call, the compiler not knowing that.
    if addr & (align - 1) != 0 {
        return Err(Errno::EINVAL);
    }
    if addr > USER_END - align {
        return Err(Errno::EFAULT);
    }
    // The kernel faults resolving a NULL shared key or reading a NULL word's node word (a
    // policy it only looks up: none covers NULL).
    if addr == 0 && (!f.private || f.numa) {
        return Err(Errno::EFAULT);
    }
    Ok(addr)
}

/// Whether process-shared words are refused with `EOPNOTSUPP` (see [`refuse_shared`]).
static SHARED_REFUSED: AtomicBool = AtomicBool::new(false);

/// Whether [`refuse_shared`] said to refuse process-shared words.
pub(crate) fn shared_refused() -> bool {
    SHARED_REFUSED.load(Ordering::Relaxed)
}

/// Refuse (`true`) or take (`false`, the default) process-shared words in this process: the
/// preload library refuses them so that they go to the kernel, which every process — preloaded
/// or not — meets on.
pub(crate) fn refuse_shared(refuse: bool) {
    SHARED_REFUSED.store(refuse, Ordering::Relaxed);
}

/// A word that is never read (a wake, a requeue target) must still not be NULL → `EFAULT` (our
/// contract; the kernel's private wake would not notice), unless [`pass_null`] said to let it
/// through as the kernel does.
pub(crate) fn nonnull(addr: usize) -> Result<usize, Errno> {
    if addr == 0 && !NULL_PASSES.load(Ordering::Relaxed) {
        Err(Errno::EFAULT)
    } else {
        Ok(addr)
    }
}

/// Whether [`nonnull`] lets NULL through (see [`pass_null`]).
static NULL_PASSES: AtomicBool = AtomicBool::new(false);

/// Let a NULL private word that a call never reads through, as the kernel's `get_futex_key`
/// does (`true`: the preload library, which answers as the system calls), or refuse it with
/// `EFAULT` (`false`, the default: the C ABI's contract). Such a word is a key like any other:
/// a requeue can move waiters to it and a wake of it finds them.
pub(crate) fn pass_null(pass: bool) {
    NULL_PASSES.store(pass, Ordering::Relaxed);
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
    parse_each(ptr, n, |e| v.push(e))?;
    Ok(v)
}

/// [`parse_waitv`] of the two entries a requeue takes, without allocating.
pub(crate) fn parse_pair(ptr: usize) -> Result<[(UfutexWaitv, WordFlags); 2], Errno> {
    let mut pair = [None; 2];
    let mut i = 0;
    parse_each(ptr, 2, |e| {
        pair[i] = Some(e);
        i += 1;
    })?;
    match pair {
        [Some(src), Some(dst)] => Ok([src, dst]),
        _ => unreachable!("parse_each hands over every entry or fails"),
    }
}

/// The entries of [`parse_waitv`], each handed to `f` in index order once checked.
#[inline(always)]
fn parse_each(ptr: usize, n: usize, mut f: impl FnMut((UfutexWaitv, WordFlags))) -> Result<(), Errno> {
    let at = |i: usize| ptr.checked_add(i * ENTRY).ok_or(Errno::EFAULT);
    if ptr.is_multiple_of(8) && pages_read(ptr, n * ENTRY) {
        for i in 0..n {
            // SAFETY: `at(i)` is 8-aligned (so are `ptr` and the 24-byte entries) and every page
            // of the array was read just now; memory found mapped stays mapped for the call
            // (the C ABI's contract). Atomic loads: a caller writing the array meanwhile is a
            // race the kernel also tolerates, not undefined behaviour here.
            let e = unsafe { load_entry(at(i)?) };
            f((e, entry(&e)?));
        }
        return Ok(());
    }
    for i in 0..n {
        let e = copy_entry(at(i)?)?;
        f((e, entry(&e)?));
    }
    Ok(())
}

/// A waitv array of plain entries — private words of any size, without NUMA or MPOL: the only
/// kind the kernel takes (at 32 bits) and the common one — validated and compared in one pass,
/// with the kernel's answers: every entry's own fields and key, then the values in index order.
///
/// `None` if the array is not 8-aligned and readable, or if an entry is not plain: a value wider
/// than its size, another flag, a non-zero `__reserved`, a misaligned word or one in the kernel's
/// half (the whole validation answers those, [`parse_waitv`] and on). A NULL word is plain: its
/// read faults, as the kernel's does. Else `Some`: `Err` with the first value, in index order,
/// that did not read (`EFAULT`) or did not match (`EAGAIN`) — every later entry found plain
/// first, as the kernel makes every key before it reads a value — or `Ok` after `matched` was
/// told `(address, size, value)` of each entry in index order, each word having just read as its
/// value through `words`.
///
/// The array is read with plain (atomic) loads after one fault-safe read a page, the words
/// through `words` (one fault-safe read a 4 KiB block); nothing is allocated.
#[inline(always)]
pub(crate) fn plain_waitv(
    ptr: usize,
    n: usize,
    words: &mut ReadPages,
    matched: impl FnMut(usize, Size, u64),
) -> Option<Result<(), Errno>> {
    plain_waitv_with::<false>(ptr, n, words, matched)
}

/// [`plain_waitv`], with [`scan_common`] passing over the common entries when `SCAN`.
#[inline(always)]
fn plain_waitv_with<const SCAN: bool>(
    ptr: usize,
    n: usize,
    words: &mut ReadPages,
    matched: impl FnMut(usize, Size, u64),
) -> Option<Result<(), Errno>> {
    debug_assert!((1..=UFUTEX_WAITV_MAX as usize).contains(&n));
    if !ptr.is_multiple_of(8) || !pages_read(ptr, n * ENTRY) {
        return None;
    }
    // No overflow: `pages_read` found the array's last byte in range.
    let end = ptr + n * ENTRY;
    // A vector's words are mostly of one size: the loop for the first entry's, which knows it.
    // SAFETY: `ptr` is 8-aligned and the array's pages read just now (as in `plain_entries`).
    match unsafe { load_entry(ptr) }.flags & UFUTEX_SIZE_MASK {
        0 => plain_entries::<0, SCAN>(ptr, end, words, matched),
        1 => plain_entries::<1, SCAN>(ptr, end, words, matched),
        2 => plain_entries::<2, SCAN>(ptr, end, words, matched),
        _ => plain_entries::<3, SCAN>(ptr, end, words, matched),
    }
}

/// Whether the vector of one entry at `ptr` is plain (see [`plain_waitv`]) and its word does
/// not hold its value: then the call fails with `EAGAIN`, as the kernel's does once the entry
/// parsed, its address keyed and its word read. `false` for everything else (an entry or a word
/// that does not read, an entry that is not plain, a word that holds the value, reads not ready
/// without a call), which the general path takes from the start: so every other answer, and the
/// order of errors, is its.
///
/// The entry's three fields and the word are read fault-safely, nothing else, and no call is
/// made: the C entry points ask it before they set up a frame (BENCHMARKS.md, sixtieth session;
/// through the general path a one-entry failing waitv took 13.9 ns, fifty-ninth session).
#[inline(always)]
pub(crate) fn one_plain_mismatch(ptr: usize) -> bool {
    let Some(e) = read_entry_at_once(ptr) else { return false };
    let Some(size) = plain_size(&e) else { return false };
    if !plain_entry(&e, size) {
        return false;
    }
    // No truncation: `plain_entry` took the address as a user-space one.
    matches!(read_word_at_once(e.uaddr as usize, size), Some(Ok(v)) if v != e.val)
}

/// [`one_plain_mismatch`] behind a waitv's timeout, as the kernel checks it before it reads an
/// entry: none (`ts` NULL), or on `CLOCK_MONOTONIC` or `CLOCK_REALTIME` and read at once as a
/// valid timespec ([`timeout`]'s checks). `false` for a timeout that is bad or does not read,
/// which the general path answers (the entry is then not read).
#[inline(always)]
pub(crate) fn one_plain_mismatch_timed(ptr: usize, ts: usize, clockid: libc::clockid_t) -> bool {
    if ts != 0 && (clock(clockid).is_none() || read_u64s_at_once(ts).and_then(timespec).is_none()) {
        return false;
    }
    one_plain_mismatch(ptr)
}

/// [`plain_waitv`]'s first pass, which keeps nothing: validated and compared, the common
/// entries by [`scan_common`].
#[inline(always)]
pub(crate) fn plain_waitv_compare(ptr: usize, n: usize, words: &mut ReadPages) -> Option<Result<(), Errno>> {
    plain_waitv_with::<true>(ptr, n, words, |_, _, _| ())
}

/// The first entry of `[at, end)` that is not a common one (see [`plain_entries`]): its flags
/// and `__reserved` not exactly `plain`, or its word not in `block` (the mask that tells also
/// tells a misaligned word) or not holding its value; `end` if there is none.
///
/// On x86-64 a loop of its own, on a 64-byte line of its own, four entries a turn: 39 instructions
/// a turn, and one taken branch; the last three at most one a turn. The block's test is `(address ^
/// block) & mask == 0`, the same test as [`ReadPages::cached`]'s `address & mask == block` for a
/// block's base (its bits below 12 are 0, so `block & mask == block`), and it leaves the word's
/// offset in the block for the load (`[offset + block]`): one instruction fewer an entry than a
/// copy of the address masked and compared. The compiler's loop was 15 instructions an entry and
/// one or two no-ops, on lines wherever the build put it: 128 entries failing on the last took
/// 78–100 ns, then 58–66 with this loop one entry a turn at 13 instructions, beside 54–69 for the
/// Rust path's scan (BENCHMARKS.md, fifty-seventh session). Two a turn, with the test on the
/// offset, for the host's slow spells, when a loop runs at the rate of its instructions: ~180
/// against ~118 ns for the Rust path there (BENCHMARKS.md, eighty-sixth session). Four a turn once
/// the Rust path's scan took two a turn (128 entries: ~79 → ~75 ns, 1942 → 1839 instructions a
/// call; BENCHMARKS.md, eighty-eighth session). Elsewhere it passes over nothing, and the entries
/// are taken one by one.
///
/// # Safety
/// Every entry of `[at, end)` (24 bytes each, `end - at` a multiple of 24) is 8-aligned and
/// readable for the call; `block` is [`ReadPages::known_block`] of the reads of this call, and
/// a block's base ([`ReadPages::knows_block`]): with none known, the test above would take a
/// word of the NULL block for one known readable.
#[inline(always)]
unsafe fn scan_common<const CODE: u32>(at: usize, end: usize, plain: u64, block: usize) -> usize {
    #[cfg(all(target_arch = "x86_64", not(ufutex_loom)))]
    {
        let mask = ReadPages::mask(Size::from_code(CODE));
        // One entry's test, the entry at `{at}` plus `$off`: to `$out` if it is not plain or its
        // word is not in the block, then its word loaded (`$load`) and compared with its value
        // (the flags for the caller's branch). Kept as written: one line an instruction.
        #[rustfmt::skip]
        macro_rules! entry {
            ($off:literal, $out:literal, $load:literal) => {
                concat!(
                    "cmp qword ptr [{at} + ", $off, "{flags}], {plain}\n",
                    "jne ", $out, "\n",
                    "mov {a}, qword ptr [{at} + ", $off, "{uaddr}]\n",
                    "xor {a}, {block}\n",
                    "test {a}, {mask}\n",
                    "jne ", $out, "\n",
                    $load, "\n",
                    "cmp {t}, qword ptr [{at} + ", $off, "{val}]",
                )
            };
        }
        macro_rules! scan {
            ($load:literal) => {{
                let mut at = at;
                // SAFETY: the loads of entries are of `[at, end)` (the caller's: the four's only
                // once `at + 96 <= end`, the tail's, one a turn, only once `at != end`); the load
                // of a word is made only once its address passed the block's test, `(address ^
                // block) & mask == 0` with `block` a block's base (the caller's): the address is
                // then aligned to its size in that block, which read without a fault and stays
                // mapped for the call (`ReadPages::cached`'s argument), and `{a} + {block}` is that
                // address (`{a}` holds its offset in the block). Read-only, no stack.
                unsafe {
                    std::arch::asm!(
                        "jmp 3f",
                        ".p2align 6",
                        "2:",
                        "add {at}, {quad}",
                        "3:",
                        // Four entries left at least: `at <= end - 96` (`last`).
                        "cmp {at}, {last}",
                        "ja 5f",
                        entry!("", "4f", $load),
                        "jne 4f",
                        entry!("{entry} + ", "6f", $load),
                        "jne 6f",
                        entry!("2 * {entry} + ", "7f", $load),
                        "jne 7f",
                        entry!("3 * {entry} + ", "8f", $load),
                        "je 2b",
                        // The fourth, third or second entry is the one.
                        "8:",
                        "add {at}, {entry}",
                        "7:",
                        "add {at}, {entry}",
                        "6:",
                        "add {at}, {entry}",
                        "jmp 4f",
                        // Three entries left at most, one a turn.
                        "9:",
                        "add {at}, {entry}",
                        "5:",
                        "cmp {at}, {end}",
                        "je 4f",
                        entry!("", "4f", $load),
                        "je 9b",
                        "4:",
                        at = inout(reg) at,
                        end = in(reg) end,
                        // No underflow: a 24-byte entry lies in `[at, end)`, or `at == end`, and
                        // then `last` below `at` sends the loop to its end alike.
                        last = in(reg) end.saturating_sub(4 * ENTRY),
                        plain = in(reg) plain,
                        mask = in(reg) mask,
                        block = in(reg) block,
                        a = out(reg) _,
                        t = out(reg) _,
                        entry = const ENTRY,
                        quad = const 4 * ENTRY,
                        flags = const std::mem::offset_of!(UfutexWaitv, flags),
                        uaddr = const std::mem::offset_of!(UfutexWaitv, uaddr),
                        val = const std::mem::offset_of!(UfutexWaitv, val),
                        options(nostack, readonly),
                    );
                }
                at
            }};
        }
        match CODE {
            0 => scan!("movzx {t:e}, byte ptr [{a} + {block}]"),
            1 => scan!("movzx {t:e}, word ptr [{a} + {block}]"),
            2 => scan!("mov {t:e}, dword ptr [{a} + {block}]"),
            _ => scan!("mov {t}, qword ptr [{a} + {block}]"),
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(ufutex_loom))))]
    {
        let _ = (end, plain, block);
        at
    }
}

/// The size of one `struct ufutex_waitv` in the caller's array.
const ENTRY: usize = size_of::<UfutexWaitv>();

/// [`plain_waitv`] of the entries in `[ptr, end)`, an 8-aligned array whose pages all read,
/// with a path of its own for words whose size has the code `CODE`: the compiler knows that
/// size there (the general path costs ~30 instructions more an entry) and that path goes on to
/// the next entry by itself (one merged with the general path's cost it a taken jump an entry).
///
/// `SCAN` (the first pass, whose `matched` does nothing): the common entries — plain with that
/// size, their word in the block known readable and holding the value — are passed over by
/// [`scan_common`], the others taken one by one below.
#[inline(always)]
fn plain_entries<const CODE: u32, const SCAN: bool>(
    ptr: usize,
    end: usize,
    words: &mut ReadPages,
    mut matched: impl FnMut(usize, Size, u64),
) -> Option<Result<(), Errno>> {
    let (size, plain) = (Size::from_code(CODE), u64::from(UFUTEX_PRIVATE | CODE));
    // SAFETY: every entry read below is at `ptr + 24 i` for some `i` with `ptr + 24 i < end`:
    // 8-aligned as `ptr` is, and every page of the array read (the caller's); memory found
    // mapped stays mapped for the call (the C ABI's contract).
    let entry_at = |at: usize| unsafe { load_entry(at) };
    let mut at = ptr;
    let failed = loop {
        // (None known before the first word read: the first entry is then taken below.)
        if SCAN && words.knows_block() {
            // SAFETY: as `entry_at`'s, for every entry of `[at, end)`; the block is `words`'s,
            // and a block's base.
            at = unsafe { scan_common::<CODE>(at, end, plain, words.known_block()) };
        }
        if at == end {
            return Some(Ok(()));
        }
        let e = entry_at(at);
        at += ENTRY;
        if flags_and_reserved(&e) == plain {
            match plain_read(&e, size, words, &mut matched)? {
                Ok(()) => continue,
                Err(failed) => break failed,
            }
        }
        if let Err(failed) = plain_read_sized(e.val, e.uaddr, flags_and_reserved(&e), words, &mut matched)? {
            break failed;
        }
    };
    while at != end {
        let e = entry_at(at);
        let plain = if flags_and_reserved(&e) == plain {
            plain_entry(&e, size)
        } else {
            plain_size(&e).is_some_and(|size| plain_entry(&e, size))
        };
        if !plain {
            return None;
        }
        at += ENTRY;
    }
    Some(Err(failed))
}

/// The size of a plain entry's word (see [`plain_waitv`]), if its flags and `__reserved` are
/// those of one: private, a size, nothing else.
#[inline(always)]
fn plain_size(e: &UfutexWaitv) -> Option<Size> {
    (flags_and_reserved(e) & !u64::from(UFUTEX_SIZE_MASK) == u64::from(UFUTEX_PRIVATE))
        .then(|| Size::from_code(e.flags))
}

/// An entry's `flags` and `__reserved` as the one 64-bit word they were loaded from: one compare
/// checks both.
#[inline(always)]
fn flags_and_reserved(e: &UfutexWaitv) -> u64 {
    u64::from(e.flags) | u64::from(e.reserved) << 32
}

/// One entry of [`plain_waitv`] whose flags are plain with `size`: its word read and compared,
/// `matched` told if it holds the value; `Ok(Err)` if it does not (`EAGAIN`) or does not read
/// (`EFAULT`); `None` if the entry is not plain after all.
#[inline(always)]
fn plain_read(
    e: &UfutexWaitv,
    size: Size,
    words: &mut ReadPages,
    matched: &mut impl FnMut(usize, Size, u64),
) -> Option<Result<(), Errno>> {
    let addr = usize::try_from(e.uaddr).ok()?;
    let v = match words.cached(addr, size) {
        Some(v) => v,
        // Only an address that `plain_address` took makes a block known, and every aligned
        // address in that block passes it too (`USER_END` is a block boundary): only the first
        // of a block is checked.
        None => match words.read(plain_address(e.uaddr, size)?, size) {
            Ok(v) => v,
            // A value wider than the word is not plain (`EINVAL` comes before the fault).
            Err(_) if e.val > size.max() => return None,
            Err(_) => return Some(Err(Errno::EFAULT)),
        },
    };
    if v == e.val {
        matched(addr, size, v);
        Some(Ok(()))
    } else if e.val > size.max() {
        None // a value that matches fits; one that does not may be wide (`EINVAL`)
    } else {
        Some(Err(Errno::EAGAIN))
    }
}

/// [`plain_read`] of an entry of another size than the one [`plain_entries`] knows, or not plain
/// (`None`): out of line, so that the compiler does not merge its tail with that path's, and
/// with the entry's fields in registers (a reference to it made that path store every entry to
/// the stack).
#[inline(never)]
fn plain_read_sized(
    val: u64,
    uaddr: u64,
    flags_and_reserved: u64,
    words: &mut ReadPages,
    matched: &mut impl FnMut(usize, Size, u64),
) -> Option<Result<(), Errno>> {
    let [flags, reserved] = [flags_and_reserved as u32, (flags_and_reserved >> 32) as u32];
    let e = UfutexWaitv { val, uaddr, flags, reserved };
    plain_read(&e, plain_size(&e)?, words, matched)
}

/// Whether `e`, whose flags and `__reserved` are plain with `size`, is a plain entry (see
/// [`plain_waitv`]).
#[inline(always)]
fn plain_entry(e: &UfutexWaitv, size: Size) -> bool {
    e.val <= size.max() && plain_address(e.uaddr, size).is_some()
}

/// A plain entry's word address: aligned to its size and in user space (NULL included; see
/// [`address`]), or `None`.
#[inline(always)]
fn plain_address(uaddr: u64, size: Size) -> Option<usize> {
    let addr = usize::try_from(uaddr).ok()?;
    (addr & (size.bytes() - 1) == 0 && addr <= USER_END - size.bytes()).then_some(addr)
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

/// An entry from its three 64-bit words as loaded: `val`, `uaddr`, and the last 8 bytes,
/// `flags` then `__reserved` in memory order (split so on either byte order).
#[inline(always)]
fn entry_of(val: u64, uaddr: u64, tail: u64) -> UfutexWaitv {
    let tail = tail.to_ne_bytes();
    let flags = u32::from_ne_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let reserved = u32::from_ne_bytes([tail[4], tail[5], tail[6], tail[7]]);
    UfutexWaitv { val, uaddr, flags, reserved }
}

/// Read one entry at `at` with three atomic loads.
///
/// # Safety
/// `at` is 8-aligned and the 24 bytes there are mapped readable for the call.
unsafe fn load_entry(at: usize) -> UfutexWaitv {
    use std::sync::atomic::{AtomicU64, Ordering};
    // SAFETY: forwarded contract: three aligned, readable u64s.
    let field = |off: usize| unsafe { AtomicU64::from_ptr((at + off) as *mut u64) }.load(Ordering::Relaxed);
    entry_of(field(0), field(8), field(16))
}

/// Read one `struct ufutex_waitv` at `at` (any alignment) without trusting it: `None` if any of
/// it does not read. Inline (a caller's fast path keeps the entry in registers); [`copy_entry`]
/// is its out-of-line form.
#[inline(always)]
fn read_entry(at: usize) -> Option<UfutexWaitv> {
    // All three read before any is looked at (`read_u64s`): a branch after each cost a
    // one-entry waitv ~2 ns (BENCHMARKS.md, fifty-ninth session).
    let [val, uaddr, tail] = read_u64s(at)?;
    Some(entry_of(val, uaddr, tail))
}

/// [`read_entry`] for a fast path with a slower way to fall back on: also `None` if reads are
/// not ready to be done without a call ([`read_u64s_at_once`]).
#[inline(always)]
fn read_entry_at_once(at: usize) -> Option<UfutexWaitv> {
    let [val, uaddr, tail] = read_u64s_at_once(at)?;
    Some(entry_of(val, uaddr, tail))
}

/// [`read_entry`], `EFAULT` if the entry does not read.
fn copy_entry(at: usize) -> Result<UfutexWaitv, Errno> {
    read_entry(at).ok_or(Errno::EFAULT)
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
    fn the_plain_u32_test_places_a_word_as_the_whole_validation() {
        let p = word_flags(0x82).unwrap();
        let edges = [0, 1, 2, 3, 4, 5, 7, 8, 0x1002, USER_END - 8, USER_END - 5, USER_END - 4, USER_END - 3];
        let above = [USER_END, USER_END + 4, 1 << 62, (1 << 62) + 4, 1 << 63, usize::MAX - 3, usize::MAX];
        let mut x = 0x9e37_79b9_7f4a_7c15usize;
        let random = std::iter::repeat_with(move || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            x >> (x >> 58) // every magnitude (a shift of 0 to 63 bits), every alignment
        });
        for addr in edges.into_iter().chain(above).chain(random.take(100_000)) {
            let whole = address(addr as u64, p).and_then(nonnull).is_ok();
            assert_eq!(plain_private_u32(addr, 0, 1), whole, "{addr:#x}");
        }
        let values = [0, 1, 0xffff_ffff, 0x1_0000_0000, 0x8000_0000_0000_0000, u64::MAX];
        for (v, m) in values.iter().flat_map(|&v| values.iter().map(move |&m| (v, m))) {
            let whole = fits(Size::U32, v).and(fits(Size::U32, m)).and(mask(m)).is_ok();
            assert_eq!(plain_private_u32(0x1000, v, m), whole, "value {v:#x} mask {m:#x}");
        }
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
        let mpol = word_flags(0x8a).unwrap();
        assert_eq!(address(0, mpol), Ok(0)); // a policy is looked up, not read: none covers NULL
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
        assert_eq!((t.clock, t.at()), (Clock::Realtime, Timespec { sec: 5, nsec: 999_999_999 }));
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

    /// The plain pass over words that straddle a readable page and an inaccessible one: keys
    /// (not plain: `None`, for the whole validation) before values, values in index order.
    #[test]
    fn plain_waitv_answers_in_the_kernels_order() {
        let [page, hole, after] = super::super::fault::pages_around_a_hole();
        let p0 = page + 4096 - 16; // four words at the end of the page before the hole
        for (i, v) in [10u32, 11, 12, 13, 20, 21].into_iter().enumerate() {
            let at = if i < 4 { p0 + 4 * i } else { after + 4 * (i - 4) };
            // SAFETY: our own writable pages.
            unsafe { *(at as *mut u32) = v };
        }
        let e = |uaddr: usize, val: u64| UfutexWaitv { val, uaddr: uaddr as u64, flags: 0x82, reserved: 0 };
        let (m, x) = (|i: usize| e(p0 + 4 * i, 10 + i as u64), |i: usize| e(p0 + 4 * i, 99));
        let (m2, x2) = (e(after, 20), e(after + 4, 99));
        let e64 = |uaddr: usize, val: u64| UfutexWaitv { flags: 0x83, ..e(uaddr, val) };
        let (h, null) = (e(hole, 0), e(0, 0));
        let (eagain, efault) = (Some(Err(Errno::EAGAIN)), Some(Err(Errno::EFAULT)));
        // What, the entries, the answer, how many words were told matching.
        type Row = (&'static str, Vec<UfutexWaitv>, Option<Result<(), Errno>>, usize);
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            ("all match",                 vec![m(0), m(1), m(2), m(3)],          Some(Ok(())), 4),
            ("into the hole",             vec![m(0), m(1), m(2), m(3), h],       efault, 4),
            ("mismatch before the hole",  vec![m(0), x(1), h],                   eagain, 1),
            ("hole before a mismatch",    vec![m(0), h, x(1)],                   efault, 1),
            ("blocks switch",             vec![m(0), m2, m(1), m2, x2, h],       eagain, 4),
            ("NULL is read",              vec![m(0), null],                      efault, 1),
            ("mismatch before NULL",      vec![x(0), null],                      eagain, 0),
            ("last user word",            vec![e(USER_END - 4, 0)],              efault, 0),
            ("kernel's half after a mismatch", vec![x(0), e(USER_END, 0)],       None, 0),
            ("misaligned after the hole", vec![h, e(p0 + 2, 0)],                 None, 0),
            ("wide value after the hole", vec![h, e(p0, 1 << 32)],               None, 0),
            ("wide value, mismatching",   vec![m(0), e(p0 + 4, 11 | 1 << 32)],   None, 1),
            ("reserved",                  vec![m(0), UfutexWaitv { reserved: 1, ..m(1) }], None, 1),
            ("a 16-bit word",             vec![m(0), UfutexWaitv { flags: 0x81, ..m(1) }], Some(Ok(())), 2),
            ("8 and 64 bits",             vec![UfutexWaitv { flags: 0x80, ..m(2) }, e64(p0, 10 | 11 << 32)], Some(Ok(())), 2),
            ("a 64-bit mismatch",         vec![e64(p0 + 8, 12), null],           eagain, 0),
            ("a 64-bit word at 4",        vec![x(0), e64(p0 + 4, 0)],            None, 0),
            ("a wide 8-bit value",        vec![h, UfutexWaitv { flags: 0x80, val: 256, ..m(0) }], None, 0),
            ("the last user byte",        vec![UfutexWaitv { flags: 0x80, ..e(USER_END - 1, 0) }], efault, 0),
            ("64 bits at the last 4 bytes", vec![x(0), e64(USER_END - 4, 0)],     None, 0),
            ("an unknown flag",           vec![x(0), UfutexWaitv { flags: 0xa2, ..m(1) }], None, 0),
            ("NUMA",                      vec![UfutexWaitv { flags: 0x86, ..m(0) }], None, 0),
            ("shared",                    vec![UfutexWaitv { flags: 0x02, ..m(0) }], None, 0),
            ("a lone mismatch",           vec![x(0)],                            eagain, 0),
            ("a lone 8-bit mismatch",     vec![UfutexWaitv { flags: 0x80, ..x(0) }], eagain, 0),
            ("a lone 64-bit mismatch",    vec![e64(p0, 10)],                     eagain, 0),
            ("a lone match",              vec![m(1)],                            Some(Ok(())), 1),
            ("a lone hole",               vec![h],                               efault, 0),
            ("a lone wide value",         vec![e(p0, 10 | 1 << 32)],             None, 0),
            ("a lone misaligned word",    vec![e(p0 + 2, 0)],                    None, 0),
            ("a lone reserved",           vec![UfutexWaitv { reserved: 1, ..x(0) }], None, 0),
        ];
        // The shortcut reads only when reads are ready without a call: never in probe mode.
        let mut at_once = false;
        for (what, es, want, n_matched) in table {
            // SAFETY: the pages stay mapped (leaked) while `words` lives.
            let mut words = unsafe { ReadPages::new() };
            let mut seen = Vec::new();
            let got = plain_waitv(es.as_ptr() as usize, es.len(), &mut words, |a, size, v| seen.push((a, size, v)));
            assert_eq!(got, want, "{what}");
            // SAFETY: as above.
            let mut words = unsafe { ReadPages::new() };
            assert_eq!(plain_waitv_compare(es.as_ptr() as usize, es.len(), &mut words), want, "{what}: first pass");
            // The one-entry shortcut answers exactly the general path's EAGAIN, nothing else.
            at_once = super::super::fault::read_word_at_once(p0, Size::U32).is_some();
            if es.len() == 1 {
                assert_eq!(one_plain_mismatch(es.as_ptr() as usize), want == eagain && at_once, "{what}: one entry");
            }
            let want_seen: Vec<_> =
                es[..n_matched].iter().map(|e| (e.uaddr as usize, Size::from_code(e.flags), e.val)).collect();
            assert_eq!(seen, want_seen, "{what}: the matching words, in index order");
        }
        // An array that is not 8-aligned, or not readable to its end, is left to `parse_waitv`.
        let mut buf = [0u64; 7];
        let odd = buf.as_mut_ptr() as usize + 4;
        // SAFETY: 24 bytes inside `buf`; the hole's page stays mapped (PROT_NONE) for the call.
        unsafe {
            (odd as *mut UfutexWaitv).write_unaligned(m(0));
            let mut words = ReadPages::new();
            assert_eq!(plain_waitv(odd, 1, &mut words, |_, _, _| ()), None, "4-aligned array");
            // The one-entry shortcut reads any array that reads: a mismatch there too; none in
            // an entry that runs into the hole, nor one past the top of the address space.
            (odd as *mut UfutexWaitv).write_unaligned(x(0));
            assert_eq!(one_plain_mismatch(odd), at_once, "4-aligned array, one entry");
            ((hole - 16) as *mut u64).write(99);
            ((hole - 8) as *mut u64).write(p0 as u64);
            assert!(!one_plain_mismatch(hole - 16), "entry into the hole");
            assert!(!one_plain_mismatch(usize::MAX - 15), "entry past the top");
            ((hole - 24) as *mut UfutexWaitv).write(m(0));
            assert_eq!(plain_waitv(hole - 24, 2, &mut words, |_, _, _| ()), None, "array into the hole");
        }
    }

    /// The one-entry shortcut behind a timeout looks at the entry only behind one the kernel
    /// takes (no timeout; or a clock it knows and a timespec that reads and is valid, however
    /// long past): there it answers as without one. Every other timeout is `false`, for the
    /// general path to answer (EINVAL, EFAULT).
    #[test]
    fn the_timed_shortcut_looks_at_the_entry_only_behind_a_good_timeout() {
        let [page, hole, _] = super::super::fault::pages_around_a_hole();
        let (word, ts) = (page, page + 64);
        // SAFETY: `page` is a fresh writable page of ours.
        unsafe { *(word as *mut u32) = 5 };
        let miss = UfutexWaitv { val: 6, uaddr: word as u64, flags: PLAIN_U32, reserved: 0 };
        let entry = [miss];
        let at = entry.as_ptr() as usize;
        // (The first read of the process installs the fault handler: then reads are at once,
        // natively.)
        assert_eq!(read_word(word, Size::U32), Ok(5));
        let at_once = super::super::fault::read_word_at_once(word, Size::U32).is_some();
        let probe = std::env::var_os(super::super::fault::PROBE_ENV).is_some_and(|v| v == "syscall");
        assert_eq!(at_once, cfg!(ufutex_fixup) && !probe, "reads are at once natively, never in probe mode");
        let set = |sec: i64, nsec: i64| {
            // SAFETY: 16 bytes of our page.
            unsafe { *(ts as *mut [i64; 2]) = [sec, nsec] };
        };
        let (mono, real) = (libc::CLOCK_MONOTONIC, libc::CLOCK_REALTIME);
        assert_eq!(one_plain_mismatch_timed(at, 0, 99), at_once, "no timeout: the clock is not looked at");
        for (sec, nsec, clock, want) in [
            (1, 0, mono, at_once),
            (0, 999_999_999, real, at_once),
            (1, 0, 99, false),
            (-1, 0, mono, false),
            (0, -1, mono, false),
            (0, 1_000_000_000, real, false),
        ] {
            set(sec, nsec);
            assert_eq!(one_plain_mismatch_timed(at, ts, clock), want, "{sec} s {nsec} ns, clock {clock}");
        }
        // A timespec that does not read, or runs into the hole.
        assert!(!one_plain_mismatch_timed(at, hole, mono), "unreadable");
        // SAFETY: the last 8 bytes before the hole, ours.
        unsafe { *((hole - 8) as *mut i64) = 1 };
        assert!(!one_plain_mismatch_timed(at, hole - 8, mono), "into the hole");
        // Behind a good timeout, a word that holds the value is no mismatch.
        set(1, 0);
        let hit = [UfutexWaitv { val: 5, ..miss }];
        assert!(!one_plain_mismatch_timed(hit.as_ptr() as usize, ts, mono), "a match");
    }

    /// `scan_common` stops exactly at the first entry that is not common (as its contract says,
    /// so that the entry-by-entry pass after it takes no common entry again): for every length
    /// up to 9 (runs of four, and tails of one to three), the entry changed at every position,
    /// and at the end of an array of common entries. Only where the scan exists (x86-64).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_scan_stops_at_the_first_uncommon_entry() {
        let [page, _, _] = super::super::fault::pages_around_a_hole();
        for code in 0..4u32 {
            let size = Size::from_code(code);
            // Each word on a line of its own in `page`, holding 0.
            let at = |i: usize| page + 64 * i + 8;
            let common = |i: usize| UfutexWaitv { val: 0, uaddr: at(i) as u64, flags: 0x80 | code, reserved: 0 };
            // SAFETY: the page stays mapped (leaked) while `words` lives.
            let mut words = unsafe { ReadPages::new() };
            assert_eq!(words.read(at(0), size), Ok(0));
            let (plain, block) = (u64::from(0x80 | code), words.known_block());
            let scan = |es: &[UfutexWaitv]| -> usize {
                let (start, end) = (es.as_ptr() as usize, es.as_ptr() as usize + es.len() * ENTRY);
                // SAFETY: `[start, end)` is `es`'s entries, 8-aligned and live; `block` is a base
                // that `words` read, and `page` stays mapped (leaked).
                let stop = unsafe {
                    match code {
                        0 => scan_common::<0>(start, end, plain, block),
                        1 => scan_common::<1>(start, end, plain, block),
                        2 => scan_common::<2>(start, end, plain, block),
                        _ => scan_common::<3>(start, end, plain, block),
                    }
                };
                (stop - start) / ENTRY
            };
            assert_eq!(scan(&[]), 0, "{size:?}: no entry");
            for n in 1..=9 {
                let all: Vec<UfutexWaitv> = (0..n).map(common).collect();
                assert_eq!(scan(&all), n, "{size:?}: {n} common entries");
                for k in 0..n {
                    for (what, e) in [
                        ("a mismatch", UfutexWaitv { val: 1, ..common(k) }),
                        ("another block", UfutexWaitv { uaddr: (page + 4096 * 8) as u64, ..common(k) }),
                        ("misaligned", UfutexWaitv { uaddr: at(k) as u64 + 1, ..common(k) }),
                        ("NULL", UfutexWaitv { uaddr: 0, ..common(k) }),
                        ("reserved", UfutexWaitv { reserved: 1, ..common(k) }),
                    ] {
                        if size == Size::U8 && what == "misaligned" {
                            continue; // every address is aligned for a byte
                        }
                        let mut es = all.clone();
                        es[k] = e;
                        assert_eq!(scan(&es), k, "{size:?}: {what} at {k} of {n}");
                    }
                }
            }
        }
    }

    /// The first pass (`plain_waitv_compare`, which passes over the common entries with
    /// `scan_common`) answers as the entry-by-entry pass, for runs of every size with one entry
    /// made uncommon at every position, in every way an entry can stop the scan.
    #[test]
    fn the_first_pass_answers_as_the_entry_by_entry_pass() {
        let [page, hole, after] = super::super::fault::pages_around_a_hole();
        for code in 0..4u32 {
            let size = Size::from_code(code);
            let bytes = size.bytes();
            let n = 40;
            // Words in two blocks: the first 30 on `page`, the rest on `after`; word i holds i + 1.
            let at = |i: usize| if i < 30 { page + i * bytes } else { after + (i - 30) * bytes };
            for i in 0..n {
                // SAFETY: our own writable pages, aligned to the size.
                unsafe {
                    match size {
                        Size::U8 => *(at(i) as *mut u8) = i as u8 + 1,
                        Size::U16 => *(at(i) as *mut u16) = i as u16 + 1,
                        Size::U32 => *(at(i) as *mut u32) = i as u32 + 1,
                        Size::U64 => *(at(i) as *mut u64) = i as u64 + 1,
                    }
                }
            }
            let common =
                |i: usize| UfutexWaitv { val: i as u64 + 1, uaddr: at(i) as u64, flags: 0x80 | code, reserved: 0 };
            let other = 0x80 | ((code + 1) % 4);
            // How entry `k` is changed: from the common entry, the hole's address, another size.
            type Change = fn(UfutexWaitv, usize, u32) -> UfutexWaitv;
            let changes: [(&str, Change); 7] = [
                ("a mismatch", |e, _, _| UfutexWaitv { val: e.val + 1, ..e }),
                ("another size", |e, _, other| UfutexWaitv { flags: other, val: 0, uaddr: e.uaddr & !7, ..e }),
                ("misaligned", |e, _, _| UfutexWaitv { uaddr: e.uaddr + 1, ..e }),
                ("reserved", |e, _, _| UfutexWaitv { reserved: 1, ..e }),
                ("in the hole", |e, hole, _| UfutexWaitv { uaddr: hole as u64, ..e }),
                ("NULL", |e, _, _| UfutexWaitv { uaddr: 0, ..e }),
                ("shared", |e, _, _| UfutexWaitv { flags: e.flags & !0x80, ..e }),
            ];
            for k in 0..n {
                for (what, change) in changes {
                    let mut es: Vec<UfutexWaitv> = (0..n).map(common).collect();
                    es[k] = change(es[k], hole, other);
                    for len in [k + 1, n] {
                        let es = &es[..len];
                        // SAFETY: the pages stay mapped (leaked) while `words` lives.
                        let (mut w1, mut w2) = unsafe { (ReadPages::new(), ReadPages::new()) };
                        let want = plain_waitv(es.as_ptr() as usize, len, &mut w1, |_, _, _| ());
                        let got = plain_waitv_compare(es.as_ptr() as usize, len, &mut w2);
                        assert_eq!(got, want, "{size:?}, {what} at {k} of {len}");
                    }
                }
                let es: Vec<UfutexWaitv> = (0..=k).map(common).collect();
                // SAFETY: as above.
                let mut words = unsafe { ReadPages::new() };
                assert_eq!(
                    plain_waitv_compare(es.as_ptr() as usize, k + 1, &mut words),
                    Some(Ok(())),
                    "{size:?}: all {k}"
                );
            }
        }
    }
}
