//! The first futex call of a fresh process that has a second thread, and the call after it:
//! what a program pays once, when the library sets itself up (tables, the fork mark, and until
//! the seventy-first session a `membarrier` registration that waited for an RCU grace period,
//! 4–20 ms, in every process with a second thread). Timed inside a new process each
//! repetition, so nothing is warm but the program's own code.
//!
//! Each sample is one new process of this executable (`first-call-child`): it starts a thread
//! that only sleeps, waits until the thread runs, then times two wakes of a word nobody waits
//! on and prints both in ns. Competitors: the kernel (legacy `FUTEX_WAKE_PRIVATE` through
//! libc's `syscall()`, as C programs and Rust's std make it), ufutex (`ufutex::wake` of the
//! Rust API, the library linked into this executable) and ufutex-preload (the kernel's child
//! under `LD_PRELOAD=libufutex_preload.so`, whose `syscall()` takes the call; skipped where the
//! library is not found, as `perf-bench` is). The processes are started in turn, the order
//! rotated each repetition. No goal: the row guards against a first call that costs
//! milliseconds again.

use super::perfbench::{preload_env, preload_library, PRELOAD, PRELOAD_MISSING};
use super::{checked_output, Common};
use crate::result::{Bench, Metric, MetricResult, Skip};
use crate::sys;
use std::io;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a child makes its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Legacy `FUTEX_WAKE_PRIVATE` through `syscall()` (the preload library's too, under it).
    Kernel,
    /// `ufutex::wake`.
    Ufutex,
}

impl Via {
    pub fn parse(s: &str) -> Option<Via> {
        match s {
            "kernel" => Some(Via::Kernel),
            "ufutex" => Some(Via::Ufutex),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Via::Kernel => "kernel",
            Via::Ufutex => "ufutex",
        }
    }
}

/// The bench's one case.
pub const CASE: &str = "first futex call of a new process with two threads";

/// One competitor: its name, how its child calls, and the preload library it runs under, if any.
struct Runner<'a> {
    name: &'static str,
    via: Via,
    preload: Option<&'a Path>,
}

/// The `first-call-child` process: a second thread, then two timed wakes of a word nobody
/// waits on; prints "FIRST SECOND" (ns).
pub fn child(via: Via) -> io::Result<()> {
    // The thread only sleeps (no futex call of its own) until the process exits under it.
    let started = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&started);
    std::thread::spawn(move || {
        flag.store(true, Ordering::Release);
        std::thread::sleep(Duration::from_secs(60));
    });
    while !started.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    let word = AtomicU32::new(0);
    let _ = Instant::now(); // the clock's own first read, outside the timed calls
    let mut took = [0u128; 2];
    for t in &mut took {
        let start = Instant::now();
        let woke = match via {
            Via::Kernel => sys::legacy_wake(&word, 1)?,
            Via::Ufutex => ufutex::wake(&word, 1),
        };
        *t = start.elapsed().as_nanos();
        if woke != 0 {
            return Err(io::Error::other(format!("a wake of a word nobody waits on woke {woke}")));
        }
    }
    println!("{} {}", took[0], took[1]);
    Ok(())
}

/// The child's line: the two calls' ns.
pub fn parse_reply(stdout: &str) -> Result<(u64, u64), String> {
    let mut words = stdout.split_whitespace().map(str::parse::<u64>);
    match (words.next(), words.next(), words.next()) {
        (Some(Ok(a)), Some(Ok(b)), None) => Ok((a, b)),
        _ => Err(format!("first-call-child replied {stdout:?}, not two counts of ns")),
    }
}

/// One new process of `r`: its two calls, µs.
fn once(exe: &Path, r: &Runner<'_>) -> io::Result<(f64, f64)> {
    let mut cmd = Command::new(exe);
    cmd.args(["first-call-child", "--via", r.via.name()]);
    preload_env(&mut cmd, r.preload, false);
    let out = checked_output(&mut cmd, || format!("first-call-child of {}", r.name))?;
    let (a, b) = parse_reply(&String::from_utf8_lossy(&out.stdout)).map_err(io::Error::other)?;
    Ok((a as f64 / 1e3, b as f64 / 1e3))
}

pub fn run(common: &Common) -> io::Result<Vec<Bench>> {
    let exe = std::env::current_exe()?;
    let so = preload_library();
    let mut runners = vec![
        Runner { name: "ufutex", via: Via::Ufutex, preload: None },
        Runner { name: "kernel", via: Via::Kernel, preload: None },
    ];
    let mut skipped = Vec::new();
    match &so {
        Some(so) => runners.insert(1, Runner { name: PRELOAD, via: Via::Kernel, preload: Some(so) }),
        None => skipped.push(Skip { competitor: PRELOAD.into(), reason: PRELOAD_MISSING.into() }),
    }
    let mut first: Vec<Vec<f64>> = vec![Vec::new(); runners.len()];
    let mut second = first.clone();
    for rep in 0..common.repetitions {
        // Rotate who goes first, so that none always starts on a warmer machine.
        for k in 0..runners.len() {
            let i = (rep + k) % runners.len();
            let (a, b) = once(&exe, &runners[i])?;
            first[i].push(a);
            second[i].push(b);
        }
    }
    let samples = |v: Vec<Vec<f64>>| runners.iter().map(|r| r.name.to_string()).zip(v).collect::<Vec<_>>();
    let metrics = vec![
        MetricResult::new(Metric::lower("first call", "µs"), "kernel", samples(first)),
        MetricResult::new(Metric::lower("second call", "µs"), "kernel", samples(second)),
    ];
    Ok(vec![Bench {
        workload: "first-call".into(),
        case: CASE.into(),
        repetitions: common.repetitions,
        metrics,
        skipped,
        notes: vec![
            "one new process a sample: an idle second thread, then two wakes of a word nobody waits on, timed inside \
             the process; kernel: FUTEX_WAKE_PRIVATE through syscall(); ufutex: ufutex::wake; ufutex-preload: the \
             kernel's process under LD_PRELOAD=libufutex_preload.so"
                .into(),
        ],
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_two_counts() {
        assert_eq!(parse_reply("6021 40\n"), Ok((6021, 40)));
        assert!(parse_reply("6021\n").is_err());
        assert!(parse_reply("6021 40 7\n").is_err());
        assert!(parse_reply("six 40\n").is_err());
    }

    #[test]
    fn via_names_round_trip() {
        for v in [Via::Kernel, Via::Ufutex] {
            assert_eq!(Via::parse(v.name()), Some(v));
        }
        assert_eq!(Via::parse("pthread"), None);
    }
}
