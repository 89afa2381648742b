//! A forked child's threads make their first shared calls close together: each must operate as
//! the child, in the child's own slot of the shared table (`shared/process.rs`,
//! `once::PerProcess`). Rounds, for `UFUTEX_STRESS_SECS` (2 s when unset): a child starts 8
//! threads one after another, each waiting on a word of a shared page at once, so that the
//! later ones make their first call while the first is making the child's slot; the parent
//! counts them queued, wakes them all in one call, and the child reports every one woken.
//!
//! Until the seventy-seventh session a thread could read the parent's slot before the mark that
//! a sibling had just set, and take it (with the parent's descriptors) for the child's: its
//! wait then queued where the parent never counted it, and timed out. This test found that in
//! 400 to 2,600 rounds (under 5 s); threads held at a barrier first did not (they all arrive
//! before the slot is made, and all take the slow path).
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, deadline, reap, shared_anon};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};

const LONG: Duration = Duration::from_secs(20);
const THREADS: u32 = 8;

/// The child: `THREADS` threads, each waiting on `w` as soon as it starts (its first shared
/// call). 0 if every one was woken, 1 if one timed out, 2 on another error.
fn waiters(w: &'static AtomicU32) -> i32 {
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(move || match shared::wait(w, 0, deadline(LONG)) {
                    Ok(()) => 0,
                    Err(SharedError::TimedOut) => 1,
                    Err(_) => 2,
                })
            })
            .collect();
        ts.into_iter().map(|t| t.join().unwrap_or(99)).max().unwrap_or(0)
    })
}

#[test]
fn a_childs_threads_all_take_the_childs_slot() {
    let _table = common::isolated_shared_table();
    let p = shared_anon(4096);
    // SAFETY: a live mapping, never unmapped; offsets aligned.
    let w: &AtomicU32 = unsafe { at(p, 64) };
    assert_eq!(shared::wake(w, 1), Ok(0)); // the parent's slot first
    let start = Instant::now();
    let mut rounds = 0;
    while rounds == 0 || start.elapsed() < Duration::from_secs(common::stress_secs()) {
        let pid = child(move || waiters(w));
        let t = Instant::now();
        loop {
            let queued = common::shared_queued(w);
            if queued == THREADS as usize {
                break;
            }
            assert!(t.elapsed() < LONG, "round {rounds}: {queued} of the child's {THREADS} threads queued");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(shared::wake(w, usize::MAX), Ok(THREADS as usize), "round {rounds}");
        assert_eq!(reap(pid), 0, "round {rounds}: a thread of the child timed out or failed");
        rounds += 1;
    }
    eprintln!("{rounds} rounds");
}
