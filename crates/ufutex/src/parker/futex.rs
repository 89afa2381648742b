//! The kernel futex, used by the parker and the bucket lock: futex2 `futex_wait` (455) with an
//! absolute deadline — restarted by the kernel under `SA_RESTART` with the same deadline, and
//! `EINTR` otherwise — `futex_waitv` (449) for a sleep on two words (the parker's bell), and
//! the legacy `FUTEX_WAKE` (no futex2 wake is needed for a u32).
//!
//! Where `futex_wait` does not exist (`ENOSYS`: kernels before 6.7, valgrind, some seccomp
//! sandboxes) the legacy `FUTEX_WAIT_BITSET` takes over with the same absolute deadline. It
//! returns `EINTR` even for `SA_RESTART` handlers, so there a signal may end a wait early as
//! `Interrupted`: the one difference, and only on such systems.
//!
//! # Back from a sleep: the stack is cold
//!
//! A thread woken from a kernel wait returns through the frames of our wait (the parker's
//! sleep loop, the wait, the front end): ~1.2 KB of stack, last touched before it slept, and
//! since then evicted by the threads that ran meanwhile, or left in the other CPU's cache. The
//! returns come one after another, so the misses come in turn too. With 128 threads woken at
//! once, the path from the kernel's return to the caller of `wait` took a median of 490–1,370
//! TSC ticks (0.2–0.56 µs) over 9 runs, against ~25 for the kernel's own futex returning to the
//! same caller, and those threads mostly run one after another. So a wait that returns from
//! the kernel first prefetches [`RESUME_LINES`] lines of the stack above it, and the misses
//! overlap: 390–515 ticks, and the ratio to the kernel until all 128 ran rose 3–12%
//! (BENCHMARKS.md, sixty-sixth session).

use super::Watch;
use crate::deadline::Timeout;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

const SYS_FUTEX_WAIT: libc::c_long = 455;
const SYS_FUTEX_WAITV: libc::c_long = 449;
const FUTEX2_SIZE_U32: libc::c_ulong = 0x02;
const FUTEX2_PRIVATE: libc::c_ulong = 128;

pub(crate) use super::KernelWait;

/// The stack lines above a kernel wait that its return path touches (module docs): from the
/// kernel wait to a caller of the Rust API the frames spanned 1,264 bytes in a release build;
/// 24 lines (1.5 KB) also cover the C ABI's frame above them. Fewer lines than the path touches
/// leave the rest to miss as before (8 lines left 70–300 ticks more than 16–32 did); one past
/// it costs an idle prefetch.
const RESUME_LINES: usize = 24;

/// Whether `futex_wait` (455) answered ENOSYS once: then every wait uses the legacy call.
static NO_FUTEX2: AtomicBool = AtomicBool::new(false);

/// Sleep while `*word == val`, until woken or `timeout` passes.
pub(crate) fn wait(word: &AtomicU32, val: u32, timeout: Option<&Timeout>) -> KernelWait {
    wait_flags(word, val, u32::MAX, timeout, true)
}

/// [`wait`], woken only by a wake whose bits meet `bits` ([`wake_bits`]): the parker's ring
/// words (`rings.rs`).
#[cfg(not(feature = "fallback-parker"))] // the Linux parker's rings only
pub(crate) fn wait_bits(word: &AtomicU32, val: u32, bits: u32, timeout: Option<&Timeout>) -> KernelWait {
    wait_flags(word, val, bits, timeout, true)
}

/// [`wait`] on a word in memory shared between processes (the kernel keys it by the object
/// that backs the page, so a waker in another process that maps it meets this thread).
pub(crate) fn wait_shared(word: &AtomicU32, val: u32, timeout: Option<&Timeout>) -> KernelWait {
    wait_flags(word, val, u32::MAX, timeout, false)
}

