//! The futex2 system calls, one to one onto ufutex's C ABI (same arguments, same flags, same
//! errors). A call on a process-shared word (no `FUTEX2_PRIVATE`) is refused by ufutex with
//! `EOPNOTSUPP` before anything is queued or woken: it then goes to the kernel as it is. (A
//! `futex_waitv` that mixes private and shared words is taken: `preload_waitv`.)

use crate::stats::{self, Kind};
use libc::{c_int, c_long, c_uint, c_ulong, c_void, clockid_t, timespec};
use ufutex::preload::{self as abi, UfutexWaitv};

pub(crate) const WAITV: c_long = 449;
pub(crate) const WAKE: c_long = 454;
pub(crate) const WAIT: c_long = 455;
pub(crate) const REQUEUE: c_long = 456;

/// The result if ufutex takes the call, else `None` (the kernel's).
///
/// # Safety
/// The arguments are the caller's: pointers are only handed to the C ABI, which checks them.
pub(crate) unsafe fn call(number: c_long, a: [c_long; 6]) -> Option<c_long> {
    // SAFETY: for every call: as in `legacy::call`, the C ABI checks the caller's pointers as the
    // kernel would, and its contract is the caller's, as for the system call.
    let (op, r) = unsafe {
        match number {
            // A 32-bit wait also sleeps on its word in the kernel (see the crate docs).
            WAIT => (
                Kind::Futex2Wait,
                abi::preload_wait(
                    a[0] as *mut c_void,
                    a[1] as c_ulong,
                    a[2] as c_ulong,
                    a[3] as c_uint,
                    a[4] as *const timespec,
                    a[5] as clockid_t,
                ),
            ),
            // A negative count wakes one, as the kernel's loop does (its count check comes
            // after the first wake); ufutex's C ABI refuses it.
            WAKE => (
                Kind::Futex2Wake,
                abi::ufutex_wake(a[0] as *mut c_void, a[1] as c_ulong, strict_count(a[2] as c_int), a[3] as c_uint),
            ),
            // Its 32-bit words too; and a vector that mixes process-shared words with private
            // ones waits on the shared ones in the kernel (`preload_waitv`).
            WAITV => (
                Kind::Futex2Waitv,
                abi::preload_waitv(
                    a[0] as *mut UfutexWaitv,
                    a[1] as c_uint,
                    a[2] as c_uint,
                    a[3] as *const timespec,
                    a[4] as clockid_t,
                ),
            ),
            _ => (
                Kind::Futex2Requeue,
                abi::ufutex_requeue(a[0] as *mut UfutexWaitv, a[1] as c_uint, a[2] as c_int, a[3] as c_int),
            ),
        }
    };
    let shared = r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EOPNOTSUPP);
    stats::count(op, true, !shared);
    (!shared).then_some(r)
}

/// `futex_wake`'s count as the kernel's loop reads it: 0 wakes none, a negative count one (the
/// loop stops once it has woken at least that many).
fn strict_count(nr: c_int) -> c_int {
    if nr < 0 {
        1
    } else {
        nr
    }
}
