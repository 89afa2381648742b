//! A forked child starts with none of the parent's waiters, as with the kernel's futex, and
//! with every bucket lock free (`fork.rs`): a wake in the child reaches the child's own waiter
//! and counts it, never a parent's thread that the child does not have; and forks taken while
//! other threads wait, wake, requeue and resize leave the child nothing held.
#![cfg(not(ufutex_loom))]

mod common;

use common::{
    await_queued, await_until, child, default_domain_lock, fixed, raw_child, reap, stress_secs, watchdog, StopOnDrop,
};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ufutex::{Domain, Slots, WaitError};

/// In the child: one thread waits on `w` (for 0) in `d`, is seen queued, and one wake takes
/// exactly it. Nothing of the parent's is queued before or after. The child's exit status: 0
/// when every check held, else the number of the check that failed.
fn one_waiter_round(d: &'static Domain, w: &'static AtomicU32) -> i32 {
    if d.queued_waiters() != 0 {
        return 1;
    }
    let returned = Arc::new(AtomicBool::new(false));
    let r = returned.clone();
    let t = std::thread::spawn(move || {
        let res = d.wait(w, 0, None);
        r.store(true, Ordering::SeqCst);
        res
    });
    await_queued(d, 1);
    if d.wake(w, 1) != 1 {
        return 2;
    }
    if !matches!(t.join(), Ok(Ok(()))) || !returned.load(Ordering::SeqCst) {
        return 3;
    }
    if d.queued_waiters() != 0 || d.homed_waiters() != 0 || d.counted_waiters() != 0 {
        return 4;
    }
    0
}

/// [`one_waiter_round`] on `w` in the default domain (failures 1-4), then on `v` in `own`
/// (11-14).
fn rounds_in_both(own: &'static Domain, w: &'static AtomicU32, v: &'static AtomicU32) -> i32 {
    match one_waiter_round(Domain::default_domain(), w) {
        0 => match one_waiter_round(own, v) {
            0 => 0,
            failed => 10 + failed,
        },
        failed => failed,
    }
}

fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