fn wait_flags(word: &AtomicU32, val: u32, bits: u32, timeout: Option<&Timeout>, private: bool) -> KernelWait {
    let ts = timeout.map(|t| t.at().to_libc());
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    let clock = timeout.map_or(libc::CLOCK_MONOTONIC, |t| t.clock.id());
    // Relaxed: a hint; a thread that misses it makes one more failing futex_wait call.
    let r = if NO_FUTEX2.load(Ordering::Relaxed) {
        legacy_wait(word, val, bits, ts_ptr, clock, private)
    } else {
        // SAFETY:
        // - `word` is a live, aligned u32 for the whole call (borrowed);
        // - `ts_ptr` is null or points to `ts`, which outlives the call;
        // - futex_wait(uaddr, val, mask, flags, timeout, clockid) only reads these.
        let r = unsafe {
            libc::syscall(
                SYS_FUTEX_WAIT,
                word.as_ptr(),
                val as libc::c_ulong,
                bits as libc::c_ulong,
                FUTEX2_SIZE_U32 | if private { FUTEX2_PRIVATE } else { 0 },
                ts_ptr,
                clock,
            )
        };
        if r != 0 && errno() == libc::ENOSYS {
            NO_FUTEX2.store(true, Ordering::Relaxed);
            legacy_wait(word, val, bits, ts_ptr, clock, private)
        } else {
            r
        }
    };
    // The stack above this frame (module docs).
    let here = 0u8;
    prefetch_lines(&here, RESUME_LINES);
    if r == 0 {
        return KernelWait::Retry;
    }
    outcome(timeout)
}

