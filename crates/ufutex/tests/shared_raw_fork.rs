//! A child made without the fork handlers (glibc's `_Fork`) is a process of its own in the
//! shared table, as a forked one is: it claims its own slot (the fork mark's page tells it,
//! `fork_mark.rs`). Its wake reaches the parent's live waiter (with the parent's slot and
//! descriptions it would take the parent for dead); when it dies with a waiter queued, that
//! waiter dies with it and the parent's wake counts nobody (as the kernel's would).
//!
//! One test (one shared table for the process), the two cases in turn.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, deadline, raw_child, reap, shared_anon, watchdog};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};
use ufutex::shared;

const LONG: Duration = Duration::from_secs(20);

/// Whether `n` waiters were seen queued on `w` within [`LONG`].
fn saw_queued(w: &AtomicU32, n: usize) -> bool {
    let t = Instant::now();
    while common::shared_queued(w) != n {
        if t.elapsed() > LONG {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn a_child_made_without_the_handlers_is_a_process_of_its_own() {
    watchdog();
    let _table = common::isolated_shared_table();
    let p = shared_anon(4096);
    // SAFETY: a live mapping, never unmapped; the offsets are aligned.
    let (w, v): (&'static AtomicU32, &'static AtomicU32) = unsafe { (at(p, 64), at(p, 128)) };

    // The parent's live waiter, woken by the child.
    let sleeper = std::thread::spawn(move || shared::wait(w, 0, deadline(LONG)));
    assert!(saw_queued(w, 1), "the parent's waiter never queued");
    let pid = raw_child(move || match shared::wake(w, 1) {
        Ok(1) => 0,
        Ok(_) => 1,
        Err(_) => 2,
    });
    assert_eq!(reap(pid), 0, "the child's wake took the parent's live waiter");
    assert_eq!(sleeper.join().expect("the sleeper"), Ok(()), "woken by the child");

    // The child's waiter, dead with it.
    let pid = raw_child(move || {
        std::thread::spawn(move || {
            let _ = shared::wait(v, 0, None);
        });
        if saw_queued(v, 1) {
            0 // exits with its waiter queued
        } else {
            1
        }
    });
    assert_eq!(reap(pid), 0, "the child saw its waiter queued");
    assert_eq!(shared::wake(v, usize::MAX), Ok(0), "the dead child's waiter is not counted");
    assert_eq!(common::shared_queued(v), 0);
}
