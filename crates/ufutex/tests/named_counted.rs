//! Counted named objects (reference-counted lifetime): an object lives while some process
//! holds a handle and dies with the last one, whether dropped or lost with its process
//! (SIGKILL); a changer killed half-way through taking or giving back a reference is finished
//! by the next; a forked child's inherited handles hold nothing, and a child forked while
//! another thread counts does not wait for that thread; random kills of holders leave
//! no object behind and every holder count right. One test runs the scenarios in turn (forks).
//!
//! `UFUTEX_STRESS_SECS` sets how long the killing goes on (default 2 s), and the forks while a
//! thread counts (50 for each second).
#![cfg(not(ufutex_loom))]

mod common;

use common::{child, dies_at, reap, Rng};
use std::sync::atomic::Ordering;
use std::time::Duration;
use ufutex::named::{Kind, NamedError, Namespace, Open};

const LONG: Duration = Duration::from_secs(20);
const NS: &str = "counted";

#[test]
fn counted_objects() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "256");
    let ns = Namespace::open(NS).unwrap();
    dies_with_the_last_handle(&ns);
    counted_and_plain_are_different_kinds(&ns);
    held_by_another_process(&ns);
    a_killed_holder_gives_its_reference_back(&ns);
    killed_while_taking_or_giving_back(&ns);
    a_forked_child_holds_nothing(&ns);
    a_fork_while_a_thread_counts(&ns);
    random_kills_leave_nothing_held(&ns);
    assert!(ns.is_empty(), "every scenario leaves the namespace empty: {:?}", ns.objects());
}

/// The holder count the namespace shows for `key`'s object, if it lives.
fn holders(ns: &Namespace, key: u64) -> Option<u32> {
    ns.objects().into_iter().find(|o| o.key == key).and_then(|o| o.holders)
}