/// A fork test's parent: the default domain to this test, a domain of its own (`own`, two
/// buckets) and 80 sleepers, half on `w` in the default domain and half on `v` in `own`, each
/// waiting until its word is set.
struct Sleepers {
    own: &'static Domain,
    w: &'static AtomicU32,
    v: &'static AtomicU32,
    threads: Vec<std::thread::JoinHandle<()>>,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Sleepers {
    fn start() -> Sleepers {
        let _serial = default_domain_lock();
        let (default, own) = (Domain::default_domain(), leak(fixed(2)));
        let (w, v): (&'static AtomicU32, &'static AtomicU32) = (leak(AtomicU32::new(0)), leak(AtomicU32::new(0)));
        let threads = (0..80)
            .map(|i| {
                let (d, word) = if i % 2 == 0 { (default, w) } else { (own, v) };
                std::thread::spawn(move || {
                    while word.load(Ordering::Acquire) == 0 {
                        let _ = d.wait(word, 0, None);
                    }
                })
            })
            .collect();
        await_queued(default, 40);
        await_queued(own, 40);
        Sleepers { own, w, v, threads, _serial }
    }

    /// The sleepers are where they were after the forks, and all wake.
    fn wake(self) {
        let (default, own) = (Domain::default_domain(), self.own);
        assert_eq!((default.queued_waiters(), own.queued_waiters()), (40, 40));
        self.w.store(1, Ordering::Release);
        self.v.store(1, Ordering::Release);
        assert_eq!(default.wake(self.w, usize::MAX), 40);
        assert_eq!(own.wake(self.v, usize::MAX), 40);
        for t in self.threads {
            t.join().expect("a sleeper");
        }
    }
}

/// The first call of a child made without our fork handlers.
#[derive(Debug, Clone, Copy)]
enum First {
    Wait,
    /// Two threads of the child's, started together, wait at once: either may make the start.
    TwoWaits,
    Wake,
    Requeue,
    Query,
}

/// `first` in the child, on the parent's words `w` (default domain) and `v` (`own`): 0 if it
/// found none of the parent's waiters, as the kernel's futex would, else the failed check.
fn first_call(
    first: First,
    own: &'static Domain,
    w: &'static AtomicU32,
    v: &'static AtomicU32,
    spare: &'static AtomicU32,
) -> i32 {
    let default = Domain::default_domain();
    let (a, b) = match first {
        // A thread of the child's waits on `w`: a wake of all then counts it alone. The wait
        // comes before anything else of the child's is asked, as far as a pause can order it:
        // the wait itself must make the start, or the start made later forgets it.
        First::Wait => {
            let go = Arc::new(std::sync::Barrier::new(2));
            let g = go.clone();
            let t = std::thread::spawn(move || {
                g.wait();
                default.wait(w, 0, common::deadline(Duration::from_secs(10)))
            });
            go.wait();
            std::thread::sleep(Duration::from_millis(20));
            let (mut woken, start) = (0, Instant::now());
            while woken == 0 && start.elapsed() < Duration::from_secs(5) {
                woken = default.wake(w, usize::MAX);
                std::thread::sleep(Duration::from_millis(1));
            }
            let returned = matches!(t.join(), Ok(Ok(())));
            (usize::from(woken != 1 || !returned), own.wake(v, usize::MAX))
        }
        First::TwoWaits => {
            let go = Arc::new(std::sync::Barrier::new(2));
            let ts: Vec<_> = (0..2)
                .map(|_| {
                    let go = go.clone();
                    std::thread::spawn(move || {
                        go.wait();
                        default.wait(w, 0, None)
                    })
                })
                .collect();
            await_queued(default, 2);
            let woken = default.wake(w, usize::MAX);
            let returned = ts.into_iter().all(|t| matches!(t.join(), Ok(Ok(()))));
            (usize::from(woken != 2 || !returned), own.wake(v, usize::MAX))
        }
        First::Wake => (default.wake(w, usize::MAX), own.wake(v, usize::MAX)),
        // Each onto a word of the child's own; nobody to move.
        First::Requeue => (
            default.requeue(w, 0, spare, 0, usize::MAX).unwrap_or(usize::MAX),
            own.requeue(v, 0, spare, 0, usize::MAX).unwrap_or(usize::MAX),
        ),
        First::Query => (default.queued_waiters(), own.queued_waiters()),
    };
    match (a, b) {
        (0, 0) => 0,
        (0, _) => 22,
        _ => 21,
    }
}

/// A child made without our fork handlers (`_Fork`) is told by the fork mark: whichever call
/// it makes first — a wait (by one thread or two at once), a wake, a requeue or a query — finds
/// none of the parent's waiters, and its own waiters are woken and counted as in any child.
#[test]
fn a_child_made_without_the_handlers_has_none_of_the_parents_waiters() {
    watchdog();
    let sleepers = Sleepers::start();
    let (own, w, v) = (sleepers.own, sleepers.w, sleepers.v);
    let spare: &'static AtomicU32 = leak(AtomicU32::new(0));
    for first in [First::Wait, First::TwoWaits, First::Wake, First::Requeue, First::Query] {
        let pid = raw_child(|| match first_call(first, own, w, v, spare) {
            0 => rounds_in_both(own, w, v),
            failed => failed,
        });
        assert_eq!(
            reap(pid),
            0,
            "{first:?} first; the child's checks (21-22: its first call; 1-4: default domain, 11-14: its own)"
        );
    }
    sleepers.wake();
}

#[test]
fn a_child_has_none_of_the_parents_waiters() {
    watchdog();
    // More sleepers than one ring word has slots, on the default domain and on one of our own.
    let sleepers = Sleepers::start();
    let (own, w, v) = (sleepers.own, sleepers.w, sleepers.v);
    // The child's own waiters wait on the words the parent's do.
    let pid = child(|| rounds_in_both(own, w, v));
    assert_eq!(reap(pid), 0, "the child's checks (1-4: default domain, 11-14: its own)");
    sleepers.wake();
}

#[test]
fn forks_amid_waits_wakes_requeues_and_resizes_leave_the_child_nothing_held() {
    watchdog();
    let _serial = default_domain_lock();
    let default = Domain::default_domain();
    let own = leak(fixed(2));
    let words: &'static [AtomicU32; 4] = leak([const { AtomicU32::new(0) }; 4]);
    let stop = leak(AtomicBool::new(false));
    let _stop = StopOnDrop(stop);
    let rounds = leak(AtomicUsize::new(0));
    let mut busy = Vec::new();
    for (i, d) in [default, own, default, own].into_iter().enumerate() {
        // A waiter that gives up after a moment, a waker, and a requeuer from its word to the
        // next, on each domain: bucket locks are taken and released all the time.
        let w = &words[i];
        let next = &words[(i + 1) % 4];
        busy.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = d.wait(w, 0, Some(Duration::from_micros(200).into()));
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        }));
        busy.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                d.wake(w, 1);
                let _ = d.requeue(w, 0, next, 0, 1);
                std::thread::yield_now();
            }
        }));
    }
    // Live resizes of our own domain: every waiter there moves, table after table.
    busy.push(std::thread::spawn(move || {
        let mut n = 2;
        while !stop.load(Ordering::Relaxed) {
            n = if n == 64 { 2 } else { n * 2 };
            own.set_slots(Slots::Fixed(n)).expect("a resize");
        }
    }));
    await_until("the busy threads are going", || rounds.load(Ordering::Relaxed) > 100);

    let (fresh, other): (&'static AtomicU32, &'static AtomicU32) = (leak(AtomicU32::new(0)), leak(AtomicU32::new(0)));
    let forks = 30 * stress_secs().max(1);
    let start = Instant::now();
    for i in 0..forks {
        let pid = child(|| {
            // Every word the busy threads used: a wake and a requeue go through (no lock is
            // held), and find nobody.
            for (k, d) in [default, own].into_iter().enumerate() {
                for w in words {
                    if d.wake(w, usize::MAX) != 0 || d.requeue(w, 0, other, 0, usize::MAX) != Ok(0) {
                        return 20 + k as i32;
                    }
                }
                // A resize in the child (the domain's state lock is free too).
                if k == 1 && own.set_slots(Slots::Fixed(4)).is_err() {
                    return 30;
                }
            }
            rounds_in_both(own, fresh, fresh)
        });
        assert_eq!(reap(pid), 0, "fork {i}: the child's checks failed (see the codes in the test)");
    }
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().expect("a busy thread");
    }
    eprintln!("{forks} forks amid the traffic in {:?}", start.elapsed());
}

