//! `sem-pingpong`: the classic two-semaphore handoff between two processes (issue 15). The
//! parent posts "ping" and waits on "pong"; a forked child waits on "ping" and posts "pong".
//! ns per round trip = the parent's wall time over the timed round trips.
//!
//! Per repetition: a fresh pair of semaphores, a child forked while this process has one
//! thread (`child::fork`), pinned to the second allowed CPU and the parent to the first (unless
//! `--no-pin`), a few untimed round trips (the child has its handles and both sides run), then
//! the timed ones. Every wait is bounded: waits sleep in slices ([`Slices`], a deadline
//! computed once per slice, so no clock read per wait); a wait that reaches the slice's end
//! looks at the child (and the repetition's deadline) and goes on. A child that fails ends the
//! repetition with an error within a slice, a stuck one at the deadline — never a hang.
//! (A SIGCHLD handler that interrupts the wait was tried first: it races, since the signal
//! can land while the parent runs between its post and its wait, and the wait then sleeps.)

use super::Common;
use crate::child::{self, Child, Exit};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::sem_competitor::{dispatch_sem, AnySem, Bound, SemCompetitor, Sems, Side, SysvSemop};
use crate::sys;
use crate::sysv::errno_name;
use std::io;
use std::time::{Duration, Instant};

pub const BASELINE: &str = SysvSemop::NAME;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Timed round trips per repetition.
    pub iters: usize,
    /// Pin the parent to the first allowed CPU and the child to the second.
    pub pin: bool,
    /// The parent sleeps this long before each timed ping (zero: not at all), so that the
    /// child's wait has gone to sleep and the ping's post wakes a sleeper.
    pub gap: Duration,
}

/// Untimed round trips first.
const WARM: usize = 16;

/// Child exit codes (what failed is also on its stderr).
const OPEN_FAILED: i32 = 2;
const PIN_FAILED: i32 = 3;
const WAIT_FAILED: i32 = 4;
const POST_FAILED: i32 = 5;

fn describe(e: Exit) -> String {
    match e {
        Exit::Code(OPEN_FAILED) => "child: opening its handles of the semaphores failed".into(),
        Exit::Code(PIN_FAILED) => "child: sched_setaffinity failed: cannot pin".into(),
        Exit::Code(WAIT_FAILED) => "child: its wait on ping failed".into(),
        Exit::Code(POST_FAILED) => "child: its post of pong failed".into(),
        other => format!("child: {other}"),
    }
}

/// How long a repetition may take: far more than it needs.
fn budget(iters: usize, gap: Duration) -> Duration {
    Duration::from_secs(30) + (Duration::from_micros(100) + gap) * iters as u32
}

/// How long one wait sleeps before it looks around.
const SLICE: Duration = Duration::from_millis(100);

/// A wait's bound, renewed each time a wait reaches it, until the repetition's deadline.
struct Slices {
    by: Bound,
    end: Instant,
}

impl Slices {
    fn new(end: Instant) -> Slices {
        Slices { by: Bound::after(SLICE), end }
    }

    /// After a wait timed out: `false` once past the deadline, else a fresh slice.
    fn renew(&mut self) -> bool {
        if Instant::now() >= self.end {
            return false;
        }
        self.by = Bound::after(SLICE);
        true
    }
}

/// Take one from `side`: `Ok` or the errno that ended it (`ETIMEDOUT`: past the deadline);
/// `between` runs at each slice's end (an error stops the wait).
#[inline]
fn take<S: Sems>(s: &S, side: Side, sl: &mut Slices, mut between: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    loop {
        match s.wait(side, &sl.by) {
            Ok(()) => return Ok(()),
            Err(libc::EINTR) => {}
            // semtimedop says EAGAIN when its timeout passes.
            Err(libc::ETIMEDOUT | libc::EAGAIN) => {
                between()?;
                if !sl.renew() {
                    return Err(io::Error::other(format!(
                        "wait on {side:?}: no post within {SLICE:?} slices until the deadline"
                    )));
                }
            }
            Err(e) => return Err(io::Error::other(format!("wait on {side:?}: {}", errno_name(e)))),
        }
    }
}

/// The child's side: `rounds` round trips on its own handles. Its exit code.
fn child_side<C: SemCompetitor>(
    c: &C,
    pair: &C::Pair,
    parent: C::Sems,
    cpu: Option<usize>,
    rounds: usize,
    end: Instant,
) -> i32 {
    if cpu.is_some_and(|cpu| sys::pin_to_cpu(cpu).is_err()) {
        return PIN_FAILED;
    }
    let sems = match c.open_in_child(pair, parent) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ufutex-bench: sem-pingpong child ({}): {e}", c.name());
            return OPEN_FAILED;
        }
    };
    let mut sl = Slices::new(end);
    for _ in 0..rounds {
        if let Err(e) = take(&sems, Side::Ping, &mut sl, || Ok(())) {
            eprintln!("ufutex-bench: sem-pingpong child ({}): {e}", c.name());
            return WAIT_FAILED;
        }
        if let Err(e) = sems.post(Side::Pong) {
            eprintln!("ufutex-bench: sem-pingpong child ({}): post pong: {}", c.name(), errno_name(e));
            return POST_FAILED;
        }
    }
    0
}

/// The child and how it ended, once seen.
struct Kid {
    child: Child,
    exit: Option<Exit>,
}

