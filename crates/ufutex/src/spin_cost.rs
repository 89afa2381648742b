//! What a spin hint (`pause`) costs on this host, measured once per process, and spin budgets
//! in time turned into hint counts with it. A `pause` costs ~70 ns on the project's AMD hosts
//! and ~10 ns on its Intel ones, so a count tuned on one is seven times too short or too long
//! on the other (BENCHMARKS.md).

/// What one `spin_hint` costs on this host, in ns (at least 1): the fastest of three timings of
/// 256 hints (so that a preemption during the measurement cannot make spins longer). 1 under
/// loom.
///
/// Published as a `once::RacyWord`, not a `OnceLock`: a signal handler may interrupt the first
/// measurement and need the figure itself (a contended bucket lock in its wake), and a
/// `OnceLock` would make it wait for its own thread. Callers that race each measure; the first
/// figure published is the one every caller uses.
#[cfg_attr(ufutex_loom, allow(dead_code))]
pub fn hint_ns() -> u64 {
    #[cfg(ufutex_loom)]
    return 1;
    #[cfg(not(ufutex_loom))]
    {
        static NS: crate::once::RacyWord = crate::once::RacyWord::new();
        NS.get_or_init(measure_hint_ns)
    }
}

/// [`hint_ns`]'s measurement: only the clock's vDSO call and `pause`s (async-signal-safe).
#[cfg(not(ufutex_loom))]
fn measure_hint_ns() -> u64 {
    const HINTS: u32 = 256;
    (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            for _ in 0..HINTS {
                std::hint::spin_loop();
            }
            t.elapsed().as_nanos() as u64 / u64::from(HINTS)
        })
        .min()
        .unwrap_or(1)
        .max(1)
}

/// Spin hints that last about `ns` on this host ([`hint_ns`]), kept within `lo..=hi`. 1 under
/// loom, where every hint is a scheduling point.
pub(crate) fn hints_for(ns: u64, lo: u64, hi: u64) -> u64 {
    if cfg!(ufutex_loom) {
        return 1;
    }
    (ns / hint_ns()).clamp(lo, hi)
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::hint_ns;

    #[test]
    fn every_thread_gets_the_first_measurement_of_a_hint() {
        let all: Vec<u64> = std::thread::scope(|s| {
            let racers: Vec<_> = (0..4).map(|_| s.spawn(hint_ns)).collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert!(all[0] >= 1);
        assert!(all.iter().all(|&ns| ns == all[0]), "{all:?}");
        assert_eq!(hint_ns(), all[0]);
    }
}
