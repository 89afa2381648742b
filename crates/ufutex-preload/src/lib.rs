//! `libufutex_preload.so`: run an unmodified program's futex calls on ufutex.
//!
//! `LD_PRELOAD=libufutex_preload.so program` interposes `syscall()` and `prctl()`
//! (`interpose.rs`). Futex calls made through them go to ufutex:
//! - the legacy `SYS_futex` operations WAIT, WAKE, WAIT_BITSET, WAKE_BITSET, REQUEUE,
//!   CMP_REQUEUE and WAKE_OP on private words (`FUTEX_PRIVATE_FLAG`), with the legacy
//!   semantics (`legacy.rs`);
//! - the futex2 calls `futex_wait`, `futex_wake`, `futex_waitv`, `futex_requeue` on private
//!   words, one to one onto the C ABI (`futex2.rs`);
//! - `prctl(PR_FUTEX_HASH, SET_SLOTS | GET_SLOTS)`, onto `ufutex_hash_set_slots`/`get_slots`.
//!
//! Everything else goes to the kernel unchanged: process-shared futex words (so that processes
//! that are not preloaded still meet them; `UFUTEX_PRELOAD_SHARED=table` sends the operations
//! above on them, legacy and futex2 alike, to ufutex's shared table instead), PI operations,
//! robust lists, every other system call. A 32-bit wait that ufutex takes (a `futex_waitv` too,
//! on each of its 32-bit words) also sleeps in the kernel on its own word, private or shared, so
//! that a wake made without `syscall()` (a raw system call, the kernel's own, a process that is
//! not preloaded) still reaches it; such a wait may return spuriously, as a legacy futex wait
//! may. A `futex_waitv` that mixes private words with shared ones that go to the kernel is taken
//! whole: its private words wait in ufutex, its shared ones in the kernel, and the thread sleeps
//! on all of them (a waitv of shared words only goes to the kernel).
//!
//! Environment: `UFUTEX_PRELOAD=off` passes every call through; `UFUTEX_PRELOAD_STATS=1`
//! prints at exit how many calls of each operation went to ufutex and to the kernel.
//!
//! Not reachable this way: glibc's own pthread objects, Go and Java, which make the system
//! call themselves.
//!
//! Not every lock gains: Rust's `std::sync::Mutex`, whose waiters sleep on the lock's own
//! word beside the data its holder writes, runs at 0.3–0.6× of itself on the kernel under
//! contention with ~1 µs critical sections (the README; BENCHMARKS.md, seventy-third session).

mod config;
mod futex2;
mod legacy;
mod stats;

use libc::{c_long, c_ulong};

mod interpose;
mod reentry;

/// What ufutex does with a `syscall()`: the result if it takes the call (with `errno` set as
/// `syscall()` would), `None` for the kernel.
///
/// # Safety
/// The arguments are the caller's `syscall()` arguments: the pointers among them are only
/// passed to the C ABI, which checks them as the kernel would.
unsafe fn dispatch_syscall(number: c_long, a: [c_long; 6]) -> Option<c_long> {
    if !config::enabled() {
        return None;
    }
    // SAFETY: forwarded contract.
    std::panic::catch_unwind(|| unsafe { dispatch(number, a) }).unwrap_or(None)
}

/// # Safety
/// As [`dispatch_syscall`].
unsafe fn dispatch(number: c_long, a: [c_long; 6]) -> Option<c_long> {
    match number {
        // SAFETY: forwarded contract.
        libc::SYS_futex => unsafe { legacy::call(a) },
        // SAFETY: forwarded contract.
        futex2::WAITV | futex2::WAKE | futex2::WAIT | futex2::REQUEUE => unsafe { futex2::call(number, a) },
        _ => None,
    }
}

const PR_FUTEX_HASH: c_long = 78;
const PR_FUTEX_HASH_SET_SLOTS: c_ulong = 1;
const PR_FUTEX_HASH_GET_SLOTS: c_ulong = 2;

/// What ufutex does with a `prctl()`: `PR_FUTEX_HASH`'s SET_SLOTS and GET_SLOTS size its
/// process default table; everything else is the kernel's (`None`).
fn dispatch_prctl(option: c_long, a2: c_ulong, a3: c_ulong, a4: c_ulong) -> Option<c_long> {
    let taken = match (config::enabled(), option, a2) {
        (true, PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS) => Some(ufutex::preload::ufutex_hash_set_slots(a3, a4)),
        (true, PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS) => Some(ufutex::preload::ufutex_hash_get_slots()),
        _ => None,
    };
    stats::count(stats::Kind::PrctlHash, option == PR_FUTEX_HASH, taken.is_some());
    taken
}
