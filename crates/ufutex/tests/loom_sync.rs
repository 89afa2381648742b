//! Loom models of the handoff mutex and the requeueing condvar.
//!
//! Run: `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex
//! --test loom_sync -- --test-threads=1` (one test at a time: each model sets the process-wide
//! starvation policy it needs before it starts).
//!
//! Each model builds its own `Domain` (the default domain is a static, which loom cannot reset
//! between executions). Under loom a park blocks the model thread until its unpark arrives
//! (`parker/loom_model.rs`), so a lost wakeup shows up as a deadlock, which loom reports.
#![cfg(ufutex_loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use ufutex::sync::{set_starvation_policy, Condvar, RawMutex, Starvation};
use ufutex::{Domain, DomainConfig, Slots};

fn domain() -> Arc<Domain> {
    let d = Arc::new(Domain::new(DomainConfig::new().slots(Slots::Fixed(2))).expect("domain"));
    // Work around a core modelling gap: the domain's thread counter is created lazily inside a
    // std `OnceLock` by the first thread that waits, and loom cannot see the OnceLock's
    // synchronisation, so a second waiting thread's first use of the counter is reported as a
    // causality violation. One timed wait here (under loom it times out at once; a deadline not
    // yet passed, or it would time out before it registers) creates the counter before any
    // model thread exists.
    let w = loom::sync::atomic::AtomicU32::new(0);
    let _ = d.wait(&w, 0, Some(std::time::Duration::from_secs(1).into()));
    d
}

/// Shared state of the mutex models: the lock, a counter only touched under it (loom flags a
/// racy access), and the number of threads inside the critical section.
struct Guarded {
    m: RawMutex,
    count: UnsafeCell<usize>,
    inside: AtomicUsize,
}

impl Guarded {
    fn new() -> Arc<Guarded> {
        Arc::new(Guarded { m: RawMutex::new(), count: UnsafeCell::new(0), inside: AtomicUsize::new(0) })
    }

    /// The critical section: exactly one owner, and a non-atomic increment.
    fn critical(&self) {
        assert_eq!(self.inside.fetch_add(1, Ordering::Relaxed), 0, "two owners at once");
        // SAFETY: only ever called with `m` held; loom checks that claim.
        self.count.with_mut(|c| unsafe { *c += 1 });
        self.inside.fetch_sub(1, Ordering::Relaxed);
    }

    fn count(&self) -> usize {
        // SAFETY: called after every other thread was joined.
        self.count.with(|c| unsafe { *c })
    }

    /// Lock, run the critical section, unlock.
    fn locked(&self, d: &Domain) {
        self.m.lock_in(d);
        self.critical();
        self.m.unlock_in(d);
    }
}

/// A thread that runs [`Guarded::locked`] once.
fn spawn_locker(d: &Arc<Domain>, g: &Arc<Guarded>) -> thread::JoinHandle<()> {
    let (d, g) = (d.clone(), g.clone());
    thread::spawn(move || g.locked(&d))
}

/// What one thread of a model runs, given the guarded state and the domain.
type Part = fn(&Guarded, &Domain);

/// The shape most models share: the main thread holds the lock while `others` start, each on
/// a thread of its own; then it runs its critical section, unlocks, runs `then`, and joins
/// them. The guarded state, for the model's assertions.
fn from_held(others: &[Part], then: Part) -> Arc<Guarded> {
    let d = domain();
    let g = Guarded::new();
    g.m.lock_in(&d);
    let threads: Vec<_> = others
        .iter()
        .map(|&part| {
            let (d, g) = (d.clone(), g.clone());
            thread::spawn(move || part(&g, &d))
        })
        .collect();
    g.critical();
    g.m.unlock_in(&d);
    then(&g, &d);
    for t in threads {
        t.join().unwrap();
    }
    g
}

/// Two threads lock and unlock: never two owners, and no increment is lost.
#[test]
fn mutual_exclusion() {
    set_starvation_policy(None);
    loom::model(|| {
        let d = domain();
        let g = Guarded::new();
        let t = spawn_locker(&d, &g);
        g.locked(&d);
        t.join().unwrap();
        assert_eq!(g.count(), 2);
        assert!(!g.m.is_locked_in());
    });
}

/// A thread that parks behind the owner is woken by the owner's unlock (the run finishes),
/// including when the owner unlocks while the waiter is between setting PARKED and queueing.
/// Two waiters: the unlock re-setting PARKED when its wake saw the other still queued (5b), and
/// the baton rule (a woken thread re-sets PARKED), keep the second one reachable.
#[test]
fn no_lost_wakeup_on_unlock() {
    set_starvation_policy(Some(Starvation::Never));
    loom::model(|| {
        let g = from_held(&[Guarded::locked, Guarded::locked], |_, _| {});
        assert_eq!(g.count(), 3);
        assert!(!g.m.is_locked_in());
    });
}

/// The mode decays and contention comes back: the waiter parks behind the owner (the mode
/// becomes `CONTENDED`), takes the lock and unlocks (nobody registered: back to `QUIET`), then
/// both lock again, now through quiet unlocks and a fresh announcement. No lost wakeup, never
/// two owners, every increment kept.
#[test]
fn decay_then_contention_again() {
    set_starvation_policy(Some(Starvation::Never));
    loom::model(|| {
        let twice: Part = |g, d| {
            g.locked(d);
            g.locked(d);
        };
        let g = from_held(&[twice], Guarded::locked);
        assert_eq!(g.count(), 4);
        assert!(!g.m.is_locked_in());
    });
}

