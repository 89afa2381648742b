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

use common::{at, shared_anon, stress_secs, watchdog, Rng, StopOnDrop};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use ufutex::preload::{preload_waitv, ufutex_wake, UfutexWaitv};

const U32: u32 = 0x02;
const PRIVATE: u32 = 0x80;
const ANY: libc::c_ulong = 0xffff_ffff;

/// The last errno.
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

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
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let due = libc::timespec { tv_sec: now.tv_sec + 10, tv_nsec: now.tv_nsec };
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
    let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
    let (oks, counted, changes) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    const WAITERS: u64 = 3;
    let secs = stress_secs();
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for t in 0..WAITERS {
            let (vectors, stop, done, oks, changes) = (&vectors, &stop, &done, &oks, &changes);
            s.spawn(move || {
                let mut rng = Rng::new(0x3a17_0b5e + t);
                while !stop.load(Ordering::Relaxed) {
                    let v = &vectors[rng.below(4) as usize];
                    match waitv(v) {
                        Ok(i) => {
                            assert!(i < v.len(), "index {i} of a vector of {}", v.len());
                            oks.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(libc::EAGAIN) => _ = changes.fetch_add(1, Ordering::Relaxed),
                        Err(e) => panic!("a watched waitv ended with errno {e} (110: a lost wakeup)"),
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for t in 0..2 {
            let (words, stop, counted) = (&words, &stop, &counted);
            s.spawn(move || {
                let mut rng = Rng::new(0x0b0e_55ed + t);
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.below(5) as usize;
                    let (w, private) = words[k];
                    w.fetch_add(1, Ordering::SeqCst);
                    let n = if rng.below(4) == 0 { i32::MAX } else { 1 };
                    if private && k < 2 && rng.below(2) == 0 {
                        counted.fetch_add(wake_ours(w, n), Ordering::Relaxed);
                    } else {
                        wake_kernel(w, private, n);
                    }
                    for _ in 0..rng.below(64) {
                        std::hint::spin_loop();
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::SeqCst);
        // Bring every waiter home: a change and a kernel wake of every word, until all left.
        let give_up = Instant::now() + Duration::from_secs(30);
        while done.load(Ordering::SeqCst) < WAITERS {
            assert!(Instant::now() < give_up, "a waiter never came home");
            for &(w, private) in &words {
                w.fetch_add(1, Ordering::SeqCst);
                wake_kernel(w, private, i32::MAX);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let (oks, counted, changes) = (oks.into_inner(), counted.into_inner(), changes.into_inner());
    eprintln!("waitv_watch: {oks} waitvs returned an index ({counted} counted by our wakes), {changes} saw a change");
    assert!(counted <= 2 * oks, "our wakes counted {counted} waiters, but only {oks} waitvs returned an index");
    assert!(oks > 0, "no waitv was ever woken");
    for w in &private {
        assert_eq!(wake_ours(w, i32::MAX), 0, "a node was left queued");
    }
}
