//! `wake`, `wake-parallel` and `requeue`: perf bench futex-wake / -wake-parallel / -requeue.
//! N waiters sleep on one word, verified asleep (every waiter thread in state 'S' in /proc, and
//! for ufutex exactly N queued); then the timed call(s), and the time until every waiter has
//! returned from its wait (each then sleeps in the kernel until the repetition is over, so no
//! thread's exit falls in the times). `--shared`: the process-shared competitors on words in a
//! `MAP_SHARED` memfd mapping; `wake -n 1 --shared` is the cost of a shared wake that finds one
//! waiter. `--pin`: every competitor's threads on the same CPUs ([`Params::pin`]).

use super::{padded_words, skip_reason, wait_while, Common, Waiters, STACK};
use crate::competitor::{dispatch, Competitor, Op, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::sys;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
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
    /// Pin the waker to the first CPU this process may use and waiter `i` to the `i + 1`-th
    /// (round robin, as perf bench futex pins its waiters), for the repetition. Unpinned, the
    /// scheduler puts a lone waiter on the waker's CPU in some processes and on the other CPU
    /// in others, and the two cost a wake 3 µs and 9 µs here: competitors in one run can land
    /// in different placements, and the ratio then says nothing about them.
    pub pin: bool,
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
        let mut case = self.case_alone();
        if self.pin {
            case.push_str(", pinned");
        }
        if self.register {
            case.push_str(", mapping registered");
        }
        case
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

/// Attempts at one repetition whose timed calls find fewer waiters than there are (below).
const ATTEMPTS: usize = 3;

/// The timed calls found fewer waiters queued than there are: one was still on its way to the
/// queue when the calls came. [`Waiters::settle`] takes a waiter asleep in `/proc` for one
/// queued when the competitor cannot count its queue (the kernel cannot), and a waiter may also
/// sleep on its way (a user-space bucket lock that sleeps when contended, as ufutex's does,
/// also under a preload library that serves the kernel's calls). Such a repetition does not
/// measure what it says, so it is run again.
#[derive(Debug)]
struct Shortfall(String);

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Shortfall {}

fn shortfall(msg: String) -> io::Error {
    io::Error::other(Shortfall(msg))
}

/// The end of a repetition, which its threads wait for asleep in a kernel futex (the same for
/// every competitor) instead of exiting as soon as their part is done: a thread that exits
/// unmaps its stack, and the TLB shootdowns that costs (IPIs to the other CPU) were most of
/// "until all ran" for every competitor (BENCHMARKS.md, twenty-ninth session).
struct Release(AtomicU32);

impl Release {
    fn new() -> Release {
        Release(AtomicU32::new(0))
    }

    /// Sleep until [`Release::open`] (tolerates spurious returns).
    fn wait(&self) {
        while self.0.load(Ordering::SeqCst) == 0 {
            let _ = sys::legacy_wait(&self.0, 0);
        }
    }

    /// The repetition is over: let every thread go.
    fn open(&self) {
        self.0.store(1, Ordering::SeqCst);
        let _ = sys::legacy_wake(&self.0, usize::MAX);
    }
}

/// One repetition: [time of the call(s) in µs, time until all waiters ran in µs]. Run again
/// (up to [`ATTEMPTS`] in all) when its calls found a waiter not yet queued ([`Shortfall`]).
pub fn once<C: Competitor>(c: &C, p: Params, shared: bool) -> io::Result<[f64; 2]> {
    let mut attempt = 1;
    loop {
        match attempt_once(c, p, shared) {
            Err(e) if e.get_ref().is_some_and(|e| e.is::<Shortfall>()) => {
                if attempt == ATTEMPTS {
                    return Err(io::Error::other(format!(
                        "{e} (in each of {ATTEMPTS} attempts: a waiter that looked asleep was not queued yet, or \
                         a waiter was lost)"
                    )));
                }
                attempt += 1;
            }
            r => return r,
        }
    }
}

fn attempt_once<C: Competitor>(c: &C, p: Params, shared: bool) -> io::Result<[f64; 2]> {
    let n = p.waiters;
    let cpus = sys::allowed_cpus();
    let _pinned = if p.pin { Some(sys::Pinned::to(cpus[0])?) } else { None };
    let words = padded_words(2, shared)?;
    if p.register {
        // The words' memfd mapping is never unmapped (`shm.rs`): the promise holds.
        let bytes = std::mem::size_of_val(&*words);
        ufutex::shared::register_mapping(words.as_ptr().cast(), bytes)
            .map_err(|e| io::Error::other(format!("register_mapping: {e}")))?;
    }
    let (from, to) = (&words[0], &words[1]);
    let pin_failed = AtomicBool::new(false);
    let release = Release::new();
    let waiters = Waiters::new(n);
    let result = std::thread::scope(|s| {
        for i in 0..n {
            let (waiters, cpus, pin_failed, release) = (&waiters, &cpus, &pin_failed, &release);
            std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, move || {
                if p.pin && sys::pin_to_cpu(cpus[(i + 1) % cpus.len()]).is_err() {
                    pin_failed.store(true, Ordering::SeqCst);
                }
                waiters.arrive();
                wait_while(c, &from.0, 0, ANY);
                waiters.done(i);
                release.wait();
            })?;
        }
        let result = waiters.settle(c, n).and_then(|()| {
            if pin_failed.load(Ordering::SeqCst) {
                return Err(io::Error::other("sched_setaffinity failed: cannot pin a waiter"));
            }
            timed(c, p, &from.0, &to.0, &waiters)
        });
        // Release everybody whatever happened, so the scope can join.
        from.0.store(1, Ordering::SeqCst);
        to.0.store(1, Ordering::SeqCst);
        c.wake(&from.0, usize::MAX, ANY);
        c.wake(&to.0, usize::MAX, ANY);
        release.open();
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
                    return Err(shortfall(format!("{}: wake found {} of {n} sleepers", c.name(), woken)));
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
                Ok(k) if k < n => return Err(shortfall(format!("{}: requeue of {n} moved {k}", c.name()))),
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
    // When the first waker left the starting line (ns since `waiters.base`): no wake before.
    let start = AtomicU64::new(u64::MAX);
    // Wakers whose call returned; the creator sleeps on it until all have.
    let called = AtomicU32::new(0);
    // The wakers stay too, as the waiters do: their starts and exits fall outside the times.
    let release = Release::new();
    word.store(1, Ordering::SeqCst);
    std::thread::scope(|s| {
        for k in 0..wakers {
            let share = n / wakers + usize::from(k < n % wakers);
            let (ready, call_ns, woken, start, called, release) = (&ready, &call_ns, &woken, &start, &called, &release);
            s.spawn(move || {
                ready.fetch_add(1, Ordering::SeqCst);
                while ready.load(Ordering::SeqCst) < wakers {
                    std::hint::spin_loop();
                }
                start.fetch_min(waiters.base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                let t = Instant::now();
                woken.fetch_add(c.wake(word, share, ANY), Ordering::SeqCst);
                call_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::SeqCst);
                called.fetch_add(1, Ordering::SeqCst);
                let _ = sys::legacy_wake(called, 1);
                release.wait();
            });
        }
        let result = sweep_and_wait(c, n, wakers, word, waiters, &woken, &called);
        release.open();
        result
    })?;
    let avg_call = call_ns.load(Ordering::SeqCst) as f64 / wakers as f64;
    let start = start.load(Ordering::SeqCst);
    Ok([avg_call / 1e3, waiters.last_done_ns().saturating_sub(start) as f64 / 1e3])
}

/// The creator's part of [`parallel`]: once every waker's call returned, wake whom the shares
/// missed (waiters race back; not timed as a call), then wait for every waiter to have run.
fn sweep_and_wait<C: Competitor>(
    c: &C,
    n: usize,
    wakers: usize,
    word: &AtomicU32,
    waiters: &Waiters,
    woken: &AtomicUsize,
    called: &AtomicU32,
) -> io::Result<()> {
    loop {
        let k = called.load(Ordering::SeqCst);
        if k as usize >= wakers {
            break;
        }
        let _ = sys::legacy_wait(called, k);
    }
    let mut total = woken.load(Ordering::SeqCst);
    while total < n {
        let k = c.wake(word, n - total, ANY);
        if k == 0 {
            return Err(shortfall(format!("{}: parallel wake found {total} of {n}", c.name())));
        }
        total += k;
    }
    waiters.wait_finished();
    Ok(())
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
        for (waiters, shared, pin) in
            [(8, false, false), (8, true, false), (1, true, false), (1, true, true), (8, false, true)]
        {
            let m = Mock::default();
            let [call, all] = once(&m, Params { waiters, kind, register: false, pin }, shared).unwrap();
            // The last waiter may run before the waker returns from its call: no order between the two.
            assert!(call > 0.0 && all > 0.0, "{kind:?}: call {call} all {all}");
            assert_eq!(m.queued(), Some(0));
        }
    }

    /// A pinned repetition gives the waker its CPUs back, and says so in its case.
    #[test]
    fn pinning_lasts_for_the_repetition_and_is_named() {
        let before = sys::allowed_cpus();
        let p = Params { waiters: 2, kind: Kind::Wake { nwake: 1 }, register: false, pin: true };
        once(&Mock::default(), p, false).unwrap();
        assert_eq!(sys::allowed_cpus(), before);
        assert_eq!(p.case(), "waiters=2 nwake=1, pinned");
        let registered = Params { waiters: 1, kind: Kind::Wake { nwake: 1 }, register: true, pin: true };
        assert_eq!(registered.case(), "waiters=1 nwake=all, pinned, mapping registered");
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

    /// A waiter asleep on its way to the queue looks asleep to a competitor that cannot count
    /// its queue: the calls find one waiter short, and the repetition is run again.
    #[test]
    fn a_waiter_not_yet_queued_makes_the_repetition_run_again() {
        for kind in [Kind::Wake { nwake: usize::MAX }, Kind::Parallel { wakers: 2 }, Kind::Requeue { nr_wake: 0 }] {
            let p = Params { waiters: 4, kind, register: false, pin: false };
            let m = Mock::uncounted();
            m.late.store(1, Ordering::SeqCst);
            let [call, all] = once(&m, p, false).unwrap();
            assert!(call > 0.0 && all > 0.0, "{kind:?}");
            assert_eq!(m.late.load(Ordering::SeqCst), 0);
            // The first attempt's 4 waits, and at least the second's 4.
            assert!(m.waits() >= 8, "{kind:?}: {} waits: the repetition was not run again", m.waits());

            // Late in every attempt: an error that says why.
            let m = Mock::uncounted();
            m.late.store(u64::MAX, Ordering::SeqCst);
            let e = once(&m, p, false).unwrap_err().to_string();
            assert!(e.contains("in each of 3 attempts"), "{kind:?}: {e}");
        }
    }
}
