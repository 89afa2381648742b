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

use common::{at, child, reap, shared_anon};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared;

const LONG: Duration = Duration::from_secs(20);
const THREADS: u32 = 8;

#[test]
fn a_childs_threads_all_take_the_childs_slot() {
    let _table = common::isolated_shared_table();
    let p = shared_anon(4096);
    // SAFETY: a live mapping, never unmapped; offsets aligned.
    let (w, returned): (&AtomicU32, &AtomicU32) = unsafe { (at(p, 64), at(p, 128)) };
    assert_eq!(shared::wake(w, 1), Ok(0)); // the parent's slot first
    let start = Instant::now();
    let mut rounds = 0;
    while rounds == 0 || start.elapsed() < Duration::from_secs(common::stress_secs()) {
        returned.store(0, Ordering::Relaxed);
        // Each thread waits as soon as it starts (`common::shared_waiters`).
        let pid = child(move || common::shared_waiters(vec![(w, returned); THREADS as usize], LONG));
        let what = || format!("round {rounds}: the child's threads");
        common::await_shared_queued(w, THREADS as usize, Instant::now() + LONG, what);
        assert_eq!(shared::wake(w, usize::MAX), Ok(THREADS as usize), "round {rounds}");
        assert_eq!(reap(pid), 0, "round {rounds}: a thread of the child timed out or failed");
        assert_eq!(returned.load(Ordering::Relaxed), THREADS, "round {rounds}");
        rounds += 1;
    }
    eprintln!("{rounds} rounds");
}
