//! The preload library's `futex_waitv` (`preload_waitv`) also sleeps on its words in the
//! kernel, and in the library's default mode (process-shared words refused, left to the kernel)
//! a vector that mixes private and shared words waits on the private ones in ufutex and on the
//! shared ones in the kernel (`waitv::AlsoKernel`). So every kind of wake reaches it: the
//! library's wake of a private word, the kernel's wake of a shared one, and a kernel wake of a
//! private word made without the library (a raw system call).
//!
//! A stress of all of them at once: waiter threads waitv (the preload's entry point) for the
//! values they read, on three private words and two words of a shared mapping, in vectors
//! mixed or private only; waker threads add 1 to a word and wake it through the library or
//! through the kernel alone (`FUTEX_WAKE`), one or all. The shared words are woken through the
//! kernel only (the preload refuses them), and so is one private word: a vector of it and a
//! shared word is reached by kernel wakes alone. The invariants:
//! - no lost wakeup: every waitv ends (a waiter is never left to its 10 s deadline), and at the
//!   end every waiter comes home;
//! - an index in range, of a word of the vector the waiter passed;
//! - no double count: the library's wakes counted at most two waiters (a vector's most private
//!   words, each a node that one wake may take, as each of a waitv's words in the kernel) per
//!   waitv that returned an index (a kernel wake may end a waitv that nobody counted — a
//!   spurious wakeup, which the kernel's futex allows);
//! - nothing left queued: a library wake of each private word afterwards finds nobody.
//!
//! For `UFUTEX_STRESS_SECS` (2 s when unset; CI's stress step runs longer). Skipped where the
//! library's waits do not watch their words (no `futex_waitv`, or the portable parker).
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, errno, monotonic_in, shared_anon, watchdog, watched_stress, Watched};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use ufutex::preload::{preload_waitv, ufutex_wake, UfutexWaitv};

const U32: u32 = 0x02;
const PRIVATE: u32 = 0x80;
const ANY: libc::c_ulong = 0xffff_ffff;

/// Whether the library's waits watch their words in the kernel: a vector of a private word and
/// a shared one (refused) is taken then, and its private word's wrong value is `EAGAIN`; it is
/// refused whole (`EOPNOTSUPP`) where the kernel has no `futex_waitv` or the parker cannot sleep
/// on words of the caller's (the `fallback-parker` feature).
fn library_watches(private: &AtomicU32, shared: &AtomicU32) -> bool {
    let wrong = private.load(Ordering::SeqCst).wrapping_add(1);
    let mut v = [
        UfutexWaitv { val: wrong.into(), uaddr: private.as_ptr() as u64, flags: U32 | PRIVATE, reserved: 0 },
        UfutexWaitv {
            val: shared.load(Ordering::SeqCst).into(),
            uaddr: shared.as_ptr() as u64,
            flags: U32,
            reserved: 0,
        },
    ];
    // SAFETY: two entries naming live words; no timeout (the call fails before it waits).
    let r = unsafe { preload_waitv(v.as_mut_ptr(), 2, 0, std::ptr::null(), 0) };
    assert_eq!(r, -1, "a waitv with a wrong value went to sleep");
    errno() == libc::EAGAIN
}

/// The preload library's waitv on `words` (each with whether it is private) for the values they
/// hold now, 10 s at most: the index, or the errno.
fn waitv(words: &[(&AtomicU32, bool)]) -> Result<usize, i32> {
    let mut v: Vec<UfutexWaitv> = words
        .iter()
        .map(|(w, private)| UfutexWaitv {
            val: w.load(Ordering::SeqCst).into(),
            uaddr: w.as_ptr() as u64,
            flags: U32 | if *private { PRIVATE } else { 0 },
            reserved: 0,
        })
        .collect();
    let due = monotonic_in(Duration::from_secs(10));
    // SAFETY: `v` names live words of memory that stays mapped; `due` outlives the call.
    let r = unsafe { preload_waitv(v.as_mut_ptr(), v.len() as u32, 0, &due, libc::CLOCK_MONOTONIC) };
    usize::try_from(r).map_err(|_| errno())
}

/// The library's private wake of up to `n`: how many it took.
fn wake_ours(w: &AtomicU32, n: i32) -> u64 {
    // SAFETY: `w` is a live word; a private wake reads nothing through it.
    let r = unsafe { ufutex_wake(w.as_ptr().cast(), ANY, n, U32 | PRIVATE) };
    assert!(r >= 0, "ufutex_wake: errno {}", errno());
    r as u64
}

/// The kernel's `FUTEX_WAKE` of up to `n` (private or shared), as a raw system call makes it.
fn wake_kernel(w: &AtomicU32, private: bool, n: i32) {
    let op = libc::FUTEX_WAKE | if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
    // SAFETY: FUTEX_WAKE reads only the address of a live word.
    let r = unsafe { libc::syscall(libc::SYS_futex, w.as_ptr(), op, n, 0, 0, 0) };
    assert!(r >= 0, "FUTEX_WAKE: errno {}", errno());
}

#[test]
fn every_kind_of_wake_ends_the_preloads_waitv_and_counts_once() {
    watchdog();
    // The preload library's default: shared words left to the kernel (this test binary is its
    // own process, and this its only test).
    ufutex::preload::refuse_shared(true);
    let p = shared_anon(4096);
    let private: Vec<AtomicU32> = (0..3).map(|_| AtomicU32::new(0)).collect();
    // SAFETY: a fresh shared mapping, never unmapped; the words are 64 bytes apart, aligned.
    let shared: Vec<&AtomicU32> = (0..2).map(|i| unsafe { at::<AtomicU32>(p, 64 * i) }).collect();
    if !library_watches(&private[0], shared[0]) {
        eprintln!("waitv_watch: skipped, the library's waits cannot watch their words here");
        return;
    }
    // (word, private), private words first.
    let words: Vec<(&AtomicU32, bool)> =
        private.iter().map(|w| (w, true)).chain(shared.iter().map(|&w| (w, false))).collect();
    // Two private words and two shared; two private; the private word that only the kernel
    // wakes and a shared one; that private word alone.
    let vectors = [
        vec![words[0], words[3], words[1], words[4]],
        vec![words[0], words[1]],
        vec![words[2], words[4]],
        vec![words[2]],
    ];
    let Watched { woken: oks, counted, changed: changes } = watched_stress(
        0x3a17_0b5e,
        |rng| {
            let v = &vectors[rng.below(4) as usize];
            let i = waitv(v)?;
            assert!(i < v.len(), "index {i} of a vector of {}", v.len());
            Ok(())
        },
        |rng| {
            let k = rng.below(5) as usize;
            let (w, private) = words[k];
            w.fetch_add(1, Ordering::SeqCst);
            let n = if rng.below(4) == 0 { i32::MAX } else { 1 };
            if private && k < 2 && rng.below(2) == 0 {
                wake_ours(w, n)
            } else {
                wake_kernel(w, private, n);
                0
            }
        },
        || {
            for &(w, private) in &words {
                w.fetch_add(1, Ordering::SeqCst);
                wake_kernel(w, private, i32::MAX);
            }
        },
    );
    eprintln!("waitv_watch: {oks} waitvs returned an index ({counted} counted by our wakes), {changes} saw a change");
    assert!(counted <= 2 * oks, "our wakes counted {counted} waiters, but only {oks} waitvs returned an index");
    assert!(oks > 0, "no waitv was ever woken");
    for w in &private {
        assert_eq!(wake_ours(w, i32::MAX), 0, "a node was left queued");
    }
}
