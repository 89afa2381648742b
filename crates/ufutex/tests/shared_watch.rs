//! The preload library's waits on process-shared words in the shared table also sleep on the
//! word itself in the kernel (`ops::wait_watching`), so that a wake that does not go through the
//! library — a raw system call, a process that is not preloaded, the kernel's wake of a
//! thread-id word — still reaches them, as it would reach a wait in the kernel.
//!
//! A stress of both kinds of wakers at once: waiter threads wait (the preload's entry point,
//! `preload_wait`) on four words of a shared mapping for the value they read; waker threads
//! add 1 to a word and wake it through the library (`ufutex_wake`, counting whom it took) or
//! through the kernel alone (`FUTEX_WAKE`), one or all. The invariants:
//! - no lost wakeup: every wait ends (a waiter is never left to its 10 s deadline), and at the
//!   end every waiter comes home;
//! - no double count: the library's wakes counted at most as many waiters as returned 0 (a
//!   kernel wake may end a wait that nobody counted — the legacy futex semantics allow it —
//!   but a count is a record taken, which ends exactly one wait);
//! - nothing left queued: a wake of each word afterwards finds nobody.
//!
//! For `UFUTEX_STRESS_SECS` (2 s when unset; CI's stress step runs longer).
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, errno, isolated_shared_table, monotonic_in, shared_anon, watchdog, watched_stress, Watched};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use ufutex::preload::{preload_wait, ufutex_wake};

/// A 32-bit process-shared word, in the C ABI's flags.
const SHARED_U32: u32 = 0x02;
const ANY: libc::c_ulong = 0xffff_ffff;

/// The preload library's wait of `w` for `val`, 10 s at most: 0, or the errno.
fn wait(w: &AtomicU32, val: u32) -> i32 {
    let due = monotonic_in(Duration::from_secs(10));
    // SAFETY: `w` is a live word of a mapping that stays; `due` outlives the call.
    match unsafe { preload_wait(w.as_ptr().cast(), val.into(), ANY, SHARED_U32, &due, libc::CLOCK_MONOTONIC) } {
        0 => 0,
        _ => errno(),
    }
}

/// The library's shared wake of up to `n`: how many it took.
fn wake_ours(w: &AtomicU32, n: i32) -> u64 {
    // SAFETY: `w` is a live word; a shared wake reads nothing through it.
    let r = unsafe { ufutex_wake(w.as_ptr().cast(), ANY, n, SHARED_U32) };
    assert!(r >= 0, "ufutex_wake: errno {}", errno());
    r as u64
}

/// The kernel's shared `FUTEX_WAKE` of up to `n`, as a process that is not preloaded makes it.
fn wake_kernel(w: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE reads only the address of a live word.
    let r = unsafe { libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, n, 0, 0, 0) };
    assert!(r >= 0, "FUTEX_WAKE: errno {}", errno());
}

#[test]
fn kernel_wakes_and_ours_end_every_watched_wait_and_count_once() {
    watchdog();
    let _table = isolated_shared_table();
    let p = shared_anon(4096);
    // SAFETY: a fresh shared mapping, never unmapped; the words are 64 bytes apart, aligned.
    let words: Vec<&AtomicU32> = (0..4).map(|i| unsafe { at::<AtomicU32>(p, 64 * i) }).collect();
    let Watched { woken: oks, counted, changed: changes } = watched_stress(
        0x51ed_2701,
        |rng| {
            let w = words[rng.below(4) as usize];
            match wait(w, w.load(Ordering::SeqCst)) {
                0 => Ok(()),
                e => Err(e),
            }
        },
        |rng| {
            let w = words[rng.below(4) as usize];
            w.fetch_add(1, Ordering::SeqCst);
            let n = if rng.below(4) == 0 { i32::MAX } else { 1 };
            if rng.below(2) == 0 {
                wake_ours(w, n)
            } else {
                wake_kernel(w, n);
                0
            }
        },
        || {
            for w in &words {
                w.fetch_add(1, Ordering::SeqCst);
                wake_kernel(w, i32::MAX);
            }
        },
    );
    eprintln!("shared_watch: {oks} waits returned 0 ({counted} counted by our wakes), {changes} saw a change");
    assert!(counted <= oks, "our wakes counted {counted} waiters, but only {oks} waits returned 0");
    assert!(oks > 0, "no wait was ever woken");
    for w in &words {
        assert_eq!(wake_ours(w, i32::MAX), 0, "a record was left queued");
    }
}
