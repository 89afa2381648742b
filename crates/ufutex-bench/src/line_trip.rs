//! How long a cache line takes to go from one CPU to another and back, sampled through the
//! report: the cost every contended lock and wake pays per hand-over, which the host can change
//! under a running guest.
//!
//! On the fortieth session's host (a 2 vCPU KVM guest on a Zen 1 EPYC) the round trip read
//! ~70, ~125–180 or ~505 ns, each for some seconds, by turns: the host moves the vCPUs between
//! cores that share a cache and cores that do not. The contended mutex cells move with it by
//! up to 1.5× (BENCHMARKS.md), so a report lists what it saw between its steps.
//!
//! Method: two threads pinned to the first two allowed CPUs pass one word back and forth (each
//! waits, spinning, for the other's store) for [`SAMPLE`]; the mean time of a round trip.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long one sample passes the word back and forth.
pub const SAMPLE: Duration = Duration::from_millis(30);

/// The round trips sampled during a run, in ns, in the order taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineTrips {
    pub samples_ns: Vec<u64>,
}

impl LineTrips {
    /// Take one more sample (none on a single allowed CPU, or if pinning fails).
    pub fn sample(&mut self) {
        if let Some(ns) = round_trip_ns(SAMPLE) {
            self.samples_ns.push(ns);
        }
    }

    /// One phrase for the report's header.
    pub fn describe(&self) -> String {
        let mut s = self.samples_ns.clone();
        if s.is_empty() {
            return "not measured (one CPU)".into();
        }
        s.sort_unstable();
        let (lo, mid, hi) = (s[0], s[s.len() / 2], s[s.len() - 1]);
        // "Slow": more than twice the fastest, the other mode where the host has two.
        let slow = s.iter().filter(|&&x| x > 2 * lo).count();
        format!(
            "{lo}–{hi} ns (median {mid}) in {} samples between the steps; {slow} of them over twice the fastest",
            s.len()
        )
    }
}

/// The mean round trip of a word passed between the first two allowed CPUs for about `run`,
/// in ns; `None` with fewer than two CPUs or if a thread cannot be pinned.
pub fn round_trip_ns(run: Duration) -> Option<u64> {
    let cpus = crate::sys::allowed_cpus();
    let (&a, &b) = (cpus.first()?, cpus.get(1)?);
    // Odd: the far side's turn; even: ours. Alone on its line.
    #[repr(align(128))]
    struct Line(AtomicU64);
    let word = Line(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let far = s.spawn(|| {
            let pinned = crate::sys::Pinned::to(b).ok();
            while !stop.load(Ordering::Relaxed) {
                let v = word.0.load(Ordering::Acquire);
                if v % 2 == 1 {
                    word.0.store(v + 1, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
            pinned.is_some()
        });
        let near = crate::sys::Pinned::to(a).ok();
        let start = Instant::now();
        let mut trips = 0u64;
        'run: while start.elapsed() < run {
            for _ in 0..64 {
                let v = word.0.load(Ordering::Relaxed);
                word.0.store(v + 1, Ordering::Release);
                let mut spins = 0u32;
                while word.0.load(Ordering::Acquire) == v + 1 {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    // A far side that never answers (not scheduled) ends the sample: no hang.
                    // The clock is read rarely, so that it does not lengthen the round trips.
                    if spins.is_multiple_of(4096) && start.elapsed() > run + Duration::from_secs(1) {
                        break 'run;
                    }
                }
                trips += 1;
            }
        }
        let ns = start.elapsed().as_nanos() as u64;
        stop.store(true, Ordering::Relaxed);
        let far_pinned = far.join().unwrap_or(false);
        (near.is_some() && far_pinned && trips > 0).then(|| ns / trips)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_the_range_and_the_slow_samples() {
        let t = LineTrips { samples_ns: vec![505, 180, 183, 510, 178] };
        assert_eq!(
            t.describe(),
            "178–510 ns (median 183) in 5 samples between the steps; 2 of them over twice the fastest"
        );
        assert_eq!(LineTrips::default().describe(), "not measured (one CPU)");
    }

    #[test]
    fn a_sample_ends_and_counts_round_trips() {
        let mut t = LineTrips::default();
        t.sample();
        if crate::sys::allowed_cpus().len() >= 2 {
            assert_eq!(t.samples_ns.len(), 1);
            assert!(t.samples_ns[0] > 0);
        }
    }
}
