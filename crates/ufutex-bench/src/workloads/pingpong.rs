//! `ping-pong`: two threads bounce a counter through two words (A: ping, B: pong); the round
//! trip is one wake + wait each way. One pair pinned to two CPUs, or P pairs at once on the
//! same CPUs (oversubscribed). ns per round trip = wall time / round trips of one pair.
//!
//! `--shared`: the ponger of each pair is a forked child process that maps the words' memfd
//! again, at an address of its own, and meets the pinger (a thread of this process) through
//! the process-shared competitor. Children are forked while this process has one thread, die
//! with it, and are watched: a child that fails aborts the repetition (an error, never a hang).

use super::{skip_reason, Common, Padded, STACK};
use crate::competitor::{dispatch, Competitor, Op, Word, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::sys;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub pairs: usize,
    pub iters: usize,
    /// Pin the pinger to CPU 0 and the ponger to CPU 1 (mod the CPU count).
    pub pin: bool,
}

#[derive(Default)]
struct Pair {
    ping: Padded<AtomicU32>,
    pong: Padded<AtomicU32>,
}

/// One repetition: ns per round trip (`shared`: pongers in child processes).
pub fn once<C: Competitor>(c: &C, p: Params, shared: bool) -> io::Result<f64> {
    if shared {
        return cross_process::once(c, p);
    }
    let pairs: Vec<Pair> = (0..p.pairs).map(|_| Pair::default()).collect();
    let cpus = sys::allowed_cpus();
    let ready = AtomicUsize::new(0);
    let threads = 2 * p.pairs;
    let pin_err = AtomicUsize::new(0);
    let start = std::thread::scope(|s| -> io::Result<Instant> {
        for pair in &pairs {
            for side in 0..2 {
                let (ready, pin_err, cpus) = (&ready, &pin_err, &cpus);
                std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                    if p.pin && sys::pin_to_cpu(cpus[side % cpus.len()]).is_err() {
                        pin_err.fetch_add(1, Ordering::Relaxed);
                    }
                    ready.fetch_add(1, Ordering::SeqCst);
                    while ready.load(Ordering::SeqCst) <= threads {
                        std::thread::yield_now();
                    }
                    if side == 0 {
                        pinger(c, pair, p.iters)
                    } else {
                        ponger(c, pair, p.iters)
                    }
                })?;
            }
        }
        while ready.load(Ordering::SeqCst) < threads {
            std::thread::yield_now();
        }
        let start = Instant::now();
        ready.fetch_add(1, Ordering::SeqCst);
        Ok(start)
    })?;
    if pin_err.load(Ordering::Relaxed) != 0 {
        return Err(io::Error::other("sched_setaffinity failed: cannot pin"));
    }
    Ok(start.elapsed().as_nanos() as f64 / p.iters as f64)
}

fn pinger<C: Competitor>(c: &C, pair: &Pair, iters: usize) {
    for i in 1..=iters as u64 {
        pair.ping.0.set(i);
        c.wake(&pair.ping.0, 1, ANY);
        while pair.pong.0.get() != i {
            c.wait(&pair.pong.0, i - 1, ANY);
        }
    }
}

fn ponger<C: Competitor>(c: &C, pair: &Pair, iters: usize) {
    for i in 1..=iters as u64 {
        while pair.ping.0.get() != i {
            c.wait(&pair.ping.0, i - 1, ANY);
        }
        pair.pong.0.set(i);
        c.wake(&pair.pong.0, 1, ANY);
    }
}

pub fn run(common: &Common, p: Params) -> io::Result<Bench> {
    let comps = common.competitors()?;
    let case = format!(
        "pairs={} on {} CPUs{}, {} round trips{}",
        p.pairs,
        sys::online_cpus(),
        if p.pin { ", pinned" } else { "" },
        p.iters,
        if common.shared { ", pongers in child processes (memfd mapped again)" } else { "" }
    );
    let plan = Plan {
        workload: "ping-pong",
        case: common.case(case),
        metrics: vec![Metric::lower("round trip", "ns")],
        baseline: common.baseline(),
    };
    let shared = common.shared;
    common.scheduler().run(
        plan,
        &comps,
        |c| c.name(),
        |c| skip_reason(c, &[Op::WaitWake]),
        |c| dispatch!(c, c => once(c, p, shared)).map(|v| vec![v]),
    )
}

/// The `--shared` repetition: pingers here, pongers in child processes.
mod cross_process {
    use super::{Params, STACK};
    use crate::child::{self, Child, Exit};
    use crate::competitor::{Competitor, Word, ANY};
    use crate::sys;
    use crate::workloads::{padded_words, Padded};
    use std::io;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// Written into every word to stop both sides (never a round-trip count: those are < 2³²−1).
    const ABORT: u64 = u32::MAX as u64;
    /// Untimed round trips first: each child claims what it needs (its slot in a shared table)
    /// and every pair is known to be running before the clock starts.
    const WARM: u64 = 16;

    /// Child exit codes.
    const MAP_FAILED: i32 = 2;
    const PIN_FAILED: i32 = 3;
    const ABORTED: i32 = 4;

    fn describe(e: Exit) -> String {
        match e {
            Exit::Code(MAP_FAILED) => "ponger: mapping the memfd again failed".into(),
            Exit::Code(PIN_FAILED) => "ponger: sched_setaffinity failed: cannot pin".into(),
            Exit::Code(ABORTED) => "ponger: aborted by the parent".into(),
            other => format!("ponger: {other}"),
        }
    }

