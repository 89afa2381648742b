//! A wait-queue table that cannot be allocated is an error (`ENOMEM` as an `io::Error`, or
//! `NumaError::NoMemory`), never an abort, and a failed resize changes nothing: the domain
//! keeps its size and policy, and its waiters still meet.
//!
//! The checks run in a child process (this test binary, re-run on the ignored test below) whose
//! address space is limited to 16 MiB above what it uses, so that a 64 MiB table cannot be had
//! while small allocations still can; the parent only checks that the child passed.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::AtomicU32;
use std::time::Duration;
use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, Slots, WaitError};

/// 64 MiB of buckets: more than the limit leaves, and more than glibc serves from the address
/// space its arenas already reserved (their heaps are 64 MiB, its mmap threshold at most 32).
const BIG: usize = 1 << 20;

fn enomem(r: std::io::Result<impl std::fmt::Debug>) {
    let e = r.expect_err("a table larger than the address-space limit");
    assert_eq!(e.raw_os_error(), Some(libc::ENOMEM), "{e}");
}

/// Limit the address space to 16 MiB above its current size.
fn limit_address_space() {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    let limit = kb * 1024 + (16 << 20);
    let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
    // SAFETY: setrlimit reads one valid rlimit struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) }, 0, "setrlimit(RLIMIT_AS)");
}

#[test]
#[ignore = "run by tables_that_cannot_be_had_are_enomem, in a child process with a tight RLIMIT_AS"]
fn child_under_tight_address_space() {
    let soon = || Some(Duration::from_millis(1).into());
    // Made while memory can be had: a small domain, and a NUMA domain whose tables are 64 MiB
    // (a node's first table takes the domain's size).
    let small = Domain::new(DomainConfig::new().slots(Slots::Fixed(16))).expect("16 buckets");
    let numa = Domain::new(DomainConfig::new().virtual_nodes(2).slots(Slots::Fixed(BIG))).expect("64 MiB");
    limit_address_space();

    enomem(Domain::new(DomainConfig::new().slots(Slots::Fixed(BIG))));
    enomem(small.set_slots(Slots::Fixed(BIG)));
    assert_eq!((small.slots(), small.policy()), (16, Slots::Fixed(16)), "a failed resize changes nothing");
    let w = AtomicU32::new(0);
    assert_eq!(small.wait(&w, 0, soon()), Err(WaitError::TimedOut), "the old table still queues");
    assert_eq!(small.queued_waiters(), 0);

    // The default domain: a failed resize leaves it automatic, and waits still work.
    enomem(Domain::default_domain().set_slots(Slots::Fixed(BIG)));
    assert_eq!(Domain::default_domain().policy(), Slots::Auto);
    assert_eq!(ufutex::wait(&w, 0, soon()), Err(WaitError::TimedOut));

    // A node's first table: ENOMEM for the call that needs it, nothing queued; a wake needs none.
    let pair = NumaFutex::<AtomicU32>::with_node(0, 1);
    assert_eq!(numa.wait_numa(&pair, 0, soon()), Err(NumaError::NoMemory));
    assert_eq!(NumaError::NoMemory.errno(), libc::ENOMEM);
    assert_eq!(numa.wake_numa(&pair, 1), Ok(0));
    assert_eq!(numa.queued_waiters(), 0);
    // Smaller tables fit: the domain can shrink and then serve the node.
    numa.set_slots(Slots::Fixed(64)).expect("64 buckets fit");
    assert_eq!(numa.wait_numa(&pair, 0, soon()), Err(NumaError::Wait(WaitError::TimedOut)));
}

#[test]
fn tables_that_cannot_be_had_are_enomem() {
    // No backtrace in the child: symbolising one allocates, which fails there and can hang a
    // failing child instead of letting it report.
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--ignored", "--exact", "child_under_tight_address_space", "--test-threads=1", "--nocapture"])
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the child");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait for the child").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("the child's output");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child failed ({}):\n{text}", out.status);
    assert!(text.contains("1 passed"), "the child ran its test:\n{text}");
}