/// The checks of a child made without our fork handlers (`_Fork`) while threads of the parent
/// may have held the gate, none of which allocates: glibc's locks stay in the child as they were
/// at the fork, malloc's among them, so such a child makes only async-signal-safe calls (waits
/// and wakes are). The exit status: 100, plus 1 if `own` is lost and 2 if the default domain
/// is (`gate.rs`); else the number of the failed check. A child that has not ended 10 s after
/// the fork is hung (SIGALRM, -14).
fn unprepared_child(own: &Domain, w: &AtomicU32, v: &AtomicU32, fresh: &AtomicU32) -> i32 {
    // SAFETY: ends a child that hangs (the default action of SIGALRM).
    unsafe { libc::alarm(10) };
    let default = Domain::default_domain();
    // None of the parent's waiters is left, and every count is at its base.
    for (d, word) in [(default, w), (own, v)] {
        if d.wake(word, usize::MAX) != 0 || d.queued_waiters() != 0 || d.counted_waiters() != 0 {
            return 21;
        }
    }
    // Too big a size is ENOMEM where the domain can resize (before any allocation), and
    // ENOTRECOVERABLE where it is lost, which then reads `Fixed` at its size.
    let lost = |d: &Domain| match d.set_slots(Slots::Fixed(1 << 21)).map_err(|e| e.raw_os_error()) {
        Err(Some(libc::ENOMEM)) => Some(false),
        Err(Some(libc::ENOTRECOVERABLE)) => (d.policy() == Slots::Fixed(d.slots())).then_some(true),
        _ => None,
    };
    let (Some(own_lost), Some(default_lost)) = (lost(own), lost(default)) else {
        return 22;
    };
    // A wait in each domain: one on a value the word does not hold, one that queues and times out.
    for d in [default, own] {
        let timed = d.wait(fresh, 0, Some(Duration::from_millis(1).into()));
        if !matches!(d.wait(fresh, 1, None), Err(WaitError::WouldBlock)) || !matches!(timed, Err(WaitError::TimedOut)) {
            return 23;
        }
        if d.queued_waiters() != 0 || d.counted_waiters() != 0 || d.homed_waiters() != 0 {
            return 24;
        }
    }
    100 + i32::from(own_lost) + 2 * i32::from(default_lost)
}