    /// Wait until `word` holds `want`: `false` if it was aborted instead.
    #[inline]
    fn await_value<C: Competitor>(c: &C, word: &AtomicU32, want: u64) -> bool {
        loop {
            let v = word.get();
            if v == want {
                return true;
            }
            if v == ABORT {
                return false;
            }
            c.wait(word, v, ANY);
        }
    }

    /// The child's side: rounds 1 ..= `rounds` on its own mapping of the words.
    fn ponger<C: Competitor>(
        c: &C,
        words: &crate::shm::Words<Padded<AtomicU32>>,
        k: usize,
        p: Params,
        cpu: usize,
        rounds: u64,
    ) -> i32 {
        let Ok(mine) = words.map_again() else { return MAP_FAILED };
        if p.pin && sys::pin_to_cpu(cpu).is_err() {
            return PIN_FAILED;
        }
        let (ping, pong) = (&mine[2 * k].0, &mine[2 * k + 1].0);
        for i in 1..=rounds {
            if !await_value(c, ping, i) {
                return ABORTED;
            }
            pong.set(i);
            c.wake(pong, 1, ANY);
        }
        0
    }

    /// Rounds `from ..= to` on the pinger's side: `false` if aborted.
    fn ping<C: Competitor>(c: &C, ping: &AtomicU32, pong: &AtomicU32, from: u64, to: u64) -> bool {
        for i in from..=to {
            ping.set(i);
            c.wake(ping, 1, ANY);
            if !await_value(c, pong, i) {
                return false;
            }
        }
        true
    }

    pub fn once<C: Competitor>(c: &C, p: Params) -> io::Result<f64> {
        let words = padded_words(2 * p.pairs, true)?;
        let cpus = sys::allowed_cpus();
        let rounds = WARM + p.iters as u64;
        let deadline = Instant::now() + Duration::from_secs(30) + Duration::from_micros(100) * p.iters as u32;
        // Every child before any thread of this repetition exists (`child::fork` checks).
        let mut kids: Vec<Child> = Vec::with_capacity(p.pairs);
        for k in 0..p.pairs {
            let cpu = cpus[1 % cpus.len()];
            kids.push(child::fork(|| ponger(c, &words, k, p, cpu, rounds))?);
        }
        let ready = AtomicUsize::new(0);
        let go = AtomicBool::new(false);
        let abort = AtomicBool::new(false);
        let done = AtomicUsize::new(0);
        let last_ns = AtomicU64::new(0);
        let base = Instant::now();
        let mut failure: Option<String> = None;
        let mut start_ns = 0u64;
        std::thread::scope(|s| -> io::Result<()> {
            for k in 0..p.pairs {
                let (ready, go, abort, done, last_ns, cpus, words) =
                    (&ready, &go, &abort, &done, &last_ns, &cpus, &words);
                std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                    if p.pin && sys::pin_to_cpu(cpus[0]).is_err() {
                        abort.store(true, Ordering::SeqCst);
                        return;
                    }
                    let (pi, po) = (&words[2 * k].0, &words[2 * k + 1].0);
                    if !ping(c, pi, po, 1, WARM) {
                        return;
                    }
                    ready.fetch_add(1, Ordering::SeqCst);
                    while !go.load(Ordering::Acquire) {
                        if abort.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::yield_now();
                    }
                    if ping(c, pi, po, WARM + 1, rounds) {
                        last_ns.fetch_max(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })?;
            }
            // The watchdog: start the clock when every pair is warm, stop everything if a child
            // fails or time runs out.
            while done.load(Ordering::SeqCst) < p.pairs {
                if !go.load(Ordering::Relaxed) && ready.load(Ordering::SeqCst) == p.pairs {
                    start_ns = base.elapsed().as_nanos() as u64;
                    go.store(true, Ordering::Release);
                }
                if abort.load(Ordering::SeqCst) {
                    failure = Some("sched_setaffinity failed: cannot pin".into());
                }
                for kid in kids.iter_mut() {
                    match kid.try_wait() {
                        Ok(None) | Err(_) => {}
                        Ok(Some(Exit::Code(0))) => {} // its last pong is out
                        Ok(Some(e)) => failure = Some(describe(e)),
                    }
                }
                if Instant::now() >= deadline {
                    failure = Some(format!("no result within {:?}", deadline - base));
                }
                if failure.is_some() {
                    abort.store(true, Ordering::SeqCst);
                    for w in words.iter() {
                        w.0.set(ABORT);
                        c.wake(&w.0, usize::MAX, ANY);
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(())
        })?;
        // Reap every child (the ones that ended are reaped already; `kill` is a no-op for them).
        for mut kid in kids {
            match kid.try_wait() {
                Err(_) => {} // reaped in the watchdog
                Ok(Some(Exit::Code(0))) => {}
                Ok(Some(e)) => failure = failure.or(Some(describe(e))),
                Ok(None) => match kid.wait_until(deadline) {
                    Ok(Exit::Code(0)) => {}
                    Ok(e) => failure = failure.or(Some(describe(e))),
                    Err(e) => failure = failure.or(Some(e.to_string())),
                },
            }
        }
        if let Some(f) = failure {
            return Err(io::Error::other(format!("{}: cross-process ping-pong: {f}", c.name())));
        }
        Ok(last_ns.load(Ordering::SeqCst).saturating_sub(start_ns) as f64 / p.iters as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;

    #[test]
    fn pairs_finish_every_round_trip() {
        let m = Mock::default();
        assert!(once(&m, Params { pairs: 1, iters: 200, pin: true }, false).unwrap() > 0.0);
        assert!(once(&m, Params { pairs: 3, iters: 100, pin: false }, false).unwrap() > 0.0);
        assert_eq!(m.queued(), Some(0));
    }
}
