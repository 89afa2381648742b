//! Handles racing the removal of their object and a new object made under the same key, in the
//! same slot: an operation that checked its handle just before the removal must fail
//! (`Removed`), never change the new object — another semaphore, event or mutex, or a raw word —
//! and a waiter must return `Removed`, never sleep on the new object.
//! Rounds go on for `UFUTEX_STRESS_SECS` (2 s when unset; CI's stress step runs longer), at
//! least 300, in namespaces made fresh every 100 rounds, so that most first objects are their
//! slot's generation 0 (a raw word's upper half is 0 too).
#![cfg(not(ufutex_loom))]

mod common;

use common::stress_secs;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use ufutex::named::{wait_any, Acquired, NamedError, Namespace, Open, Waitable};
use ufutex::shared::SharedError;

#[test]
fn stale_handles_never_change_a_new_object() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "4096");
    let end = Instant::now() + Duration::from_secs(stress_secs());
    let mut rounds = 0u64;
    for batch in 0.. {
        if rounds >= 300 && Instant::now() >= end {
            break;
        }
        let name = format!("stale-{batch}");
        let ns = Namespace::open(&name).unwrap();
        for i in 0..100 {
            remade_as_the_same_kinds(&ns);
            remade_as_raw_words(&ns, 1000 + 2 * i);
            a_waiter_sees_the_removal_not_the_new_object(&ns);
        }
        rounds += 100;
        assert!(ns.is_empty(), "every round removes what it made: {}", ns.len());
        // (The process keeps the namespace mapped: files of 4096 slots, a few per second.)
        Namespace::unlink(&name).unwrap();
    }
}

/// Threads post, signal and lock through handles to objects that this thread removes and makes
/// again under the same keys meanwhile. Each new semaphore and event is made unsignaled at 0
/// and nobody posts to it through its own handle: it must stay so, and the new mutex free.
fn remade_as_the_same_kinds(ns: &Namespace) {
    let (sem_key, ev_key, m_key) = (41, 42, 43);
    let (sem, _) = ns.semaphore(sem_key, Open::CreateNew, 0).unwrap();
    let (ev, _) = ns.event(ev_key, Open::CreateNew, true, false).unwrap();
    let (m, _) = ns.mutex(m_key, Open::CreateNew).unwrap();
    let (new_sem, new_ev, new_m) = std::thread::scope(|s| {
        let poster = s.spawn(|| while sem.post(1).is_ok() {});
        let setter = s.spawn(|| while ev.set().is_ok() {});
        // Takes and releases until the handle fails; a take of the removed mutex is let go by
        // the unlock that answers Removed.
        let locker = s.spawn(|| loop {
            match m.try_lock() {
                Ok(Some(_)) => {
                    let _ = m.unlock();
                }
                Ok(None) => {}
                Err(_) => break,
            }
        });
        std::thread::yield_now();
        ns.remove(sem_key).unwrap();
        ns.remove(ev_key).unwrap();
        ns.remove(m_key).unwrap();
        let made = (
            ns.semaphore(sem_key, Open::CreateNew, 0).unwrap().0,
            ns.event(ev_key, Open::CreateNew, true, false).unwrap().0,
            ns.mutex(m_key, Open::CreateNew).unwrap().0,
        );
        poster.join().unwrap();
        setter.join().unwrap();
        locker.join().unwrap();
        made
    });
    assert_eq!(new_sem.value(), Ok(0), "a stale post landed on the new semaphore");
    assert_eq!(new_ev.wait(Some(Duration::ZERO.into())), Err(NamedError::Shared(SharedError::TimedOut)));
    assert_eq!(new_m.try_lock(), Ok(Some(Acquired::Acquired)), "a stale take kept the new mutex");
    new_m.unlock().unwrap();
    for key in [sem_key, ev_key, m_key] {
        ns.remove(key).unwrap();
    }
}

/// A semaphore and an event, each posted or set through its handle while this thread removes it
/// and makes a raw word under its key: the raw words stay 0.
fn remade_as_raw_words(ns: &Namespace, key: u64) {
    let (sem_key, ev_key) = (key, key + 1);
    let (sem, _) = ns.semaphore(sem_key, Open::CreateNew, 0).unwrap();
    let (ev, _) = ns.event(ev_key, Open::CreateNew, false, false).unwrap();
    let words = std::thread::scope(|s| {
        let poster = s.spawn(|| while sem.post(1).is_ok() {});
        let setter = s.spawn(|| while ev.set().is_ok() {});
        std::thread::yield_now();
        ns.remove(sem_key).unwrap();
        ns.remove(ev_key).unwrap();
        let words = (ns.word(sem_key, Open::CreateNew).unwrap().0, ns.word(ev_key, Open::CreateNew).unwrap().0);
        poster.join().unwrap();
        setter.join().unwrap();
        words
    });
    assert_eq!(words.0.get().unwrap().load(Ordering::SeqCst), 0, "a stale post landed on a raw word");
    assert_eq!(words.1.get().unwrap().load(Ordering::SeqCst), 0, "a stale set landed on a raw word");
    ns.remove(sem_key).unwrap();
    ns.remove(ev_key).unwrap();
}

/// A thread waits on a semaphore, one on an event (unsignaled, count 0) and one on a second
/// semaphore through `wait_any`, while this thread removes the three and makes them again,
/// unsignaled at 0: each waiter returns `Removed` — whether it slept before the removal (which
/// wakes it) or came to sleep after the new object was made (its sleep must not take the new
/// object for its own, which nobody posts to). (`wait_any` in `UFUTEX_SHARED=kernel` mode
/// sleeps on 32-bit words and cannot tell: there it is not asked.)
fn a_waiter_sees_the_removal_not_the_new_object(ns: &Namespace) {
    const LONG: Duration = Duration::from_secs(20);
    let (sem_key, ev_key, any_key) = (51, 52, 53);
    let any_too = std::env::var("UFUTEX_SHARED").map_or(true, |m| m != "kernel");
    let (sem, _) = ns.semaphore(sem_key, Open::CreateNew, 0).unwrap();
    let (ev, _) = ns.event(ev_key, Open::CreateNew, true, false).unwrap();
    let (other, _) = ns.semaphore(any_key, Open::CreateNew, 0).unwrap();
    let got = std::thread::scope(|s| {
        let (sem, ev, other) = (&sem, &ev, &other);
        let sem_waiter = s.spawn(move || sem.wait(Some(LONG.into())));
        let ev_waiter = s.spawn(move || ev.wait(Some(LONG.into())));
        let any_waiter = s.spawn(move || any_too.then(|| wait_any(&[Waitable::Semaphore(other)], Some(LONG.into()))));
        std::thread::yield_now();
        for key in [sem_key, ev_key, any_key] {
            ns.remove(key).unwrap();
        }
        ns.semaphore(sem_key, Open::CreateNew, 0).unwrap();
        ns.event(ev_key, Open::CreateNew, true, false).unwrap();
        ns.semaphore(any_key, Open::CreateNew, 0).unwrap();
        (sem_waiter.join().unwrap(), ev_waiter.join().unwrap(), any_waiter.join().unwrap())
    });
    assert_eq!(got.0, Err(NamedError::Removed), "a semaphore's waiter slept on its successor");
    assert_eq!(got.1, Err(NamedError::Removed), "an event's waiter slept on its successor");
    if let Some(any) = got.2 {
        assert_eq!(any, Err(NamedError::Removed), "a wait_any slept on its object's successor");
    }
    for key in [sem_key, ev_key, any_key] {
        ns.remove(key).unwrap();
    }
}
