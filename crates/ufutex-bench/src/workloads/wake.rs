//! `wake`, `wake-parallel` and `requeue`: perf bench futex-wake / -wake-parallel / -requeue.
//! N waiters sleep on one word, verified asleep (every waiter thread in state 'S' in /proc, and
//! for ufutex exactly N queued); then the timed call(s), and the time until every waiter has
//! returned from its wait. `--shared`: the process-shared competitors on words in a `MAP_SHARED`
//! memfd mapping; `wake -n 1 --shared` is the cost of a shared wake that finds one waiter.

use super::{padded_words, skip_reason, wait_while, Common, Waiters, STACK};
use crate::competitor::{dispatch, Competitor, Op, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// Which of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One waker, `nwake` waiters per call, calls until all are woken.
    Wake { nwake: usize },
    /// `wakers` threads at once, each waking its share in one call.
    Parallel { wakers: usize },
    /// One requeue call moves every waiter (`nr_wake` woken, the rest moved) to a second word.
    Requeue { nr_wake: usize },
}

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub waiters: usize,
    pub kind: Kind,
    /// With `--shared`: register the words' mapping with ufutex (`shared::register_mapping`),
    /// so that ufutex-shared's waits and wakes skip the identity query (the kernel is unaffected).
    pub register: bool,
}

impl Params {
    pub fn workload(&self) -> &'static str {
        match self.kind {
            Kind::Wake { .. } => "wake",
            Kind::Parallel { .. } => "wake-parallel",
            Kind::Requeue { .. } => "requeue",
        }
    }

    pub fn case(&self) -> String {
        let case = self.case_alone();
        if self.register {
            format!("{case}, mapping registered")
        } else {
            case
        }
    }

    fn case_alone(&self) -> String {
        match self.kind {
            Kind::Wake { nwake } if nwake >= self.waiters => format!("waiters={} nwake=all", self.waiters),
            Kind::Wake { nwake } => format!("waiters={} nwake={}", self.waiters, nwake),
            Kind::Parallel { wakers } => format!("waiters={} wakers={}", self.waiters, wakers),
            Kind::Requeue { nr_wake } => format!("waiters={} nr_wake={} nr_requeue=rest", self.waiters, nr_wake),
        }
    }
}

/// One repetition: [time of the call(s) in µs, time until all waiters ran in µs].
pub fn once<C: Competitor>(c: &C, p: Params, shared: bool) -> io::Result<[f64; 2]> {
    let n = p.waiters;
    let words = padded_words(2, shared)?;
    if p.register {
        // The words' memfd mapping is never unmapped (`shm.rs`): the promise holds.
        let bytes = std::mem::size_of_val(&*words);
        ufutex::shared::register_mapping(words.as_ptr().cast(), bytes)
            .map_err(|e| io::Error::other(format!("register_mapping: {e}")))?;
    }
    let (from, to) = (&words[0], &words[1]);
    let waiters = Waiters::new(n);
    let result = std::thread::scope(|s| {
        for i in 0..n {
            let waiters = &waiters;
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                waiters.arrive();
                wait_while(c, &from.0, 0, ANY);
                waiters.done(i);
            })?;
        }
        let result = waiters.settle(c, n).and_then(|()| timed(c, p, &from.0, &to.0, &waiters));
        // Release everybody whatever happened, so the scope can join.
        from.0.store(1, Ordering::SeqCst);
        to.0.store(1, Ordering::SeqCst);
        c.wake(&from.0, usize::MAX, ANY);
        c.wake(&to.0, usize::MAX, ANY);
        result
    });
    if p.register {
        // Every wait and wake on the words has returned (the scope joined): give the entry
        // back, or a run of more than ~250 repetitions would find the list full.
        ufutex::shared::unregister_mapping(words.as_ptr().cast())
            .map_err(|e| io::Error::other(format!("unregister_mapping: {e}")))?;
    }
    result
}

