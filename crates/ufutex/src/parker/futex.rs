//! The kernel futex, used by the parker and the bucket lock: futex2 `futex_wait` (455) with an
//! absolute deadline — restarted by the kernel under `SA_RESTART` with the same deadline, and
//! `EINTR` otherwise — and the legacy `FUTEX_WAKE` (no futex2 wake is needed for a u32).

use crate::deadline::Timeout;
use std::sync::atomic::AtomicU32;

const SYS_FUTEX_WAIT: libc::c_long = 455;
const FUTEX2_SIZE_U32: libc::c_ulong = 0x02;
const FUTEX2_PRIVATE: libc::c_ulong = 128;

/// How a kernel wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelWait {
    /// Woken, or the value had already changed, or a spurious return: re-check and retry.
    Retry,
    TimedOut,
    Interrupted,
}

/// Sleep while `*word == val`, until woken or `timeout` passes.
pub(crate) fn wait(word: &AtomicU32, val: u32, timeout: Option<&Timeout>) -> KernelWait {
    let ts = timeout.map(|t| t.at.to_libc());
    let (ts_ptr, clock) = match (&ts, timeout) {
        (Some(ts), Some(t)) => (ts as *const libc::timespec, t.clock.id()),
        _ => (std::ptr::null(), libc::CLOCK_MONOTONIC),
    };
    // SAFETY:
    // - `word` is a live, aligned u32 for the whole call (borrowed);
    // - `ts_ptr` is null or points to `ts`, which outlives the call;
    // - futex_wait(uaddr, val, mask, flags, timeout, clockid) only reads these.
    let r = unsafe {
        libc::syscall(
            SYS_FUTEX_WAIT,
            word.as_ptr(),
            val as libc::c_ulong,
            u32::MAX as libc::c_ulong,
            FUTEX2_SIZE_U32 | FUTEX2_PRIVATE,
            ts_ptr,
            clock,
        )
    };
    if r == 0 {
        return KernelWait::Retry;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ETIMEDOUT) => KernelWait::TimedOut,
        Some(libc::EINTR) => KernelWait::Interrupted,
        _ => KernelWait::Retry, // EAGAIN: the value changed
    }
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