/// With a zero threshold a contended waiter asks for a handoff at once. The owner's unlock
/// hands the lock over: the requester ends up the owner exactly once, a third thread gets it
/// once at most (`third` runs it), and the lock ends free.
fn handoff_with_a_third(third: Part, at_least: usize) {
    handoff_with_a_third_in(loom::model::Builder::new(), third, at_least);
}

/// [`handoff_with_a_third`] under the model settings `model`.
fn handoff_with_a_third_in(model: loom::model::Builder, third: Part, at_least: usize) {
    set_starvation_policy(Some(Starvation::Wakeups(0)));
    model.check(move || {
        let g = from_held(&[Guarded::locked, third], |_, _| {});
        assert!(g.count() >= at_least);
        assert!(!g.m.is_locked_in());
    });
    set_starvation_policy(None);
}

/// A third thread's try_lock cannot take the lock from the requester in between.
#[test]
fn handoff_transfers_ownership_exactly_once() {
    handoff_with_a_third(
        |g, d| {
            if g.m.try_lock_in() {
                g.critical();
                g.m.unlock_in(d);
            }
        },
        2,
    );
}

/// The unlock releases first and grants after (a handoff in flight): a blocking locker that
/// arrives in between must not take the lock from the requester, which takes it itself or is
/// granted it. Everyone gets the lock once.
#[test]
fn handoff_in_flight_with_a_blocking_locker() {
    handoff_with_a_third(Guarded::locked, 3);
}

/// [`handoff_in_flight_with_a_blocking_locker`] at three preemptions, where an earlier owner's
/// repair can wake the parked waiter while the owner of the moment sits between its look at
/// the state and its quiet store; the woken waiter asks for a handoff and the store erases the
/// request. The repair's wake of the requester and the right to request in the mode byte
/// (`raw_mutex.rs`, "Requests and the quiet store") bring it back: before them this deadlocked.
#[test]
fn handoff_in_flight_at_three_preemptions() {
    // At least 3, as `raw_mutex.rs`'s decay model keeps at least 4: a larger
    // LOOM_MAX_PREEMPTIONS still applies.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(model.preemption_bound.map_or(3, |b| b.max(3)));
    handoff_with_a_third_in(model, Guarded::locked, 3);
}

/// A requester whose deadline fires races the granting unlock: either it withdrew first (and
/// the unlock released normally) or the grant won and the timed lock reports success — never
/// a lock left held by nobody, never two owners.
#[test]
fn handoff_races_a_timeout() {
    set_starvation_policy(Some(Starvation::Wakeups(0)));
    loom::model(|| {
        let timed_requester: Part = |g, d| {
            // Under loom a timed park gives up at a point loom chooses.
            if g.m.try_lock_for_in(d, std::time::Duration::from_secs(1)) {
                g.critical();
                g.m.unlock_in(d);
            }
        };
        let g = from_held(&[timed_requester], |_, _| {});
        assert!(!g.m.is_locked_in(), "a handoff to a departed waiter leaves the lock held");
    });
    set_starvation_policy(None);
}

/// A timed lock whose deadline has passed racing an owner's unlock and a blocking locker: it
/// takes the lock only if it finds it free (one more try, no spin, no mark), everyone else
/// still gets through, never two owners, and the lock ends free.
#[test]
fn a_passed_deadline_races_an_unlock() {
    set_starvation_policy(None);
    loom::model(|| {
        let late: Part = |g, d| {
            if g.m.try_lock_for_in(d, std::time::Duration::ZERO) {
                g.critical();
                g.m.unlock_in(d);
            }
        };
        let g = from_held(&[late, |g, d| g.locked(d)], |_, _| {});
        assert!(g.count() >= 2, "the owner and the blocking locker");
        assert!(!g.m.is_locked_in());
    });
}

/// Two condvar waiters and a notify_all under the mutex: one is woken, the other requeued onto
/// the mutex word; both get the mutex back and see the flag — no waiter left on either word.
#[test]
fn condvar_requeue() {
    set_starvation_policy(Some(Starvation::Never));
    loom::model(|| {
        let d = domain();
        let s = Arc::new((RawMutex::new(), Condvar::new(), UnsafeCell::new(false)));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let (d, s) = (d.clone(), s.clone());
                thread::spawn(move || {
                    let (m, cv, flag) = &*s;
                    m.lock_in(&d);
                    // SAFETY: `flag` is only touched with `m` held.
                    while !flag.with(|f| unsafe { *f }) {
                        cv.wait_in(&d, m, None);
                    }
                    m.unlock_in(&d);
                })
            })
            .collect();
        let (m, cv, flag) = &*s;
        m.lock_in(&d);
        // SAFETY: as above.
        flag.with_mut(|f| unsafe { *f = true });
        cv.notify_all_in(&d);
        m.unlock_in(&d);
        for w in waiters {
            w.join().unwrap();
        }
        assert!(!m.is_locked_in());
        assert_eq!(d.queued_waiters(), 0);
    });
}