fn dies_with_the_last_handle(ns: &Namespace) {
    let (sem, existed) = ns.counted().semaphore(1, Open::CreateNew, 2).unwrap();
    assert!(!existed);
    assert_eq!(holders(ns, 1), Some(1));
    // A second open and a clone in the same process: more handles, one holder.
    let (again, existed) = ns.counted().semaphore(1, Open::Create, 9).unwrap();
    assert!(existed);
    assert_eq!(again.value(), Ok(2), "an existing object keeps its count");
    assert_eq!(
        ns.counted().semaphore(1, Open::CreateNew, 0).unwrap_err(),
        NamedError::Exists,
        "exclusive create of a held object"
    );
    let third = sem.clone();
    assert_eq!(holders(ns, 1), Some(1));
    let plain = *sem; // a copy of the handle inside: it does not hold the object
    drop(sem);
    drop(again);
    assert!(third.try_wait().unwrap(), "alive while a handle is");
    drop(third);
    assert_eq!(holders(ns, 1), None);
    assert_eq!(ns.counted().semaphore(1, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    assert_eq!(plain.value(), Err(NamedError::Removed), "the object died with its last handle");
    // The key is free again; `close` reports what a drop ignores.
    let (ev, existed) = ns.counted().event(1, Open::Create, true, false).unwrap();
    assert!(!existed);
    ev.close().unwrap();
    assert_eq!(ns.len(), 0);
    // Removing now works on a counted object too; its handles then fail and let go quietly.
    let (m, _) = ns.counted().mutex(2, Open::Create).unwrap();
    ns.remove(2u64).unwrap();
    assert_eq!(m.try_lock(), Err(NamedError::Removed));
    drop(m);
    let (w, _) = ns.counted().word_of::<std::sync::atomic::AtomicU64>(3, Open::Create).unwrap();
    w.get().unwrap().store(u64::MAX - 1, Ordering::Relaxed);
    drop(w);
    assert_eq!(ns.len(), 0);
}

fn counted_and_plain_are_different_kinds(ns: &Namespace) {
    let (s, _) = ns.semaphore(10, Open::CreateNew, 0).unwrap();
    assert_eq!(ns.counted().semaphore(10, Open::Create, 0).unwrap_err(), NamedError::Invalid);
    let (c, _) = ns.counted().semaphore(11, Open::CreateNew, 0).unwrap();
    assert_eq!(ns.semaphore(11, Open::Create, 0).unwrap_err(), NamedError::Invalid);
    assert_eq!(ns.counted().mutex(11, Open::Create).unwrap_err(), NamedError::Invalid);
    let kinds: Vec<(u64, Kind, Option<u32>)> = ns.objects().iter().map(|o| (o.key, o.kind, o.holders)).collect();
    assert!(kinds.contains(&(10, Kind::Semaphore, None)));
    assert!(kinds.contains(&(11, Kind::Semaphore, Some(1))));
    drop(c);
    ns.remove(10u64).unwrap();
    assert_eq!(s.value(), Err(NamedError::Removed));
    assert_eq!(ns.len(), 0);
}

fn held_by_another_process(ns: &Namespace) {
    let (ev, _) = ns.counted().event("shared-event", Open::CreateNew, true, false).unwrap();
    let step = common::shared_word();
    let holder = child(|| {
        let ns = Namespace::open(NS).unwrap();
        let Ok((ev, true)) = ns.counted().event("shared-event", Open::Existing, true, false) else { return 1 };
        step.store(1, Ordering::SeqCst);
        // Alive after the creator let go: wait for its signal, then let go ourselves.
        if ev.wait(common::deadline(LONG)).is_err() {
            return 2;
        }
        drop(ev);
        0
    });
    common::await_value(step, 1);
    let plain = *ev;
    drop(ev);
    assert_eq!(holders(ns, ufutex_name_key("shared-event", ns)), Some(1), "the child holds it");
    plain.set().unwrap();
    assert_eq!(reap(holder), 0);
    assert_eq!(plain.set(), Err(NamedError::Removed), "died with the other process's last handle");
    assert_eq!(ns.len(), 0);
}

/// The key a named object shows in [`Namespace::objects`].
fn ufutex_name_key(name: &str, ns: &Namespace) -> u64 {
    ns.objects().iter().find(|o| o.name.as_deref() == Some(name.as_bytes())).map_or(0, |o| o.key)
}

fn a_killed_holder_gives_its_reference_back(ns: &Namespace) {
    let step = common::shared_word();
    let holder = child(|| {
        let ns = Namespace::open(NS).unwrap();
        let Ok((_sem, false)) = ns.counted().semaphore(20, Open::CreateNew, 0) else { return 1 };
        let Ok((_m, false)) = ns.counted().mutex(21, Open::CreateNew) else { return 1 };
        step.store(1, Ordering::SeqCst);
        std::thread::sleep(LONG); // killed here, holding both
        2
    });
    common::await_value(step, 1);
    let (m, _) = ns.counted().mutex(21, Open::Existing).unwrap();
    assert_eq!(holders(ns, 21), Some(2));
    // SAFETY: our own child.
    unsafe { libc::kill(holder, libc::SIGKILL) };
    assert_eq!(reap(holder), -libc::SIGKILL);
    // Its references come back when a process opens the namespace (or on `reap`).
    let _reopened = Namespace::open(NS).unwrap();
    assert_eq!(ns.counted().semaphore(20, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    assert_eq!(holders(ns, 21), Some(1), "the one we hold stays, with one holder");
    assert_eq!(ns.reap(), Ok(0), "nothing left to reap");
    drop(m);
    assert_eq!(ns.len(), 0);
}

fn killed_while_taking_or_giving_back(ns: &Namespace) {
    // Killed creating a counted object, with its reference recorded: the next changer finishes
    // or undoes it, and the dead process's reference goes back with its ledger.
    for (point, n) in [("creating", 1), ("holding", 1), ("releasing", 1), ("releasing", 2), ("removing", 1)] {
        let (keep, _) = ns.counted().semaphore(30, Open::Create, 5).unwrap();
        dies_at(&format!("{point}:{n}"), || {
            let ns = Namespace::open(NS).unwrap();
            // holding:1 dies taking 30 (it exists), creating:1 making 31 (its reference
            // recorded); releasing:1 dies giving 31 back, removing:1 in 31's removal (its last
            // holder), releasing:2 giving 30 back.
            let Ok((a, _)) = ns.counted().semaphore(30, Open::Existing, 0) else { return 1 };
            let Ok((b, _)) = ns.counted().semaphore(31, Open::Create, 0) else { return 1 };
            drop(b);
            drop(a);
            3
        });
        // Any change takes the lock over and finishes the dead changer's; opening the namespace
        // reaps its ledger.
        let _reopened = Namespace::open(NS).unwrap();
        ns.reap().unwrap();
        assert_eq!(holders(ns, 30), Some(1), "after a death at {point}:{n}: only we hold 30");
        assert_eq!(holders(ns, 31), None, "after a death at {point}:{n}: 31 died with its holder");
        assert_eq!(ns.len(), 1);
        drop(keep);
        assert_eq!(ns.len(), 0);
    }
}

fn a_forked_child_holds_nothing(ns: &Namespace) {
    let (sem, _) = ns.counted().semaphore(40, Open::CreateNew, 1).unwrap();
    let mut sem = Some(sem);
    let kid = child(|| {
        // The inherited handle works, but dropping it gives back nothing of the parent's.
        let Some(sem) = sem.take() else { return 3 };
        let ok = sem.value() == Ok(1);
        drop(sem);
        let ns = Namespace::open(NS).unwrap();
        let Ok((mine, true)) = ns.counted().semaphore(40, Open::Existing, 0) else { return 1 };
        let held = ns.objects().iter().find(|o| o.key == 40).and_then(|o| o.holders);
        drop(mine);
        if ok && held == Some(2) {
            0
        } else {
            2
        }
    });
    assert_eq!(reap(kid), 0);
    assert_eq!(holders(ns, 40), Some(1), "the parent still holds it");
    drop(sem);
    assert_eq!(ns.len(), 0);
}

/// A child forked while another thread of the parent opens and lets go of counted objects
/// (the parent's books of them, `counted.rs`, may be in the middle of a change) opens and lets
/// go of its own, and exits: it does not wait for the parent's thread, which it does not have.
/// With the books under std `Mutex`es, most children hung.
fn a_fork_while_a_thread_counts(ns: &Namespace) {
    let forks = 50 * common::stress_secs().max(1);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let counter = s.spawn(|| {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (a, _) = ns.counted().semaphore(50, Open::Create, 0).unwrap();
                let b = a.clone();
                drop(a);
                drop(b);
                rounds += 1;
            }
            rounds
        });
        let mut rng = Rng::new(0xf0_5c);
        for i in 0..forks {
            std::thread::sleep(Duration::from_micros(rng.below(200)));
            let kid = child(|| {
                let Ok((mine, _)) = ns.counted().semaphore(51, Open::Create, 0) else { return 1 };
                let held = holders(ns, 51);
                drop(mine);
                if held == Some(1) && holders(ns, 51).is_none() {
                    0
                } else {
                    2
                }
            });
            let status = common::reap_within(kid, Duration::from_secs(10));
            if status != Some(0) {
                stop.store(true, Ordering::Relaxed);
                panic!("child {i} of {forks}: {status:?} (None: hung)");
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(counter.join().unwrap() > 0);
    });
    ns.reap().unwrap();
    assert_eq!(holders(ns, 50), None);
    assert_eq!(holders(ns, 51), None);
}

/// Workers open and let go of counted objects under 12 keys at random (holding up to 4 at a
/// time) while they are killed at random; afterwards, with every worker dead and reaped, no
/// counted object is left, and while they ran the holders never exceeded the workers.
fn random_kills_leave_nothing_held(ns: &Namespace) {
    const WORKERS: usize = 3;
    fn worker() -> i32 {
        let Ok(ns) = Namespace::open(NS) else { return 3 };
        // SAFETY: getpid has no arguments.
        let mut r = Rng::new(u64::from(unsafe { libc::getpid() } as u32));
        let mut held = Vec::new();
        loop {
            let key = 100 + r.below(12);
            if held.len() >= 4 || (r.below(2) == 0 && !held.is_empty()) {
                let i = r.below(held.len() as u64) as usize;
                held.swap_remove(i);
                continue;
            }
            match ns.counted().semaphore(key, Open::Create, 0) {
                Ok((s, _)) => {
                    let _ = s.post(1);
                    held.push(s);
                }
                Err(NamedError::Full) => return 4,
                Err(_) => return 2,
            }
        }
    }
    let secs = common::stress_secs() as f64;
    let mut workers: Vec<libc::pid_t> = (0..WORKERS).map(|_| child(worker)).collect();
    // After each kill, before the next worker starts: every live counted object has a holder
    // (a dead worker's references count until its ledger is reaped).
    let kills = common::kill_at_random(&mut workers, secs, 0x5eed, || {
        for o in ns.objects() {
            assert!(o.holders.unwrap_or(0) >= 1, "a live counted object with no holder: {o:?}");
        }
        child(worker)
    });
    eprintln!("{kills} kills");
    ns.reap().unwrap();
    assert_eq!(ns.objects(), vec![], "objects left after every holder died");
    assert_eq!(ns.len(), 0);
}
