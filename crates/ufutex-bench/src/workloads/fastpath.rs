//! Fast paths: a wake with no waiters and a wait whose value mismatches, in ns per call, over
//! 256 distinct words (each on its own cache line) so that no competitor profits from one
//! hot address; `black_box` keeps every call and its result alive. `--shared`: the words are
//! in a `MAP_SHARED` memfd mapping and the competitors are the process-shared ones.

use super::{padded_words, skip_reason, Common, Padded};
use crate::competitor::{dispatch, Competitor, Op, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use std::hint::black_box;
use std::io;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

const WORDS: usize = 256;

/// Which fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    WakeNoWaiters,
    WaitMismatch,
}

impl Path {
    pub fn label(self) -> &'static str {
        match self {
            Path::WakeNoWaiters => "wake, no waiters",
            Path::WaitMismatch => "wait, value mismatch",
        }
    }
}

/// One repetition: ns per call, for at least `runtime`.
pub fn once<C: Competitor>(c: &C, path: Path, runtime: Duration, shared: bool) -> io::Result<f64> {
    let words = padded_words(WORDS, shared)?;
    let words: &[Padded<AtomicU32>] = &words;
    // Check the competitor does what we time: a mismatch really is one, nobody is woken.
    match path {
        Path::WakeNoWaiters if c.wake(&*words[0], 1, ANY) != 0 => return Err(io::Error::other("woke a ghost")),
        Path::WaitMismatch if c.wait(&*words[0], 1, ANY) != crate::competitor::Wait::Mismatch => {
            return Err(io::Error::other(format!("{}: mismatching wait did not fail", c.name())))
        }
        _ => {}
    }
    const BATCH: usize = 4096;
    let start = Instant::now();
    let mut calls = 0u64;
    loop {
        for i in 0..BATCH {
            let w = black_box(&*words[i % WORDS]);
            match path {
                Path::WakeNoWaiters => {
                    black_box(c.wake(w, black_box(1), ANY));
                }
                Path::WaitMismatch => {
                    black_box(c.wait(w, black_box(1), ANY));
                }
            }
        }
        calls += BATCH as u64;
        if start.elapsed() >= runtime {
            break;
        }
    }
    Ok(start.elapsed().as_nanos() as f64 / calls as f64)
}

pub fn run(common: &Common, paths: &[Path]) -> io::Result<Vec<Bench>> {
    let comps = common.competitors()?;
    let sched = common.scheduler();
    let (runtime, shared) = (common.runtime, common.shared);
    paths
        .iter()
        .map(|&path| {
            let plan = Plan {
                workload: "fastpath",
                case: common.case(path.label().into()),
                metrics: vec![Metric::lower("call", "ns")],
                baseline: common.baseline(),
            };
            sched.run(
                plan,
                &comps,
                |c| c.name(),
                |c| skip_reason(c, &[Op::WaitWake]),
                |c| dispatch!(c, c => once(c, path, runtime, shared)).map(|v| vec![v]),
            )
        })
        .collect()
}