/// A child made without our fork handlers while other threads held the gate — making, querying
/// and dropping domains, querying the default one, resizing one with waiters in it (every
/// waiter moves) — takes the gate over (`gate.rs`). Its first call goes on; the parent's waiters
/// are forgotten in every table, a migration left half done included; the domain whose state
/// the lost thread held (ours, or the default one) keeps its tables as they are and refuses to
/// resize (`ENOTRECOVERABLE`); waits work in every domain ([`unprepared_child`]).
#[test]
fn a_child_made_without_the_handlers_while_the_gate_is_held_goes_on() {
    watchdog();
    let sleepers = Sleepers::start();
    let (own, w, v) = (sleepers.own, sleepers.w, sleepers.v);
    let stop: &'static AtomicBool = leak(AtomicBool::new(false));
    let _stop = StopOnDrop(stop);
    let busy = [
        // A domain made, queried and dropped: the gate taken three times.
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::hint::black_box(fixed(2).slots());
            }
        }),
        // The default domain queried (its state lock taken under the gate).
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::hint::black_box(Domain::default_domain().policy());
            }
        }),
        // Our own domain resized back and forth with the parent's 40 sleepers in it.
        std::thread::spawn(move || {
            let mut n = 2;
            while !stop.load(Ordering::Relaxed) {
                n = if n == 64 { 2 } else { n * 2 };
                own.set_slots(Slots::Fixed(n)).expect("a resize");
            }
        }),
    ];
    let fresh: &'static AtomicU32 = leak(AtomicU32::new(0));
    let (forks, mut lost) = (100 * stress_secs().max(1), [0; 2]);
    for fork in 0..forks {
        match reap(raw_child(|| unprepared_child(own, w, v, fresh))) {
            status @ 100..=103 => {
                lost[0] += status & 1;
                lost[1] += (status >> 1) & 1;
            }
            status => panic!("fork {fork}: the child's check {status} failed (see unprepared_child)"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in busy {
        t.join().expect("a busy thread");
    }
    eprintln!("{forks} forks without the handlers; our own domain was lost in {}, the default in {}", lost[0], lost[1]);
    sleepers.wake();
}

/// As above, with the gate held by another thread's fork through the handlers (whose prepare
/// handler takes it): the child takes the gate over and loses no domain.
#[test]
fn a_child_made_without_the_handlers_during_a_fork_with_them_goes_on() {
    watchdog();
    let sleepers = Sleepers::start();
    let (own, w, v) = (sleepers.own, sleepers.w, sleepers.v);
    let stop: &'static AtomicBool = leak(AtomicBool::new(false));
    let _stop = StopOnDrop(stop);
    let forker = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            assert_eq!(reap(child(|| 0)), 0);
        }
    });
    let fresh: &'static AtomicU32 = leak(AtomicU32::new(0));
    for fork in 0..100 * stress_secs().max(1) {
        let status = reap(raw_child(|| unprepared_child(own, w, v, fresh)));
        assert_eq!(status, 100, "fork {fork}: the child's check failed, or a domain was lost (see unprepared_child)");
    }
    stop.store(true, Ordering::Relaxed);
    forker.join().expect("the forking thread");
    sleepers.wake();
}
