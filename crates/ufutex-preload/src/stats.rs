//! Per-operation counts of the calls that went to ufutex and to the kernel
//! (`UFUTEX_PRELOAD_STATS=1`), printed at exit.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Wait,
    Wake,
    Requeue,
    CmpRequeue,
    WakeOp,
    WaitBitset,
    WakeBitset,
    /// PI operations and the rest of `SYS_futex`.
    OtherFutex,
    Futex2Wait,
    Futex2Wake,
    Futex2Waitv,
    Futex2Requeue,
    PrctlHash,
}

const NAMES: [&str; 13] = [
    "FUTEX_WAIT",
    "FUTEX_WAKE",
    "FUTEX_REQUEUE",
    "FUTEX_CMP_REQUEUE",
    "FUTEX_WAKE_OP",
    "FUTEX_WAIT_BITSET",
    "FUTEX_WAKE_BITSET",
    "other SYS_futex",
    "futex_wait",
    "futex_wake",
    "futex_waitv",
    "futex_requeue",
    "PR_FUTEX_HASH",
];

/// [op][0]: to ufutex, [op][1]: to the kernel.
static COUNTS: [[AtomicU64; 2]; 13] = [const { [const { AtomicU64::new(0) }; 2] }; 13];

/// Count one call of `op` (if `relevant`, and statistics are on), taken by ufutex or passed to
/// the kernel.
pub(crate) fn count(op: Kind, relevant: bool, to_ufutex: bool) {
    if relevant && crate::config::stats() {
        record(op, to_ufutex);
    }
}

/// [`count`] where the caller has seen that statistics are on (and only then worked out `op`).
pub(crate) fn record(op: Kind, to_ufutex: bool) {
    // Relaxed: a statistic.
    COUNTS[op as usize][usize::from(!to_ufutex)].fetch_add(1, Ordering::Relaxed);
}

/// Print the counts to stderr, one line per operation that was called, under a line that
/// names the process (a script's every program reports); one line if none was.
pub(crate) fn report() {
    use std::io::Write;
    let rows: String = NAMES
        .iter()
        .zip(&COUNTS)
        // Relaxed: at exit; a statistic.
        .map(|(name, c)| (name, c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed)))
        .filter(|&(_, u, k)| u + k > 0)
        .map(|(name, u, k)| format!("ufutex-preload: {name:<18} {u:>10} {k:>10}\n"))
        .collect();
    let pid = std::process::id();
    let out = if rows.is_empty() {
        // Say why, as the usual cause is not ours to see: glibc's own thread objects make the
        // system call themselves.
        format!("ufutex-preload (pid {pid}): no futex call through syscall() or prctl()\n")
    } else {
        format!("ufutex-preload (pid {pid}): calls by operation (to ufutex / to the kernel)\n{rows}")
    };
    let _ = std::io::stderr().write_all(out.as_bytes());
}
