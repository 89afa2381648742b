//! `ping-pong`: two threads bounce a counter through two words (A: ping, B: pong); the round
//! trip is one wake + wait each way. One pair pinned to two CPUs, or P pairs at once on the
//! same CPUs (oversubscribed). ns per round trip = wall time / round trips of one pair.

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

/// One repetition: ns per round trip.
pub fn once<C: Competitor>(c: &C, p: Params) -> io::Result<f64> {
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
        "pairs={} on {} CPUs{}, {} round trips",
        p.pairs,
        sys::online_cpus(),
        if p.pin { ", pinned" } else { "" },
        p.iters
    );
    let plan =
        Plan { workload: "ping-pong", case, metrics: vec![Metric::lower("round trip", "ns")], baseline: "kernel" };
    common.scheduler().run(
        plan,
        &comps,
        |c| c.name(),
        |c| skip_reason(c, &[Op::WaitWake]),
        |c| dispatch!(c, c => once(c, p)).map(|v| vec![v]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;

    #[test]
    fn pairs_finish_every_round_trip() {
        let m = Mock::default();
        assert!(once(&m, Params { pairs: 1, iters: 200, pin: true }).unwrap() > 0.0);
        assert!(once(&m, Params { pairs: 3, iters: 100, pin: false }).unwrap() > 0.0);
        assert_eq!(m.queued(), Some(0));
    }
}
