//! The legacy `SYS_futex` operations on private words (and on process-shared ones with
//! `UFUTEX_PRELOAD_SHARED=table`), onto ufutex's C ABI with the legacy semantics: FUTEX_WAIT's
//! timeout is relative (CLOCK_MONOTONIC), WAIT_BITSET's absolute (on CLOCK_REALTIME with
//! `FUTEX_CLOCK_REALTIME`, which any other operation refuses with `ENOSYS`, FUTEX_WAIT once its
//! timeout passed the checks); a private word that is not read may be NULL; a wake count ≤ 0
//! wakes one, as the kernel's loop does; REQUEUE compares nothing; the second count of
//! REQUEUE, CMP_REQUEUE and WAKE_OP sits in the timeout slot.

use crate::stats::{self, Kind};
use libc::{c_int, c_long, c_uint, c_ulong, c_void, timespec};
use ufutex::preload as abi;

const WAIT: c_int = 0;
const WAKE: c_int = 1;
const REQUEUE: c_int = 3;
const CMP_REQUEUE: c_int = 4;
const WAKE_OP: c_int = 5;
const WAIT_BITSET: c_int = 9;
const WAKE_BITSET: c_int = 10;
const PRIVATE_FLAG: c_int = 128;
const CLOCK_REALTIME_FLAG: c_int = 256;

/// A private 32-bit word, in the C ABI's flags.
const U32_PRIVATE: c_uint = 0x02 | 0x80;
/// A process-shared 32-bit word, in the C ABI's flags.
const U32_SHARED: c_uint = 0x02;
const MATCH_ANY: c_ulong = 0xffff_ffff;

// The operations taken, a bit per command: `call` tests a command against these masks and at
// most two compares, not with a `match`, which made a jump table (and a table of statistics
// kinds) in read-only data, a page to bring back on a call made after a while asleep
// (BENCHMARKS.md, nineteenth session).

/// A command's bit.
const fn bit(cmd: c_int) -> u32 {
    1 << cmd
}
const WAITS: u32 = bit(WAIT) | bit(WAIT_BITSET);
const WAKES: u32 = bit(WAKE) | bit(WAKE_BITSET);
const REQUEUES: u32 = bit(REQUEUE) | bit(CMP_REQUEUE);
const TAKEN: u32 = WAITS | WAKES | REQUEUES | bit(WAKE_OP);

/// `cmd`'s bit among [`TAKEN`]'s, 0 for every other command.
fn bit_of(cmd: c_int) -> u32 {
    match u32::try_from(cmd) {
        Ok(c @ 0..32) => (1 << c) & TAKEN,
        _ => 0,
    }
}

/// The statistics' name of a command (only with `UFUTEX_PRELOAD_STATS=1`).
#[cold]
fn kind_of(cmd: c_int) -> Kind {
    match cmd {
        WAIT => Kind::Wait,
        WAKE => Kind::Wake,
        REQUEUE => Kind::Requeue,
        CMP_REQUEUE => Kind::CmpRequeue,
        WAKE_OP => Kind::WakeOp,
        WAIT_BITSET => Kind::WaitBitset,
        WAKE_BITSET => Kind::WakeBitset,
        _ => Kind::OtherFutex,
    }
}

/// `syscall(SYS_futex, uaddr, op, val, timeout or val2, uaddr2, val3)`: the result if ufutex
/// takes it (one of the operations above, on a private word, or on a process-shared one with
/// `UFUTEX_PRELOAD_SHARED=table`), else `None`.
///
/// # Safety
/// The arguments are the caller's: pointers are only handed to the C ABI, which checks them.
pub(crate) unsafe fn call(a: [c_long; 6]) -> Option<c_long> {
    let op = a[1] as c_int;
    let cmd = op & !(PRIVATE_FLAG | CLOCK_REALTIME_FLAG);
    let b = bit_of(cmd);
    // Process-shared words go where the futex2 calls on them go (see `config::init`).
    let private = op & PRIVATE_FLAG != 0;
    let ours = b != 0 && (private || crate::config::shared_table());
    if crate::config::stats() {
        stats::record(kind_of(cmd), ours);
    }
    if !ours {
        return None;
    }
    if op & CLOCK_REALTIME_FLAG != 0 && cmd != WAIT_BITSET {
        // The kernel reads and checks a wait's timeout on entry, before it refuses the clock.
        let bad_timeout = if cmd == WAIT { abi::relative_timeout_error(a[3] as *const timespec) } else { None };
        return Some(abi::fail(bad_timeout.unwrap_or(libc::ENOSYS)));
    }
    // SAFETY: forwarded contract.
    Some(unsafe { run(cmd, private, op & CLOCK_REALTIME_FLAG != 0, a) })
}

/// For `syscall(number, _, op, ...)`: the command of a legacy futex call that [`call`] takes on
/// a private word with no clock flag, with no statistics to count (the caller's fast way to
/// [`run`]), or `None` for every other call, which `dispatch_syscall` answers.
#[inline(always)]
pub(crate) fn plain_private(number: c_long, op: c_long) -> Option<c_int> {
    // The private flag set, the clock flag clear and nothing above it, in one compare (`op` is
    // an `int`: the register's upper half is junk, which the kernel does not read either).
    let cmd = op as c_int ^ PRIVATE_FLAG;
    (number == libc::SYS_futex && bit_of(cmd) != 0 && crate::config::plain()).then_some(cmd)
}

/// A taken command `cmd` onto the C ABI, on a `private` word or a process-shared one, timed on
/// the `realtime` clock or the monotonic one.
///
/// # Safety
/// As [`call`]; `cmd` is one of [`TAKEN`]'s, and on the realtime clock only WAIT_BITSET.
#[inline(always)]
pub(crate) unsafe fn run(cmd: c_int, private: bool, realtime: bool, a: [c_long; 6]) -> c_long {
    let (uaddr, val, utime, uaddr2, val3) = (a[0] as *mut c_void, a[2] as u32, a[3], a[4] as *mut c_void, a[5] as u32);
    let clock = if realtime { libc::CLOCK_REALTIME } else { libc::CLOCK_MONOTONIC };
    let val2 = utime as c_int;
    let flags = if private { U32_PRIVATE } else { U32_SHARED };
    let b = bit(cmd);
    // SAFETY: for every call below: the pointers are the caller's, checked by the C ABI as the
    // kernel would check them; the C ABI's contract (memory found mapped stays mapped for the
    // call) is the caller's, as it is for the system call.
    unsafe {
        if b & WAKES != 0 {
            let mask = if cmd == WAKE_BITSET { val3.into() } else { MATCH_ANY };
            abi::ufutex_wake(uaddr, mask, at_least_one(val as c_int), flags)
        } else if b & REQUEUES != 0 {
            // REQUEUE compares nothing; CMP_REQUEUE compares the source with val3.
            abi::preload_requeue(uaddr, uaddr2, val as c_int, val2, (cmd == CMP_REQUEUE).then_some(val3), !private)
        } else if b == bit(WAKE_OP) {
            abi::ufutex_wake_op(uaddr, uaddr2, at_least_one(val as c_int), at_least_one(val2), val3, flags)
        } else if cmd == WAIT {
            abi::preload_wait_relative(uaddr, val.into(), MATCH_ANY, flags, utime as *const timespec)
        } else {
            abi::preload_wait(uaddr, val.into(), val3.into(), flags, utime as *const timespec, clock)
        }
    }
}

/// The kernel's wake loops stop after the first wake when the count is ≤ 0.
fn at_least_one(nr: c_int) -> c_int {
    nr.max(1)
}
