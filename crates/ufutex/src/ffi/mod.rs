//! The C ABI: `libufutex`, a drop-in for the futex2 system calls (`include/ufutex.h`).
//!
//! Like the kernel's `kernel/futex/syscalls.c`, this is the only place that sees raw integers
//! and raw pointers. Each entry point (in `calls`) validates its arguments in the kernel's
//! order (`validate`), reads the caller's memory without trusting it (`fault`), translates to
//! the core's types, and calls the core. Nothing unwinds into C: a panic becomes `-1`/`EINVAL`.
//!
//! - `abi`: the flag values and `struct ufutex_waitv`, asserted against the header;
//! - `validate`: flags, values, masks, counts, timeouts, addresses, waitv arrays → errno;
//! - `fault`: `EFAULT` instead of a crash for unmapped memory, without a syscall on x86_64;
//! - `errno`: the caller's `errno`, set without a call into libc;
//! - `calls`: the `#[no_mangle] extern "C"` functions;
//! - `sync`: the pthread-like C face of `crate::sync` (`ufutex_mutex_*`, `ufutex_cond_*`).

pub(crate) mod abi;
pub(crate) mod calls;
mod errno;
mod fault;
mod named;
mod sync;
#[cfg(test)]
mod tests;
pub(crate) mod validate;
mod wake_op;

/// Run `f` as a C entry point: its value (never negative), or -1 with `errno` set; a panic is
/// `EINVAL`.
///
/// Inside the unwinding guard the outcome travels as one integer (an error as its negated
/// errno), not as a `Result`: `catch_unwind` passes it through memory, and a `Result` written
/// as two 4-byte halves and read back as 8 bytes stalls store forwarding — half the time of a
/// failing wait (`EAGAIN`) went there.
#[inline(always)]
pub(crate) fn entry(f: impl FnOnce() -> Result<std::ffi::c_long, Errno>) -> std::ffi::c_long {
    let packed = || match f() {
        Ok(v) => {
            debug_assert!(v >= 0, "a C entry's value is never negative");
            v
        }
        Err(Errno(e)) => -std::ffi::c_long::from(e),
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(packed))
        .unwrap_or(-std::ffi::c_long::from(libc::EINVAL))
    {
        v if v >= 0 => v,
        e => failed(Errno(-e as i32)),
    }
}

/// Return as a failed system call does: `errno` set to `e`, -1.
#[inline(always)]
pub(crate) fn failed(e: Errno) -> std::ffi::c_long {
    errno::fail(e.0)
}

/// An `errno` value: why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl Errno {
    pub(crate) const EINVAL: Errno = Errno(libc::EINVAL);
    pub(crate) const EFAULT: Errno = Errno(libc::EFAULT);
    pub(crate) const EAGAIN: Errno = Errno(libc::EAGAIN);
    pub(crate) const ENOMEM: Errno = Errno(libc::ENOMEM);
    pub(crate) const EOPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
}

impl From<crate::error::WaitError> for Errno {
    fn from(e: crate::error::WaitError) -> Errno {
        Errno(e.errno())
    }
}

impl From<crate::waitv::WaitvError> for Errno {
    fn from(e: crate::waitv::WaitvError) -> Self {
        match e {
            crate::waitv::WaitvError::Wait(e) => e.into(),
            crate::waitv::WaitvError::NoMemory => Errno::ENOMEM,
        }
    }
}

impl From<crate::shared::SharedError> for Errno {
    fn from(e: crate::shared::SharedError) -> Errno {
        Errno(e.errno())
    }
}

impl From<fault::Fault> for Errno {
    fn from(_: fault::Fault) -> Errno {
        Errno::EFAULT
    }
}