fn timed<C: Competitor>(c: &C, p: Params, from: &AtomicU32, to: &AtomicU32, waiters: &Waiters) -> io::Result<[f64; 2]> {
    let n = p.waiters;
    let us = |ns: u64| ns as f64 / 1e3;
    match p.kind {
        Kind::Wake { nwake } => {
            let start = waiters.base.elapsed().as_nanos() as u64;
            from.store(1, Ordering::SeqCst);
            let mut woken = 0;
            while woken < n {
                let k = c.wake(from, nwake.max(1), ANY);
                if k == 0 {
                    return Err(io::Error::other(format!("{}: wake found {} of {n} sleepers", c.name(), woken)));
                }
                woken += k;
            }
            let call = waiters.base.elapsed().as_nanos() as u64 - start;
            waiters.wait_finished();
            Ok([us(call), us(waiters.last_done_ns().saturating_sub(start))])
        }
        Kind::Parallel { wakers } => parallel(c, n, wakers, from, waiters),
        Kind::Requeue { nr_wake } => {
            // Change the word first (the requeue compares against the new value), so a waiter
            // the requeue wakes sees it changed and does not wait on `from` again.
            from.store(1, Ordering::SeqCst);
            let start = Instant::now();
            let r = c.requeue(from, 1, to, nr_wake, n);
            let call = start.elapsed().as_nanos() as u64;
            match r {
                Ok(k) if k == n => {}
                other => return Err(io::Error::other(format!("{}: requeue of {n} returned {other:?}", c.name()))),
            }
            // Then wake them from their new word: the total is requeue + wake + all run.
            let start_ns = waiters.base.elapsed().as_nanos() as u64 - call;
            c.wake(to, usize::MAX, ANY);
            waiters.wait_finished();
            Ok([us(call), us(waiters.last_done_ns().saturating_sub(start_ns))])
        }
    }
}

fn parallel<C: Competitor>(
    c: &C,
    n: usize,
    wakers: usize,
    word: &AtomicU32,
    waiters: &Waiters,
) -> io::Result<[f64; 2]> {
    let wakers = wakers.clamp(1, n.max(1));
    let ready = AtomicUsize::new(0);
    let call_ns = AtomicU64::new(0);
    let woken = AtomicUsize::new(0);
    let start = waiters.base.elapsed().as_nanos() as u64;
    word.store(1, Ordering::SeqCst);
    std::thread::scope(|s| {
        for k in 0..wakers {
            let share = n / wakers + usize::from(k < n % wakers);
            let (ready, call_ns, woken) = (&ready, &call_ns, &woken);
            s.spawn(move || {
                ready.fetch_add(1, Ordering::SeqCst);
                while ready.load(Ordering::SeqCst) < wakers {
                    std::hint::spin_loop();
                }
                let t = Instant::now();
                woken.fetch_add(c.wake(word, share, ANY), Ordering::SeqCst);
                call_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::SeqCst);
            });
        }
    });
    // Shares can miss when waiters race back; sweep up the rest (not timed as a call).
    let mut total = woken.load(Ordering::SeqCst);
    while total < n {
        let k = c.wake(word, n - total, ANY);
        if k == 0 {
            return Err(io::Error::other(format!("{}: parallel wake found {total} of {n}", c.name())));
        }
        total += k;
    }
    waiters.wait_finished();
    let avg_call = call_ns.load(Ordering::SeqCst) as f64 / wakers as f64;
    Ok([avg_call / 1e3, waiters.last_done_ns().saturating_sub(start) as f64 / 1e3])
}

pub fn run(common: &Common, p: Params) -> io::Result<Bench> {
    let comps = common.competitors()?;
    let call = match p.kind {
        Kind::Parallel { .. } => "call (avg per waker)",
        Kind::Requeue { .. } => "requeue call",
        Kind::Wake { .. } => "wake call(s)",
    };
    let plan = Plan {
        workload: p.workload(),
        case: common.case(p.case()),
        metrics: vec![Metric::lower(call, "µs"), Metric::lower("until all ran", "µs")],
        baseline: common.baseline(),
    };
    let shared = common.shared;
    let ops: &[Op] = if matches!(p.kind, Kind::Requeue { .. }) { &[Op::Requeue] } else { &[Op::WaitWake] };
    common.scheduler().run(
        plan,
        &comps,
        |c| c.name(),
        |c| skip_reason(c, ops),
        |c| dispatch!(c, c => once(c, p, shared)).map(|v| v.to_vec()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;

    fn check(kind: Kind) {
        for (waiters, shared) in [(8, false), (8, true), (1, true)] {
            let m = Mock::default();
            let [call, all] = once(&m, Params { waiters, kind, register: false }, shared).unwrap();
            // The last waiter may run before the waker returns from its call: no order between the two.
            assert!(call > 0.0 && all > 0.0, "{kind:?}: call {call} all {all}");
            assert_eq!(m.queued(), Some(0));
        }
    }

    #[test]
    fn wake_all_at_once_and_one_by_one() {
        check(Kind::Wake { nwake: usize::MAX });
        check(Kind::Wake { nwake: 1 });
    }

    #[test]
    fn wake_parallel_wakes_every_share() {
        check(Kind::Parallel { wakers: 3 });
    }

    #[test]
    fn requeue_moves_everyone_then_they_all_run() {
        check(Kind::Requeue { nr_wake: 0 });
        check(Kind::Requeue { nr_wake: 1 });
    }
}