impl Kid {
    /// An error if it ended other than with status 0.
    fn check(&mut self) -> io::Result<()> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait()?;
        }
        match self.exit {
            None | Some(Exit::Code(0)) => Ok(()),
            Some(e) => Err(io::Error::other(describe(e))),
        }
    }

    fn finish(&mut self, deadline: Instant) -> io::Result<()> {
        let e = match self.exit {
            Some(e) => e,
            None => self.child.wait_until(deadline)?,
        };
        self.exit = Some(e);
        self.check()
    }
}

/// One round trip on the parent's side: post ping, wait for pong, looking at the child at
/// each slice's end.
#[inline]
fn round<S: Sems>(s: &S, sl: &mut Slices, kid: &mut Kid) -> io::Result<()> {
    post_ping(s)?;
    take_pong(s, sl, kid)
}

/// Wait for pong, looking at the child at each slice's end (and once more on an error).
#[inline]
fn take_pong<S: Sems>(s: &S, sl: &mut Slices, kid: &mut Kid) -> io::Result<()> {
    take(s, Side::Pong, sl, || kid.check()).inspect_err(|_| {
        let _ = kid.check();
    })
}

#[inline]
fn post_ping<S: Sems>(s: &S) -> io::Result<()> {
    s.post(Side::Ping).map_err(|e| io::Error::other(format!("post ping: {}", errno_name(e))))
}

/// The metrics: the round trip, and with a gap also the post that wakes the sleeping child.
fn metrics(gap: Duration) -> Vec<Metric> {
    let mut m = vec![Metric::lower("round trip", "ns")];
    if !gap.is_zero() {
        m.push(Metric::lower("post waking a sleeper", "ns"));
    }
    m
}

/// One repetition: ns per round trip (without the gaps), and with a gap, ns per post of ping.
pub fn once<C: SemCompetitor>(c: &C, p: Params) -> io::Result<Vec<f64>> {
    let cpus = sys::allowed_cpus();
    let deadline = Instant::now() + budget(p.iters, p.gap);
    let (mut pair, sems) = c.create().map_err(|e| io::Error::other(format!("{}: {e}", c.name())))?;
    let child_cpu = p.pin.then(|| cpus[1 % cpus.len()]);
    let rounds = WARM + p.iters;
    let child = child::fork(|| child_side(c, &pair, sems, child_cpu, rounds, deadline))?;
    let mut kid = Kid { child, exit: None };
    let measured = (|| {
        let _pinned = if p.pin { Some(sys::Pinned::to(cpus[0])?) } else { None };
        let mut sl = Slices::new(deadline);
        for _ in 0..WARM {
            round(&sems, &mut sl, &mut kid)?;
        }
        c.child_has_opened(&mut pair);
        let (mut trips, mut posts) = (Duration::ZERO, Duration::ZERO);
        if p.gap.is_zero() {
            let start = Instant::now();
            for _ in 0..p.iters {
                round(&sems, &mut sl, &mut kid)?;
            }
            trips = start.elapsed();
        } else {
            for _ in 0..p.iters {
                std::thread::sleep(p.gap);
                let start = Instant::now();
                post_ping(&sems)?;
                posts += start.elapsed();
                take_pong(&sems, &mut sl, &mut kid)?;
                trips += start.elapsed();
            }
        }
        kid.finish(deadline)?;
        io::Result::Ok((trips, posts))
    })();
    // The child is killed and reaped (if it still runs) before its semaphores are removed.
    drop(kid);
    drop(pair);
    let (trips, posts) = measured.map_err(|e| io::Error::other(format!("{}: semaphore ping-pong: {e}", c.name())))?;
    let per = |t: Duration| t.as_nanos() as f64 / p.iters as f64;
    Ok(if p.gap.is_zero() { vec![per(trips)] } else { vec![per(trips), per(posts)] })
}

pub fn run(common: &Common, p: Params) -> io::Result<Bench> {
    let comps =
        common.impls.iter().map(|n| AnySem::by_name(n).map_err(io::Error::other)).collect::<io::Result<Vec<_>>>()?;
    let cpus = sys::allowed_cpus();
    let placement = if p.pin {
        format!("pinned to CPUs {} and {}", cpus[0], cpus[1 % cpus.len()])
    } else {
        format!("unpinned on {} CPUs", sys::online_cpus())
    };
    let gap =
        if p.gap.is_zero() { String::new() } else { format!(", {} µs asleep before each ping", p.gap.as_micros()) };
    let plan = Plan {
        workload: "sem-pingpong",
        case: format!("{placement}, two processes, {} round trips{gap}", p.iters),
        metrics: metrics(p.gap),
        baseline: BASELINE,
    };
    let mut bench = common.scheduler().run(
        plan,
        &comps,
        |c| c.name().to_string(),
        AnySem::unsupported,
        |c| dispatch_sem!(c, c => once(c, p)),
    )?;
    bench.notes = vec![format!(
        "a fresh pair and a forked child per repetition, {WARM} untimed round trips first; every wait bounded, \
         in 100 ms slices (ufutex wait(Some(deadline)), sem_timedwait, semtimedop); ufutex-named: the child opens the namespace \
         by name, which is unlinked once it has; posix-sem: names unlinked at once, the child uses the \
         inherited sem_t mappings; sysv-semop: one IPC_PRIVATE set of two"
    )];
    if !p.gap.is_zero() {
        bench.notes.push(
            "with a gap: the parent sleeps before each ping (long past any spin, so the child's wait sleeps), then \
             times its post of ping alone (post waking a sleeper) and from that post to pong's arrival (round trip)"
                .into(),
        );
    }
    Ok(bench)
}
