//! How long a requeue takes inside the library, with `N` threads asleep on one word: all of
//! them moved at once between two words, and one at a time, warm and with the caches emptied
//! first (as after perf's 100 ms sleep). A measurement for BENCHMARKS.md, not a test:
//!
//! ```text
//! cargo run --release -p ufutex --example requeue_probe -- [N] [MiB to sweep before a cold round]
//! ```
#![cfg_attr(ufutex_loom, allow(dead_code, unused_imports))]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// Under loom the library's words are loom's: nothing to measure.
#[cfg(ufutex_loom)]
fn main() {}

static A: AtomicU32 = AtomicU32::new(0);
static B: AtomicU32 = AtomicU32::new(0);

/// The median of `v`.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(not(ufutex_loom))]
fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let n = args.next().unwrap_or(128);
    let sweep_mib = args.next().unwrap_or(128);
    let d = ufutex::Domain::default_domain();
    let mut junk = vec![0u64; sweep_mib << 17];
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(move || {
                while A.load(Ordering::Acquire) == 0 {
                    let _ = d.wait(&A, 0, None);
                }
            });
        }
        while d.queued_waiters() < n {
            std::thread::yield_now();
        }
        // Every round moves all N from one word to the other, so the next starts where it ended.
        let words = |round: usize| if round.is_multiple_of(2) { (&A, &B) } else { (&B, &A) };
        let mut round = 0;
        let mut all_at_once = Vec::new();
        for _ in 0..2000 {
            let (from, to) = words(round);
            let start = Instant::now();
            assert_eq!(d.requeue(from, 0, to, 0, usize::MAX), Ok(n));
            all_at_once.push(start.elapsed().as_nanos() as f64);
            round += 1;
        }
        let mut one_at_a_time = |cold: bool, rounds: usize| {
            let mut per_call = Vec::new();
            for _ in 0..rounds {
                if cold {
                    for (i, x) in junk.iter_mut().enumerate().step_by(8) {
                        *x = x.wrapping_add(i as u64);
                    }
                }
                let (from, to) = words(round);
                let start = Instant::now();
                for _ in 0..n {
                    assert_eq!(d.requeue(from, 0, to, 0, 1), Ok(1));
                }
                per_call.push(start.elapsed().as_nanos() as f64 / n as f64);
                round += 1;
            }
            median(per_call)
        };
        let warm = one_at_a_time(false, 400);
        let cold = one_at_a_time(true, 60);
        println!(
            "{n} waiters: all at once {:.0} ns; one at a time {warm:.1} ns a call warm, {cold:.1} ns cold ({sweep_mib} MiB swept first)",
            median(all_at_once)
        );
        A.store(1, Ordering::Release);
        B.store(1, Ordering::Release);
        d.wake(&A, usize::MAX);
        d.wake(&B, usize::MAX);
    });
    std::hint::black_box(&junk);
}
