//! The command line as clap sees it. Values are checked further in [`crate::options`].

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "ufutex-bench",
    version,
    about = "Every futex benchmark, side by side: ufutex, the kernel's futex2 syscalls and userspace peers, in one run"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `--shared`, for the futex workloads that have a process-shared form.
#[derive(Debug, Clone, Copy, Args)]
pub struct SharedArg {
    /// Process-shared futexes (like perf bench futex -S): ufutex → ufutex-shared, kernel →
    /// kernel-shared (the baseline), words in a MAP_SHARED memfd; other competitors left out
    #[arg(long)]
    pub shared: bool,
}

/// `--pin`, for the workloads that wake sleepers.
#[derive(Debug, Clone, Copy, Args)]
pub struct PinArg {
    /// Pin the waker to the first allowed CPU and waiter i to the (i+1)-th, round robin (as
    /// perf bench futex pins its waiters), so every competitor has the same placement
    #[arg(long)]
    pub pin: bool,
}

/// Options every subcommand takes.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Competitors, comma-separated (futex workloads: ufutex, ufutex-domain, kernel, atomic-wait,
    /// parking_lot_core, only when named ufutex-c (ufutex through its C ABI), and with --shared
    /// also ufutex-shared, kernel-shared; keyed: kernel-semget, ufutex-keyed; sem-pingpong:
    /// ufutex-named, sysv-semop, posix-sem; lock: ufutex, pthread, std, parking_lot, and, only
    /// when named, the ufutex variants ufutex-nohandoff, ufutex-handoff-T (T: 50us, 1ms, … or
    /// Nwakeups) and ufutex-spin-BxF-Yy[-cC] (B busy rounds from F hints, then Y yields; at
    /// most C busy rounds while others wait on the lock; default 5x16-7y, no cut))
    #[arg(long = "impl", value_name = "LIST")]
    pub impls: Option<String>,
    /// Timed repetitions per competitor, interleaved round-robin [default: 5; report --quick: 2]
    #[arg(long, value_name = "N")]
    pub reps: Option<usize>,
    /// Seconds per timed repetition (throughput workloads); each workload has its own default
    #[arg(long, value_name = "SECS")]
    pub runtime: Option<f64>,
    /// Table size of the `ufutex-domain` competitor: a power of two ≥ 2, "auto" or "large"
    #[arg(long, default_value = "256", value_name = "SLOTS")]
    pub domain_slots: String,
    /// Also write the results as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress line
    #[arg(long, short)]
    pub quiet: bool,
    /// Skip the unmeasured warm-up run of each competitor
    #[arg(long)]
    pub no_warmup: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fast paths: wake with no waiters (bare, and right after a store to the word, beside a plain store and load) and wait with a mismatching value, ns per call
    Fastpath {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
    },
    /// The kernel's own perf bench futex (hash, wake, wake-parallel, requeue), as it is and
    /// through the preload library, interleaved; with --shared, perf's -S (process-shared words)
    /// on the kernel's shared futex and, through the preload library's
    /// UFUTEX_PRELOAD_SHARED=table, on ufutex's shared table
    PerfBench {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
    },
    /// perf's futex-hash: T threads × F futexes, waits that mismatch; --contend takes bucket locks
    Hash {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        /// Threads
        #[arg(long, short = 't', default_value_t = 2)]
        threads: usize,
        /// Futexes per thread
        #[arg(long, short = 'f', default_value_t = 1024)]
        futexes: usize,
        /// Wake (with a non-matching mask) words that have sleepers: real bucket-lock traffic
        #[arg(long)]
        contend: bool,
        /// Sleeping waiters in --contend mode
        #[arg(long, default_value_t = 64)]
        sleepers: usize,
        /// Word size in bits: 8, 16, 32 or 64 (the kernel only has 32)
        #[arg(long, default_value_t = 32)]
        size: u32,
        /// Sweep table sizes: comma-separated powers of two, "auto", "large", or "sweep"
        /// (= auto,2,4,…,2048,large); ufutex domains vs the kernel's PR_FUTEX_HASH
        #[arg(long, value_name = "LIST")]
        slots: Option<String>,
    },
    /// perf's futex-wake: N sleepers, one waker
    Wake {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        #[arg(long, short = 'n', default_value_t = 128)]
        waiters: usize,
        /// Waiters woken per call (default: all in one call)
        #[arg(long)]
        nwake: Option<usize>,
        /// With --shared: register the words' mapping with ufutex (shared::register_mapping),
        /// so that ufutex-shared skips the identity query; the kernel is unaffected
        #[arg(long, requires = "shared")]
        register: bool,
        #[command(flatten)]
        pin: PinArg,
    },
    /// perf's futex-wake-parallel: N sleepers, W wakers at once
    WakeParallel {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        #[arg(long, short = 'n', default_value_t = 128)]
        waiters: usize,
        #[arg(long, short = 'w', default_value_t = 2)]
        wakers: usize,
        #[command(flatten)]
        pin: PinArg,
    },
    /// perf's futex-requeue: N sleepers moved to a second word in one call
    Requeue {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        #[arg(long, short = 'n', default_value_t = 128)]
        waiters: usize,
        /// Waiters woken by the requeue (the rest are moved)
        #[arg(long, default_value_t = 0)]
        nr_wake: usize,
        #[command(flatten)]
        pin: PinArg,
    },
    /// Wait on many words: failing waitv (mismatch first / last) and wake-up latency
    Waitv {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        /// Entry counts, comma-separated (1 … 1024)
        #[arg(long, default_value = "1,8,32,128,1024")]
        entries: String,
        /// Which cases: first, last, last8, last16, last64 (the last on 8, 16 or 64-bit words: ufutex, ufutex-c), latency (comma-separated)
        #[arg(long, default_value = "first,last,latency")]
        modes: String,
    },
    /// Round trips through two words; pinned pair or P pairs oversubscribed
    PingPong {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        #[arg(long, short = 'p', default_value_t = 1)]
        pairs: usize,
        /// Round trips per repetition
        #[arg(long, default_value_t = 20_000)]
        iters: usize,
        /// Do not pin the two sides to CPU 0 and CPU 1
        #[arg(long)]
        no_pin: bool,
    },
    /// Message threads waking worker threads: requests/s and wake-up latency
    Schbench {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long, short = 'm', default_value_t = 2)]
        messages: usize,
        /// Workers per message thread
        #[arg(long, short = 'w', default_value_t = 8)]
        workers: usize,
        /// Busy work per request, µs
        #[arg(long, default_value_t = 2)]
        work_us: u64,
        /// Do not add the auto-resized vs fixed ufutex domains
        #[arg(long)]
        no_resize: bool,
    },
    /// Mutex throughput and fairness over critical-section sizes and thread counts; at 1 thread
    /// also ns per uncontended lock + unlock
    Lock {
        #[command(flatten)]
        common: CommonArgs,
        /// Thread counts, comma-separated
        #[arg(long, default_value = "1,2,8")]
        threads: String,
        /// Critical sections: increments (0: lock and unlock alone), or "1us"; comma-separated
        #[arg(long, default_value = "5,10,20,50,1us")]
        cs: String,
        /// The competitor ratios are taken against; must be one of --impl [default: pthread]
        #[arg(long, value_name = "NAME")]
        baseline: Option<String>,
        /// Before each timed repetition, a thread sleeps on the lock while another holds it, so
        /// the timed loop runs on a lock that has been contended (and is not any more)
        #[arg(long)]
        after_contention: bool,
    },
    /// The first futex call of a new process with two threads, and the call after it: a new
    /// process of this executable per sample, for the kernel, ufutex and ufutex-preload (the
    /// kernel's process under LD_PRELOAD=libufutex_preload.so), µs
    FirstCall {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Internal: one new process of `first-call`: an idle second thread, then two timed wakes of
    /// a word nobody waits on; prints both in ns
    #[command(hide = true)]
    FirstCallChild {
        #[command(flatten)]
        common: CommonArgs,
        /// kernel (FUTEX_WAKE_PRIVATE through syscall()) or ufutex (ufutex::wake)
        #[arg(long, value_name = "VIA")]
        via: String,
    },
    /// Recovery of a shared bucket lock whose owner died: per repetition a fresh shared table,
    /// a process killed holding the lock in a shared wait, then one timed shared wake (ms)
    Recovery {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Named objects by key (issue 15's benchmark): the table of the kernel commit "ipc: optimize
    /// semget/shmget/msgget for lots of keys" — create, lookup (in order and random), miss,
    /// exclusive create, remove, lookup in a new process per key — then concurrent lookups;
    /// kernel-semget (SysV semaphore sets) and ufutex-keyed (ufutex's named objects). Refuses to
    /// run if a key of its range is taken
    Keyed {
        #[command(flatten)]
        common: CommonArgs,
        /// KEYS values, comma-separated (objects created per population)
        #[arg(long, default_value = "1,10,32,100,1000,10000,31900", value_name = "LIST")]
        keys: String,
        /// Thread counts of the concurrent-lookup phase, comma-separated
        #[arg(long, default_value = "1,2,4", value_name = "LIST")]
        threads: String,
        /// First key of the range (decimal or 0x hex); the run uses [BASE, BASE + 2 × max KEYS)
        #[arg(long, default_value = "0x424242", value_name = "KEY")]
        base: String,
        /// New processes per KEYS value and repetition at most, one per key (sampled evenly when
        /// KEYS is larger); 0 leaves the per-process phase out
        #[arg(long, default_value_t = 200, value_name = "N")]
        processes: usize,
    },
    /// Internal: one new process of `keyed`'s per-process phase: reach key KEY of one competitor
    /// as a new program does, check the handle, print the ns it took
    #[command(hide = true)]
    KeyedChild {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long, value_name = "KEY")]
        key: u64,
        /// The handle the lookup must return
        #[arg(long, value_name = "HANDLE")]
        expect: String,
        /// The namespace's name, for competitors whose keys are not system-wide
        #[arg(long, value_name = "NAME")]
        namespace: Option<String>,
    },
    /// Semaphore ping-pong between two processes (issue 15): the parent posts "ping" and waits on
    /// "pong", a forked child the reverse; ufutex's named semaphores, a SysV set (semop, the
    /// baseline) and POSIX named semaphores, ns per round trip
    SemPingpong {
        #[command(flatten)]
        common: CommonArgs,
        /// Round trips per repetition
        #[arg(long, default_value_t = 20_000)]
        iters: usize,
        /// Do not pin the parent and the child to the first two allowed CPUs
        #[arg(long)]
        no_pin: bool,
        /// Sleep this long (µs) before each ping, so that the child's wait has gone to sleep:
        /// then the post of ping, which wakes it, is also timed on its own (the call), and the
        /// round trip is counted without the gap
        #[arg(long, default_value_t = 0, value_name = "US")]
        gap_us: u64,
    },
    /// Fast paths in instructions per call (valgrind's callgrind): a figure that does not move
    /// with the host's noise
    ///
    /// The paths of `fastpath`, and a failing waitv of one entry and of 128 (the last failing)
    /// for the competitors that have waitv. Each competitor re-runs this binary under valgrind
    /// with N and with 2N calls of each path; per call = (Ir(2N) − Ir(N)) / N. User space only: for
    /// kernel and atomic-wait (syscalls) it is the call's user-space side. Needs valgrind
    /// (or $UFUTEX_BENCH_VALGRIND); without it every competitor is listed as skipped.
    /// --reps defaults to 1 here (the counts repeat exactly)
    Instructions {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        /// Calls of each path in the shorter run (N)
        #[arg(long, default_value_t = 4096, value_name = "N")]
        calls: usize,
    },
    /// Internal: exactly the given calls of the fast paths on one competitor, no clock read,
    /// then one line on stdout (what `instructions` runs under valgrind)
    #[command(hide = true)]
    CountCalls {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        shared: SharedArg,
        /// BODY=N pairs, comma-separated; BODY: wake, after-store, wait-mismatch, store-load
        #[arg(long, value_name = "LIST")]
        calls: String,
    },
    /// Everything at a chosen scale: report.md, report.json and SVG plots in --out
    Report {
        #[command(flatten)]
        common: CommonArgs,
        /// Output directory
        #[arg(long, default_value = "report")]
        out: PathBuf,
        /// Small scale: under a minute
        #[arg(long)]
        quick: bool,
        /// Multiply every runtime and iteration count by this factor
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
    },
}