/// One entry of `futex_waitv` (the kernel's `struct futex_waitv`).
#[repr(C)]
struct WaitvEntry {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// Whether the kernel has `futex_waitv` (449), once asked (`primitive::asked_once`).
static WAITV: AtomicU8 = AtomicU8::new(0);

/// Whether [`waitv`] can be used (asked once: an empty vector is EINVAL where the call exists).
pub(crate) fn has_waitv() -> bool {
    crate::primitive::asked_once(&WAITV, || {
        // SAFETY: a null vector of length 0 is rejected before anything is read.
        let r = unsafe { libc::syscall(SYS_FUTEX_WAITV, std::ptr::null::<WaitvEntry>(), 0, 0, 0, 0) };
        r != 0 && errno() == libc::EINVAL
    })
}

/// The most words one `futex_waitv` takes (the kernel's `FUTEX_WAITV_MAX`).
pub(crate) const WAITV_MAX: usize = 128;

/// Sleep while every word of `head` and then `tail` holds its value (u32 words, at most
/// [`WAITV_MAX`] in all, each private or process-shared as its [`Watch`] says), until one is
/// woken or `timeout` passes (`futex_waitv`, whose deadline is absolute on `clock` like
/// `futex_wait`'s): `Ok(index of the woken word in head ++ tail)`, or why not. Only after
/// [`has_waitv`] said yes. (The Linux parker's own word, bell and watched words; the
/// process-shared park.)
pub(crate) fn waitv(head: &[Watch<'_>], tail: &[Watch<'_>], timeout: Option<&Timeout>) -> Result<usize, KernelWait> {
    // (Callers cap their words; past the kernel's limit, `waitv_in` would sleep on the first.)
    debug_assert!(head.len() + tail.len() <= WAITV_MAX, "futex_waitv takes at most {WAITV_MAX} words");
    // The common sleeps (a parker's own word, its bell, one watched word) on a small array.
    if head.len() + tail.len() <= 4 {
        waitv_in::<4>(head, tail, timeout)
    } else {
        waitv_in::<WAITV_MAX>(head, tail, timeout)
    }
}

/// [`waitv`] with the kernel's vector on the stack, `N` entries long.
#[inline(never)]
fn waitv_in<const N: usize>(
    head: &[Watch<'_>],
    tail: &[Watch<'_>],
    timeout: Option<&Timeout>,
) -> Result<usize, KernelWait> {
    let ts = timeout.map(|t| t.at().to_libc());
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    let clock = timeout.map_or(libc::CLOCK_MONOTONIC, |t| t.clock.id());
    let mut v = [const { WaitvEntry { val: 0, uaddr: 0, flags: 0, reserved: 0 } }; N];
    let n = (head.len() + tail.len()).min(N);
    for (e, w) in v.iter_mut().zip(head.iter().chain(tail)) {
        let flags = if w.shared { FUTEX2_SIZE_U32 } else { FUTEX2_SIZE_U32 | FUTEX2_PRIVATE };
        *e = WaitvEntry { val: u64::from(w.val), uaddr: w.word.as_ptr() as u64, flags: flags as u32, reserved: 0 };
    }
    // SAFETY:
    // - every word is a live, aligned u32 for the whole call (borrowed);
    // - `v[..n]` and `ts` outlive the call; futex_waitv(waiters, nr, flags, timeout, clockid)
    //   only reads them.
    let r = unsafe { libc::syscall(SYS_FUTEX_WAITV, v.as_ptr(), n, 0, ts_ptr, clock) };
    // The stack above the vector (module docs).
    prefetch_lines(v.as_ptr_range().end.cast(), RESUME_LINES);
    match usize::try_from(r) {
        Ok(i) => Ok(i),
        Err(_) => Err(outcome(timeout)),
    }
}

/// Start reading the `lines` cache lines from the one that holds `from` on
/// (`primitive::prefetch` each).
#[inline(always)]
fn prefetch_lines(from: *const u8, lines: usize) {
    let first = from as usize & !63;
    for i in 0..lines {
        crate::primitive::prefetch(first.wrapping_add(64 * i) as *const u8);
    }
}

/// What a failed kernel wait means.
fn outcome(timeout: Option<&Timeout>) -> KernelWait {
    match errno() {
        libc::ETIMEDOUT => KernelWait::TimedOut,
        libc::EINTR => KernelWait::Interrupted,
        libc::EAGAIN => KernelWait::Retry, // a value changed
        // Anything else (no futex at all): never sleep in a busy loop past the deadline.
        _ if timeout.is_some_and(|t| t.expired()) => KernelWait::TimedOut,
        _ => {
            std::thread::yield_now();
            KernelWait::Retry
        }
    }
}

/// `FUTEX_WAIT_BITSET` of `bits` with an absolute deadline on `clock`.
fn legacy_wait(
    word: &AtomicU32,
    val: u32,
    bits: u32,
    ts: *const libc::timespec,
    clock: libc::clockid_t,
    private: bool,
) -> libc::c_long {
    let realtime = if clock == libc::CLOCK_REALTIME { libc::FUTEX_CLOCK_REALTIME } else { 0 };
    let private = if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
    // SAFETY:
    // - `word` is a live, aligned u32 for the whole call (borrowed);
    // - `ts` is null or points to a timespec that outlives the call (the caller's);
    // - FUTEX_WAIT_BITSET ignores uaddr2 (null) and reads only these.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | private | realtime,
            val,
            ts,
            std::ptr::null::<u32>(),
            bits,
        )
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Wake up to `n` threads sleeping on `word`.
///
/// Takes a raw pointer because the caller may no longer own the memory: the kernel only hashes
/// the address, so a stale one costs at most a spurious wake, which every sleeper re-checks.
pub(crate) fn wake_addr(word: *const AtomicU32, n: i32) {
    // SAFETY:
    // - FUTEX_WAKE never dereferences the address in userspace; an address that is no longer
    //   mapped or reused only makes the kernel find no waiter or wake one that re-checks.
    unsafe {
        libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n);
    }
}

pub(crate) fn wake(word: &AtomicU32, n: i32) {
    wake_addr(word, n)
}

/// Wake the threads asleep on `word` ([`wait_bits`]) whose bits meet `bits`, for words whose
/// sleepers each have a bit of their own: at most one a bit, so the kernel stops once it has
/// woken as many as `bits` has bits (it looks at the word's sleepers oldest first).
#[cfg(not(feature = "fallback-parker"))] // the Linux parker's rings only
pub(crate) fn wake_bits(word: &AtomicU32, bits: u32) {
    // SAFETY: FUTEX_WAKE_BITSET reads nothing in userspace (it ignores uaddr2, null); `word`
    // is a live u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE_BITSET | libc::FUTEX_PRIVATE_FLAG,
            bits.count_ones() as i32,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            bits,
        );
    }
}

/// Wake up to `n` threads sleeping on `word` in memory shared between processes: how many.
pub(crate) fn wake_shared(word: &AtomicU32, n: i32) -> usize {
    // SAFETY: FUTEX_WAKE (shared) reads nothing in userspace; `word` is a live u32.
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n) };
    usize::try_from(r).unwrap_or(0)
}
