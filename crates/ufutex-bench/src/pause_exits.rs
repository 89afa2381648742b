//! Whether the hypervisor stops a long run of `pause`s with a VM exit, and after how many: a
//! host cost that every busy spin of ufutex (and of its competitors) meets, which `lscpu` does
//! not show. The report prints it with the host, so that two reports can be compared.
//!
//! KVM's pause-loop exiting ends a guest's run of `pause`s that lasts too long, on the guess that
//! the vCPU spins on a lock whose holder's vCPU is not running: on AMD after a count of `pause`s
//! (3000 by default), on Intel after a time (4096 cycles by default). The limit doubles with each
//! exit and is reset when the vCPU is scheduled in again (after the guest's CPU has idled), so the
//! first exit of a fresh loop comes at the same point every time. An interrupt (the timer's tick)
//! stops a loop at a random point instead.
//!
//! Method: after a sleep (the CPU idles, which resets the limit), spin `pause`s and read the TSC
//! after each; note where the first stall longer than [`STALL_NS`] came and how long it lasted.
//! [`TRIALS`] trials; if a majority stop within 2% of the median point, that point is the exit.
//! Cheap: a few ms in all.

use serde::{Deserialize, Serialize};
use std::time::Duration;
#[cfg(target_arch = "x86_64")]
use std::time::Instant;

/// A stall this long between two `pause`s is an exit or an interrupt (a `pause` takes 10–70 ns
/// on the hosts measured so far).
const STALL_NS: u64 = 1_000;
/// Trials; a majority must agree.
const TRIALS: usize = 7;
/// How long one trial spins at most without a stall.
const TRIAL_SPIN: Duration = Duration::from_millis(4);
/// The sleep before each trial.
const IDLE: Duration = Duration::from_millis(2);

/// Where a fresh loop of `pause`s first stopped, in the trials that agreed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PauseExit {
    /// `pause`s before the exit (the median of the agreeing trials).
    pub after_hints: u64,
    /// How long the loop had spun by then, ns.
    pub after_ns: u64,
    /// How long the stall lasted, ns (the median of the agreeing trials).
    pub stall_ns: u64,
}

/// What [`measure`] found: the report's line on the host (`PauseLoops::describe`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub enum PauseLoops {
    /// Not measured (no TSC to read, not a report, or a document from before the probe).
    #[default]
    NotMeasured,
    /// No steady exit point within [`TRIAL_SPIN`] of spinning.
    NoExit,
    /// A fresh loop stops here.
    Exit(PauseExit),
}

impl PauseLoops {
    /// One phrase for the report's header.
    pub fn describe(&self) -> String {
        match self {
            PauseLoops::NotMeasured => "not measured".into(),
            PauseLoops::NoExit => {
                format!("no VM exit at a steady point within {} ms of `pause`s", TRIAL_SPIN.as_millis())
            }
            PauseLoops::Exit(e) => format!(
                "a VM exit after {} `pause`s ({:.1} µs of spinning), a stall of {:.1} µs",
                e.after_hints,
                e.after_ns as f64 / 1e3,
                e.stall_ns as f64 / 1e3
            ),
        }
    }
}

/// One trial: where the first stall came (`pause`s before it, TSC ticks since the start) and
/// how long it lasted (ticks); `None` if the loop spun [`TRIAL_SPIN`] without one.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stall {
    hints: u64,
    at_ticks: u64,
    ticks: u64,
}

/// The host's pause-loop exit, measured now (module docs).
pub fn measure() -> PauseLoops {
    let Some(per_ns) = ticks_per_ns() else {
        return PauseLoops::NotMeasured;
    };
    let stall = (STALL_NS as f64 * per_ns) as u64;
    let limit = (TRIAL_SPIN.as_nanos() as f64 * per_ns) as u64;
    let trials: Vec<Option<Stall>> = (0..TRIALS)
        .map(|_| {
            std::thread::sleep(IDLE);
            first_stall(stall, limit)
        })
        .collect();
    match agreed(&trials) {
        Some(s) => PauseLoops::Exit(PauseExit {
            after_hints: s.hints,
            after_ns: (s.at_ticks as f64 / per_ns) as u64,
            stall_ns: (s.ticks as f64 / per_ns) as u64,
        }),
        None => PauseLoops::NoExit,
    }
}

