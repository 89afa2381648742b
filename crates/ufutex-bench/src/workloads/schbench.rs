//! `schbench`: message threads wake worker threads (the wake-heavy load behind the resizable
//! private hash seed). Each message thread posts a request to each of its workers (timestamp,
//! bump the worker's word, wake it), then sleeps until the last worker of the round wakes it.
//! Workers spin `work_us` per request. Requests/s, and the wake-up latency (post → worker
//! running) p50 and p99. `resize` adds a ufutex domain that grew by itself ("auto") and a
//! domain fixed at the size it grew to: the hot path must not care which.

use super::{skip_reason, Common, Gate, Padded, STACK};
use crate::competitor::{dispatch, AnyCompetitor, Competitor, Op, Ufutex, Word, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::stats;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use ufutex::Slots;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub messages: usize,
    pub workers: usize,
    pub work_us: u64,
    /// Also run ufutex on an auto-sized domain that has resized vs a fixed one.
    pub resize: bool,
}

#[derive(Default)]
struct Worker {
    word: Padded<AtomicU32>,
    posted_ns: AtomicU64,
}

#[derive(Default)]
struct Message {
    done: Padded<AtomicU32>,
    pending: Padded<AtomicUsize>,
    stop: AtomicBool,
}

fn spin_for(us: u64) {
    if us == 0 {
        return;
    }
    let t = Instant::now();
    let d = Duration::from_micros(us);
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// One repetition: [requests/s, p50 wake-up µs, p99 wake-up µs].
pub fn once<C: Competitor>(c: &C, p: Params, runtime: Duration) -> io::Result<[f64; 3]> {
    let base = Instant::now();
    let msgs: Vec<Message> = (0..p.messages).map(|_| Message::default()).collect();
    let workers: Vec<Vec<Worker>> =
        (0..p.messages).map(|_| (0..p.workers).map(|_| Worker::default()).collect()).collect();
    let gate = Gate::default();
    let requests = AtomicU64::new(0);
    let (elapsed, lats) = std::thread::scope(|s| -> io::Result<(Duration, Vec<u64>)> {
        let mut handles = Vec::new();
        for (m, ws) in msgs.iter().zip(&workers) {
            for w in ws {
                handles.push(
                    std::thread::Builder::new()
                        .stack_size(STACK)
                        .spawn_scoped(s, move || worker(c, m, w, base, p.work_us))?,
                );
            }
            let (gate, requests) = (&gate, &requests);
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                gate.enter();
                let rounds = message(c, m, ws, base, gate);
                requests.fetch_add(rounds * ws.len() as u64, Ordering::Relaxed);
            })?;
        }
        let elapsed = gate.run_for(p.messages, runtime);
        let mut lats = Vec::new();
        for h in handles {
            lats.extend(h.join().map_err(|_| io::Error::other("a worker panicked"))?);
        }
        Ok((elapsed, lats))
    })?;
    let lats: Vec<f64> = lats.into_iter().map(|ns| ns as f64 / 1e3).collect();
    Ok([
        requests.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
        stats::percentile(&lats, 50.0),
        stats::percentile(&lats, 99.0),
    ])
}

fn message<C: Competitor>(c: &C, m: &Message, ws: &[Worker], base: Instant, gate: &Gate) -> u64 {
    let mut round = 0u64;
    while !gate.stopped() {
        m.pending.0.store(ws.len(), Ordering::SeqCst);
        for w in ws {
            w.posted_ns.store(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            w.word.0.fetch_add(1, Ordering::Release);
            c.wake(&w.word.0, 1, ANY);
        }
        round += 1;
        while m.done.0.get() != round {
            c.wait(&m.done.0, round - 1, ANY);
        }
    }
    m.stop.store(true, Ordering::SeqCst);
    for w in ws {
        w.word.0.fetch_add(1, Ordering::Release);
        c.wake(&w.word.0, 1, ANY);
    }
    round
}

fn worker<C: Competitor>(c: &C, m: &Message, w: &Worker, base: Instant, work_us: u64) -> Vec<u64> {
    let mut lats = Vec::new();
    let mut seen = 0u64;
    loop {
        while w.word.0.get() == seen {
            c.wait(&w.word.0, seen, ANY);
        }
        seen = w.word.0.get();
        if m.stop.load(Ordering::SeqCst) {
            return lats;
        }
        let now = base.elapsed().as_nanos() as u64;
        lats.push(now.saturating_sub(w.posted_ns.load(Ordering::Relaxed)));
        spin_for(work_us);
        if m.pending.0.fetch_sub(1, Ordering::AcqRel) == 1 {
            m.done.0.fetch_add(1, Ordering::Release);
            c.wake(&m.done.0, 1, ANY);
        }
    }
}

fn metrics() -> Vec<Metric> {
    vec![Metric::higher("requests/s", "req/s"), Metric::lower("wake-up p50", "µs"), Metric::lower("wake-up p99", "µs")]
}

pub fn run(common: &Common, p: Params) -> io::Result<Bench> {
    let mut comps = common.competitors()?;
    let runtime = common.runtime;
    let mut notes = Vec::new();
    if p.resize {
        let auto = Ufutex::with_slots(Slots::Auto)?.labelled("ufutex[auto]");
        let before = auto.domain().slots();
        once(&auto, p, runtime.min(Duration::from_millis(200)))?;
        let grown = auto.domain().slots();
        notes.push(format!(
            "ufutex[auto] is a domain that resized itself from {before} to {grown} slots while the threads arrived; ufutex[fixed] was created at {grown} slots"
        ));
        let fixed = Ufutex::with_slots(Slots::Fixed(grown))?.labelled("ufutex[fixed]");
        comps.push(AnyCompetitor::Ufutex(auto));
        comps.push(AnyCompetitor::Ufutex(fixed));
    }
    let threads = p.messages * (p.workers + 1);
    let case = format!("messages={} workers={} ({threads} threads) work={}µs", p.messages, p.workers, p.work_us);
    let plan = Plan { workload: "schbench", case, metrics: metrics(), baseline: "kernel" };
    let mut bench = common.scheduler().run(
        plan,
        &comps,
        |c| c.name(),
        |c| skip_reason(c, &[Op::WaitWake]),
        |c| dispatch!(c, c => once(c, p, runtime)).map(|v| v.to_vec()),
    )?;
    if let Ok(n) = crate::sys::futex_hash_get_slots() {
        notes.push(format!(
            "kernel private hash after the runs: {}",
            if n == 0 { "global".into() } else { format!("{n} slots") }
        ));
    }
    bench.notes = notes;
    Ok(bench)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;
    use crate::workloads::some_repetition_counts;

    #[test]
    fn requests_flow_and_every_thread_stops() {
        let m = Mock::default();
        let p = Params { messages: 2, workers: 3, work_us: 1, resize: false };
        let mut latencies = Vec::new();
        let counted = some_repetition_counts(10, || {
            let [rate, p50, p99] = once(&m, p, Duration::from_millis(30)).unwrap();
            latencies.push((p50, p99));
            rate
        });
        assert!(counted, "no repetition counted a request");
        assert!(latencies.iter().all(|(p50, p99)| p50 <= p99), "{latencies:?}");
        assert_eq!(m.queued(), Some(0));
    }
}
