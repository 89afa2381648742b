//! loom model of NUMA tables: a requeue that moves a waiter from one node's table to another's
//! races a resize of every table of the domain (lock order across tables: `table.rs`). Run with
//! `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=1 cargo test --release -p ufutex --test loom_numa --target-dir target/loom`.
//!
//! One preemption (33 executions, instant); two exceed loom's branch budget after minutes, as
//! for `loom_core`'s resize+requeue model.
//!
//! A deadlock between the requeuer's two bucket locks and the resizer's table-wide locking, or a
//! waiter lost in a table that stopped being current, shows up as a loom deadlock or a failed
//! count: a wait returns Ok exactly when a wake counted it, and nothing is left queued.
#![cfg(ufutex_loom)]

use loom::sync::atomic::AtomicU32;
use loom::thread;
use std::sync::Arc;
use std::time::Duration;
use ufutex::{Deadline, Domain, DomainConfig, NumaError, NumaFutex, Slots, WaitError};

/// The model's pairs in one 64-byte-aligned block, so their buckets do not depend on where the
/// allocator put them (`Key::hash` under loom): `a` on node 0, `b` on node 1.
#[repr(C, align(64))]
struct Pairs {
    a: NumaFutex<AtomicU32>,
    b: NumaFutex<AtomicU32>,
}

fn soon() -> Option<Deadline> {
    // Under loom the deadline's value does not matter: a timed park may give up at any point.
    Some(Duration::from_secs(1).into())
}

#[test]
fn requeue_across_nodes_races_resize() {
    let mut b = loom::model::Builder::new();
    b.max_branches = 50_000;
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    b.check(|| {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = Arc::new(Domain::new(DomainConfig::new().virtual_nodes(2).slots(Slots::Fixed(2))).unwrap());
        let p = Arc::new(Pairs { a: NumaFutex::with_node(0, 0), b: NumaFutex::with_node(0, 1) });
        // Allocate both node tables before the race (a requeue of nobody does), then retire
        // the 2-slot tables so that the racing resize reuses them (a stale requeuer may still
        // hold one: the case the first-lock check in `lock_pair_current` exists for).
        assert_eq!(d.requeue_numa(&p.a, 0, &p.b, 0, 0), Ok(0));
        d.set_slots(Slots::Fixed(4)).unwrap();
        let (d2, p2) = (d.clone(), p.clone());
        let waiter = thread::spawn(move || d2.wait_numa(&p2.a, 0, soon()));
        let d3 = d.clone();
        let resizer = thread::spawn(move || d3.set_slots(Slots::Fixed(2)).unwrap());
        let moved = d.requeue_numa(&p.a, 0, &p.b, 0, 1).unwrap();
        let woken = d.wake_numa(&p.b, 1).unwrap();
        resizer.join().unwrap();
        assert!(moved <= 1 && woken <= moved);
        match waiter.join().unwrap() {
            Ok(()) => assert_eq!(woken, 1),
            Err(NumaError::Wait(WaitError::TimedOut)) => assert_eq!(woken, 0),
            Err(e) => panic!("unexpected {e:?}"),
        }
        assert_eq!(d.queued_waiters(), 0);
        assert_eq!(d.slots(), 2);
    });
    eprintln!("explored {} executions", RUNS.load(std::sync::atomic::Ordering::Relaxed));
}