/// The point most trials stopped at (within 2% of the median), with the medians of those
/// trials' positions and stalls; `None` without a majority.
fn agreed(trials: &[Option<Stall>]) -> Option<Stall> {
    let mut points: Vec<u64> = trials.iter().map(|t| t.map_or(u64::MAX, |s| s.hints)).collect();
    points.sort_unstable();
    let median = points[points.len() / 2];
    if median == u64::MAX {
        return None;
    }
    let near = |h: u64| h.abs_diff(median) <= median / 50 + 1;
    let mut agree: Vec<Stall> = trials.iter().flatten().filter(|s| near(s.hints)).copied().collect();
    if agree.len() * 2 <= trials.len() {
        return None;
    }
    let mid = agree.len() / 2;
    let pick = |agree: &mut Vec<Stall>, key: fn(&Stall) -> u64| {
        agree.sort_unstable_by_key(key);
        key(&agree[mid])
    };
    Some(Stall {
        hints: pick(&mut agree, |s| s.hints),
        at_ticks: pick(&mut agree, |s| s.at_ticks),
        ticks: pick(&mut agree, |s| s.ticks),
    })
}

#[cfg(target_arch = "x86_64")]
fn tsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 CPU and only reads the time-stamp counter.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// TSC ticks per ns, against the monotonic clock over 2 ms.
#[cfg(target_arch = "x86_64")]
fn ticks_per_ns() -> Option<f64> {
    let (t0, c0) = (Instant::now(), tsc());
    std::thread::sleep(Duration::from_millis(2));
    let (ns, ticks) = (t0.elapsed().as_nanos() as f64, tsc().wrapping_sub(c0) as f64);
    (ns > 0.0 && ticks > 0.0).then(|| ticks / ns)
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks_per_ns() -> Option<f64> {
    None
}

/// Spin `pause`s until two reads of the TSC around one of them are more than `stall` ticks
/// apart, or `limit` ticks have passed.
#[cfg(target_arch = "x86_64")]
fn first_stall(stall: u64, limit: u64) -> Option<Stall> {
    let start = tsc();
    let mut prev = start;
    let mut hints = 0u64;
    loop {
        std::hint::spin_loop();
        hints += 1;
        let now = tsc();
        if now.wrapping_sub(prev) > stall {
            return Some(Stall { hints, at_ticks: prev.wrapping_sub(start), ticks: now.wrapping_sub(prev) });
        }
        if now.wrapping_sub(start) > limit {
            return None;
        }
        prev = now;
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn first_stall(_: u64, _: u64) -> Option<Stall> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hints: u64, ticks: u64) -> Option<Stall> {
        Some(Stall { hints, at_ticks: hints * 50, ticks })
    }

    #[test]
    fn a_majority_at_one_point_is_the_exit() {
        let trials =
            [at(3001, 3000), at(3000, 5000), at(17_000, 20_000), at(3001, 2000), None, at(2999, 4000), at(3000, 2500)];
        assert_eq!(agreed(&trials), Some(Stall { hints: 3000, at_ticks: 150_000, ticks: 3000 }));
    }

    #[test]
    fn stalls_at_random_points_are_no_exit() {
        let trials = [at(1200, 3000), at(31_000, 5000), at(7000, 20_000), at(15_500, 2000), None, at(600, 4000), None];
        assert_eq!(agreed(&trials), None);
        assert_eq!(agreed(&[None; TRIALS]), None, "no stall at all");
        let three_of_seven = [at(3000, 1), at(3000, 1), at(3000, 1), None, None, None, None];
        assert_eq!(agreed(&three_of_seven), None, "a minority is no exit");
    }

    #[test]
    fn the_probe_ends_and_what_it_finds_is_consistent() {
        let found = measure();
        if let PauseLoops::Exit(e) = found {
            assert!(e.after_hints > 0 && e.stall_ns >= STALL_NS / 2, "{e:?}");
        }
        assert!(!found.describe().is_empty());
    }
}
