//! Named objects across processes: create/open with semget's flags and errors and the "it
//! existed" answer, a semaphore and a raw word shared by two processes, removal while a waiter
//! of another process sleeps, a handle after its key was reused (racing the reuse:
//! `named_stale.rs`), many keys. One test runs every scenario in turn (it forks).
#![cfg(not(ufutex_loom))]

mod common;

use common::{child, deadline, dies_at, reap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use ufutex::named::{wait_any, Acquired, NamedError, Namespace, Open, Waitable};
use ufutex::shared::{self, SharedError};

const LONG: Duration = Duration::from_secs(20);

#[test]
fn named_objects_across_processes() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "4096");
    let ns = Namespace::open("tests").unwrap();
    // A process maps a namespace file once, however often it opens it.
    let mappings =
        || std::fs::read_to_string("/proc/self/maps").unwrap().lines().filter(|l| l.contains("ns-tests")).count();
    let before = mappings();
    let _again = Namespace::open("tests").unwrap();
    assert_eq!(mappings(), before);
    assert!(Namespace::open("bad/name").is_err());
    assert_eq!(Namespace::open("").unwrap_err(), NamedError::Invalid);

    flags_and_errors(&ns);
    a_semaphore_between_two_processes(&ns);
    a_raw_word_between_two_processes(&ns);
    raw_words_of_every_size(&ns);
    removal_wakes_a_waiter_of_another_process(&ns);
    a_handle_outlives_its_key_safely(&ns);
    many_keys(&ns);
    a_changer_killed_midway_is_taken_over(&ns);
    a_mutex_abandoned_by_a_dead_owner(&ns);
    mutex_recursion_and_ownership(&ns);
    events_manual_auto_and_pulse(&ns);
    waiting_on_any_of_many(&ns);
    waiting_on_words_of_every_size(&ns);
    the_inspection_tool(&ns);
    a_missing_directory();
    byte_string_names(&ns);
    assert!(ns.is_empty(), "every test removes what it made: {}", ns.len());
}

fn flags_and_errors(ns: &Namespace) {
    assert_eq!(ns.semaphore(1, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    let (a, existed) = ns.semaphore(1, Open::Create, 3).unwrap();
    assert!(!existed);
    assert_eq!(a.value(), Ok(3));
    let (b, existed) = ns.semaphore(1, Open::Create, 9).unwrap();
    assert!(existed, "Create on an existing key opens it (its count unchanged)");
    assert_eq!(b.value(), Ok(3));
    assert!(ns.semaphore(1, Open::Existing, 0).unwrap().1);
    assert_eq!(ns.semaphore(1, Open::CreateNew, 0).unwrap_err(), NamedError::Exists);
    assert_eq!(ns.word(1, Open::Create).unwrap_err(), NamedError::Invalid, "another kind");
    assert_eq!(ns.semaphore(2, Open::Create, u32::MAX).unwrap_err(), NamedError::Invalid);
    assert_eq!(a.post(u32::MAX).unwrap_err(), NamedError::Range);
    assert_eq!(NamedError::Exists.errno(), libc::EEXIST);
    ns.remove(1).unwrap();
    assert_eq!(ns.remove(1).unwrap_err(), NamedError::NotFound);
}

fn a_semaphore_between_two_processes(ns: &Namespace) {
    let (ping, _) = ns.semaphore(10, Open::CreateNew, 0).unwrap();
    let (pong, _) = ns.semaphore(11, Open::CreateNew, 0).unwrap();
    let pid = child(|| {
        // The child opens them by key, takes two from ping, and posts one to pong.
        let ns = Namespace::open("tests").unwrap();
        let (ping, existed) = ns.semaphore(10, Open::Existing, 0).unwrap();
        let (pong, _) = ns.semaphore(11, Open::Existing, 0).unwrap();
        if !existed {
            return 1;
        }
        for _ in 0..2 {
            if ping.wait(deadline(LONG)).is_err() {
                return 2;
            }
        }
        pong.post(1).map_or(3, |()| 0)
    });
    ping.post(1).unwrap();
    std::thread::sleep(Duration::from_millis(10)); // often asleep by now: the second post wakes it
    ping.post(1).unwrap();
    pong.wait(deadline(LONG)).unwrap();
    assert_eq!(reap(pid), 0);
    assert_eq!(ping.value(), Ok(0));
    assert_eq!(pong.wait(deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut));
    ns.remove(10).unwrap();
    ns.remove(11).unwrap();
}

fn a_raw_word_between_two_processes(ns: &Namespace) {
    let (w, _) = ns.word(20, Open::CreateNew).unwrap();
    let pid = child(|| {
        let ns = Namespace::open("tests").unwrap();
        let (w, _) = ns.word(20, Open::Existing).unwrap();
        let word = w.get().unwrap();
        while word.load(Ordering::Acquire) == 0 {
            match shared::wait(word, 0, deadline(LONG)) {
                Ok(()) | Err(SharedError::WouldBlock) => {}
                Err(_) => return 1,
            }
        }
        0
    });
    let word = w.get().unwrap();
    let t = Instant::now();
    while shared::requeue(word, 0, word, 0, 1) != Ok(1) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    word.store(1, Ordering::Release);
    assert_eq!(shared::wake(word, 1), Ok(1));
    assert_eq!(reap(pid), 0);
    ns.remove(20).unwrap();
    assert_eq!(w.get().unwrap_err(), NamedError::Removed);
}

/// Raw words of 8, 16 and 64 bits: a size is part of the kind; a waiter in another process is
/// woken by a change at that size; a removal marks all ones at that size and wakes its waiter.
fn raw_words_of_every_size(ns: &Namespace) {
    macro_rules! one_size {
        ($atomic:ty, $key:expr, $max:expr) => {{
            let (w, existed) = ns.word_of::<$atomic>($key, Open::CreateNew).unwrap();
            assert!(!existed);
            assert_eq!(w.get().unwrap().load(Ordering::Relaxed), 0, "a new word holds 0");
            assert_eq!(ns.word($key, Open::Existing).unwrap_err(), NamedError::Invalid, "another size");
            assert_eq!(ns.word_of::<$atomic>($key, Open::Create).map(|(_, e)| e), Ok(true));
            // A change and a wake at this size reach a waiter of another process.
            let pid = child(|| {
                let ns = Namespace::open("tests").unwrap();
                let (w, _) = ns.word_of::<$atomic>($key, Open::Existing).unwrap();
                let word = w.get().unwrap();
                while word.load(Ordering::Acquire) == 0 {
                    if shared::wait(word, 0, deadline(LONG)).is_err_and(|e| e != SharedError::WouldBlock) {
                        return 1;
                    }
                }
                // Then sleep on 1 until the word is removed under us: all ones, and woken.
                while word.load(Ordering::Acquire) == 1 {
                    if shared::wait(word, 1, deadline(LONG)).is_err_and(|e| e != SharedError::WouldBlock) {
                        return 2;
                    }
                }
                if word.load(Ordering::Acquire) == $max {
                    0
                } else {
                    3
                }
            });
            let word = w.get().unwrap();
            let t = Instant::now();
            while !asleep(pid) {
                assert!(t.elapsed() < LONG, "the child never slept");
                std::thread::sleep(Duration::from_millis(1));
            }
            word.store(1, Ordering::Release);
            shared::wake(word, 1).unwrap();
            let t = Instant::now();
            while !asleep(pid) || shared::requeue(word, 1, word, 0, 1) != Ok(1) {
                assert!(t.elapsed() < LONG, "the child never slept on 1");
                std::thread::sleep(Duration::from_millis(1));
            }
            ns.remove($key).unwrap();
            assert_eq!(reap(pid), 0, "the waiter saw all ones at its size");
            assert_eq!(w.get().unwrap_err(), NamedError::Removed);
        }};
    }
    one_size!(std::sync::atomic::AtomicU8, 21, u8::MAX);
    one_size!(std::sync::atomic::AtomicU16, 22, u16::MAX);
    one_size!(std::sync::atomic::AtomicU64, 23, u64::MAX);
}

fn removal_wakes_a_waiter_of_another_process(ns: &Namespace) {
    let (sem, _) = ns.semaphore(30, Open::CreateNew, 0).unwrap();
    let pid = child(|| {
        let ns = Namespace::open("tests").unwrap();
        let (s, _) = ns.semaphore(30, Open::Existing, 0).unwrap();
        match s.wait(deadline(LONG)) {
            Err(NamedError::Removed) => 0,
            other => 10 + other.is_ok() as i32,
        }
    });
    // Wait until the child sleeps (its state in /proc), then remove the semaphore under it.
    // (Removed before it slept, it sees the removal at once: the same answer.)
    let t = Instant::now();
    while !asleep(pid) {
        assert!(t.elapsed() < LONG, "the child never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    ns.remove(30).unwrap();
    assert_eq!(reap(pid), 0, "the waiter saw the removal");
    assert_eq!(sem.post(1).unwrap_err(), NamedError::Removed);
}

/// Whether process `pid` is asleep ('S' in /proc/PID/stat).
fn asleep(pid: libc::pid_t) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('S'))
}

fn a_handle_outlives_its_key_safely(ns: &Namespace) {
    let (old, _) = ns.semaphore(40, Open::CreateNew, 5).unwrap();
    ns.remove(40).unwrap();
    let (new, existed) = ns.semaphore(40, Open::CreateNew, 7).unwrap();
    assert!(!existed);
    assert_eq!(old.value().unwrap_err(), NamedError::Removed, "the old handle does not see the new object");
    assert_eq!(old.post(1).unwrap_err(), NamedError::Removed);
    assert_eq!(new.value(), Ok(7));
    ns.remove(40).unwrap();
}

fn many_keys(ns: &Namespace) {
    for k in 1000..2000u64 {
        ns.semaphore(k, Open::CreateNew, (k % 7) as u32).unwrap();
    }
    assert_eq!(ns.len(), 1000);
    for k in 1000..2000u64 {
        let (s, existed) = ns.semaphore(k, Open::Existing, 0).unwrap();
        assert!(existed);
        assert_eq!(s.value(), Ok((k % 7) as u32));
    }
    // Lookups from four threads at once.
    std::thread::scope(|sc| {
        for t in 0..4u64 {
            sc.spawn(move || {
                for i in 0..1000u64 {
                    let k = 1000 + (i * 7 + t) % 1000;
                    assert!(ns.semaphore(k, Open::Existing, 0).is_ok());
                }
            });
        }
    });
    for k in 1000..2000u64 {
        ns.remove(k).unwrap();
    }
}

fn a_changer_killed_midway_is_taken_over(ns: &Namespace) {
    // A creator dies with the slot half made, holding the namespace's lock: the next creator
    // takes the lock over, buries the half-made slot, and creates the object afresh.
    dies_at("creating", || {
        let ns = Namespace::open("tests").unwrap();
        ns.semaphore(50, Open::CreateNew, 4).map_or(1, |_| 0)
    });
    assert_eq!(ns.semaphore(50, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    let (s, existed) = ns.semaphore(50, Open::Create, 2).unwrap();
    assert!(!existed);
    assert_eq!(s.value(), Ok(2));
    ns.remove(50).unwrap();

    // A remover dies after marking the object removed, before waking its waiter (another
    // process): the next changer of the namespace finishes the removal and the waiter wakes.
    let (sem, _) = ns.semaphore(51, Open::CreateNew, 0).unwrap();
    let waiter = child(|| {
        let ns = Namespace::open("tests").unwrap();
        let (s, _) = ns.semaphore(51, Open::Existing, 0).unwrap();
        match s.wait(deadline(LONG)) {
            Err(NamedError::Removed) => 0,
            _ => 1,
        }
    });
    let t = Instant::now();
    while !asleep(waiter) {
        assert!(t.elapsed() < LONG, "the waiter never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    dies_at("removing", || {
        let ns = Namespace::open("tests").unwrap();
        ns.remove(51).map_or(1, |()| 0)
    });
    assert_eq!(sem.value().unwrap_err(), NamedError::Removed, "the removal stands");
    // Any change takes the lock over and finishes the dead remover's job.
    ns.semaphore(52, Open::CreateNew, 0).unwrap();
    assert_eq!(reap(waiter), 0, "the waiter was woken and saw the removal");
    ns.remove(52).unwrap();
}

fn a_mutex_abandoned_by_a_dead_owner(ns: &Namespace) {
    let (m, existed) = ns.mutex(60, Open::CreateNew).unwrap();
    assert!(!existed);
    let held = common::shared_word();
    let owner = child(move || {
        let ns = Namespace::open("tests").unwrap();
        let (m, _) = ns.mutex(60, Open::Existing).unwrap();
        if m.lock(deadline(LONG)) != Ok(Acquired::Acquired) {
            return 1;
        }
        held.store(1, Ordering::SeqCst);
        loop {
            std::thread::sleep(Duration::from_secs(1)); // killed holding it
        }
    });
    common::await_value(held, 1);
    assert_eq!(m.try_lock(), Ok(None), "held by a live owner");
    // SAFETY: our own child.
    unsafe { libc::kill(owner, libc::SIGKILL) };
    assert_eq!(reap(owner), -libc::SIGKILL);
    assert_eq!(m.lock(deadline(LONG)), Ok(Acquired::Abandoned), "EOWNERDEAD to the next acquirer");
    m.unlock().unwrap();
    assert_eq!(m.lock(deadline(LONG)), Ok(Acquired::Acquired));
    m.unlock().unwrap();
    // A waiter of another process gets it when the owner releases it.
    m.lock(None).unwrap();
    let got = common::shared_word();
    let waiter = child(move || {
        let ns = Namespace::open("tests").unwrap();
        let (m, _) = ns.mutex(60, Open::Existing).unwrap();
        let r = m.lock(deadline(LONG));
        got.store(1, Ordering::SeqCst);
        match r {
            Ok(Acquired::Acquired) => m.unlock().map_or(2, |()| 0),
            _ => 1,
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(got.load(Ordering::SeqCst), 0, "it waits while we hold it");
    m.unlock().unwrap();
    assert_eq!(reap(waiter), 0);
    ns.remove(60).unwrap();
    assert_eq!(m.lock(None).unwrap_err(), NamedError::Removed);
}

fn mutex_recursion_and_ownership(ns: &Namespace) {
    let (m, _) = ns.mutex(61, Open::CreateNew).unwrap();
    assert_eq!(m.unlock().unwrap_err(), NamedError::NotOwner);
    assert_eq!(m.lock(None), Ok(Acquired::Acquired));
    assert_eq!(m.lock(None), Ok(Acquired::Acquired), "recursive");
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(m.unlock().unwrap_err(), NamedError::NotOwner, "another thread");
            assert_eq!(m.try_lock(), Ok(None));
        });
    });
    m.unlock().unwrap();
    m.unlock().unwrap();
    assert_eq!(m.unlock().unwrap_err(), NamedError::NotOwner);
    assert_eq!(m.try_lock(), Ok(Some(Acquired::Acquired)));
    m.unlock().unwrap();
    assert_eq!(ns.semaphore(61, Open::Existing, 0).unwrap_err(), NamedError::Invalid, "another kind");
    ns.remove(61).unwrap();
}

fn events_manual_auto_and_pulse(ns: &Namespace) {
    let through = common::shared_word();
    let waiters = |key: u64, n: usize| -> Vec<libc::pid_t> {
        (0..n)
            .map(|_| {
                child(move || {
                    let ns = Namespace::open("tests").unwrap();
                    let (e, _) = ns.event(key, Open::Existing, false, false).unwrap();
                    let r = e.wait(deadline(LONG));
                    through.fetch_add(1, Ordering::SeqCst);
                    r.map_or(1, |()| 0)
                })
            })
            .collect()
    };
    // Manual reset: one set releases everyone, and stays set.
    let (e, _) = ns.event(70, Open::CreateNew, true, false).unwrap();
    let pids = waiters(70, 2);
    std::thread::sleep(Duration::from_millis(20));
    e.set().unwrap();
    common::await_value(through, 2);
    for p in pids {
        assert_eq!(reap(p), 0);
    }
    assert_eq!(e.wait(deadline(Duration::ZERO)), Ok(()), "still set");
    e.reset().unwrap();
    assert_eq!(e.wait(deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut));
    // Pulse: releases the waiters there are, and leaves it unsignaled.
    through.store(0, Ordering::SeqCst);
    let pids = waiters(70, 2);
    let t = Instant::now();
    while pids.iter().any(|&p| !asleep(p)) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20)); // asleep in the wait, not before it
    e.pulse().unwrap();
    common::await_value(through, 2);
    for p in pids {
        assert_eq!(reap(p), 0);
    }
    assert_eq!(e.wait(deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut));
    ns.remove(70).unwrap();
    // Auto reset: each set releases one waiter, which takes the signal.
    through.store(0, Ordering::SeqCst);
    let (a, _) = ns.event(71, Open::CreateNew, false, false).unwrap();
    let pids = waiters(71, 2);
    std::thread::sleep(Duration::from_millis(20));
    a.set().unwrap();
    common::await_value(through, 1);
    a.set().unwrap();
    common::await_value(through, 2);
    for p in pids {
        assert_eq!(reap(p), 0);
    }
    assert_eq!(a.wait(deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut), "taken");
    ns.remove(71).unwrap();
}

fn waiting_on_any_of_many(ns: &Namespace) {
    let (sem, _) = ns.semaphore(80, Open::CreateNew, 0).unwrap();
    let (ev, _) = ns.event(81, Open::CreateNew, false, false).unwrap();
    let (m, _) = ns.mutex(82, Open::CreateNew).unwrap();
    let (w, _) = ns.word(83, Open::CreateNew).unwrap();
    // The mutex is held by another process until it is told to let go.
    let go = common::shared_word();
    let holder = child(move || {
        let ns = Namespace::open("tests").unwrap();
        let (m, _) = ns.mutex(82, Open::Existing).unwrap();
        m.lock(None).unwrap();
        go.store(1, Ordering::SeqCst);
        while go.load(Ordering::SeqCst) != 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        m.unlock().map_or(1, |()| 0)
    });
    common::await_value(go, 1);
    let all = [Waitable::Semaphore(&sem), Waitable::Event(&ev), Waitable::Mutex(&m), Waitable::Word(&w, 0)];
    assert_eq!(
        wait_any(&all, deadline(Duration::ZERO)).unwrap_err(),
        NamedError::Shared(SharedError::TimedOut),
        "nothing ready"
    );
    // Another process sets the (auto) event: index 1, and its signal is taken.
    let setter = child(|| {
        std::thread::sleep(Duration::from_millis(10));
        let ns = Namespace::open("tests").unwrap();
        ns.event(81, Open::Existing, false, false).unwrap().0.set().map_or(1, |()| 0)
    });
    assert_eq!(wait_any(&all, deadline(LONG)), Ok(1));
    assert_eq!(reap(setter), 0);
    assert_eq!(ev.wait(deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut));
    // The holder lets go of the mutex: index 2, and we hold it.
    go.store(2, Ordering::SeqCst);
    assert_eq!(wait_any(&all, deadline(LONG)), Ok(2));
    assert_eq!(reap(holder), 0);
    m.unlock().unwrap();
    // A post is taken before a later-indexed ready word: the lowest ready index wins.
    let rest = [Waitable::Semaphore(&sem), Waitable::Event(&ev), Waitable::Word(&w, 0)];
    w.get().unwrap().store(5, Ordering::SeqCst);
    sem.post(1).unwrap();
    assert_eq!(wait_any(&rest, deadline(LONG)), Ok(0));
    assert_eq!(sem.value(), Ok(0));
    assert_eq!(wait_any(&rest, deadline(LONG)), Ok(2), "the raw word changed");
    for k in 80..84 {
        ns.remove(k).unwrap();
    }
    assert_eq!(wait_any(&all, None).unwrap_err(), NamedError::Removed);
}

/// `wait_any` over raw words of 8, 16, 32 and 64 bits: another process changes the 64-bit
/// one's upper half only (a 32-bit look would miss it) and wakes it.
fn waiting_on_words_of_every_size(ns: &Namespace) {
    use std::sync::atomic::{AtomicU16, AtomicU64, AtomicU8};
    let (w8, _) = ns.word_of::<AtomicU8>(90, Open::CreateNew).unwrap();
    let (w16, _) = ns.word_of::<AtomicU16>(91, Open::CreateNew).unwrap();
    let (w32, _) = ns.word(92, Open::CreateNew).unwrap();
    let (w64, _) = ns.word_of::<AtomicU64>(93, Open::CreateNew).unwrap();
    let all = [Waitable::Word8(&w8, 0), Waitable::Word16(&w16, 0), Waitable::Word(&w32, 0), Waitable::Word64(&w64, 0)];
    assert_eq!(wait_any(&all, deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut));
    let pid = child(|| {
        std::thread::sleep(Duration::from_millis(10));
        let ns = Namespace::open("tests").unwrap();
        let (w, _) = ns.word_of::<AtomicU64>(93, Open::Existing).unwrap();
        let w = w.get().unwrap();
        w.store(1 << 40, Ordering::SeqCst);
        shared::wake(w, 1).map_or(1, |_| 0)
    });
    assert_eq!(wait_any(&all, deadline(LONG)), Ok(3));
    assert_eq!(reap(pid), 0);
    // A live word holding all ones at its size is a value like any other, not a removal.
    w8.get().unwrap().store(u8::MAX, Ordering::SeqCst);
    assert_eq!(wait_any(&all[..1], None), Ok(0));
    let ones = [Waitable::Word8(&w8, u8::MAX)];
    assert_eq!(wait_any(&ones, deadline(Duration::ZERO)).unwrap_err(), NamedError::Shared(SharedError::TimedOut));
    for k in 90..94 {
        ns.remove(k).unwrap();
    }
    assert_eq!(wait_any(&all[..1], None).unwrap_err(), NamedError::Removed);
}

fn the_inspection_tool(ns: &Namespace) {
    let (_s, _) = ns.semaphore(0xabc, Open::CreateNew, 3).unwrap();
    let (m, _) = ns.mutex(0xabd, Open::CreateNew).unwrap();
    m.lock(None).unwrap();
    let tool = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ufutex-named")).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, all) = tool(&[]);
    assert_eq!(code, Some(0));
    assert!(all.contains("tests\t2 objects"), "{all}");
    let (code, list) = tool(&["list", "tests"]);
    assert_eq!(code, Some(0));
    assert!(list.contains("0xabc\tSemaphore") && list.contains("count 3"), "{list}");
    assert!(list.contains("0xabd\tMutex") && list.contains("held by process slot"), "{list}");
    assert_eq!(tool(&["remove", "tests", "0xabc"]).0, Some(0));
    assert_eq!(tool(&["remove", "tests", "0xabc"]).0, Some(1), "already removed");
    assert_eq!(tool(&["bogus"]).0, Some(2));
    let (code, help) = tool(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(help.starts_with("usage: ufutex-named") && help.contains("remove NAMESPACE KEY"), "{help}");
    // Looking at a namespace that does not exist fails, and does not create it.
    let absent = format!("tests-absent-{}", std::process::id());
    for args in [&["list", absent.as_str()][..], &["remove", absent.as_str(), "1"], &["reap", absent.as_str()]] {
        assert_eq!(tool(args).0, Some(1), "{args:?}");
    }
    assert!(!Namespace::list().unwrap().contains(&absent));
    // A user directory that does not exist holds no namespace, and says why one cannot be made.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ufutex-named"))
        .args(["list", "tests"])
        .env("UFUTEX_SHARED_DIR", format!("/nonexistent-{}/dir", std::process::id()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("no namespace \"tests\""), "{err}");
    m.unlock().unwrap();
    ns.remove(0xabd).unwrap();
    assert_eq!(ns.objects(), vec![]);
}

fn a_missing_directory() {
    // A child, so that the environment of this process stays as it is.
    let pid = child(|| {
        std::env::set_var("UFUTEX_SHARED_DIR", format!("/nonexistent-{}/dir", std::process::id()));
        let listed = Namespace::list();
        let opened = Namespace::open("elsewhere").map(|_| ());
        let errno = opened.map_err(|e| e.errno());
        match (listed, opened, errno) {
            (Ok(l), Err(NamedError::Shared(SharedError::NoMemory)), Err(libc::ENOMEM)) if l.is_empty() => 0,
            other => {
                eprintln!("{other:?}");
                1
            }
        }
    });
    assert_eq!(reap(pid), 0, "no namespace listed; opening one fails ENOMEM, as the header says");
}

fn byte_string_names(ns: &Namespace) {
    let (s, existed) = ns.semaphore("jobs", Open::CreateNew, 0).unwrap();
    assert!(!existed);
    assert_eq!(ns.semaphore("jobs", Open::CreateNew, 0).unwrap_err(), NamedError::Exists);
    assert_eq!(ns.semaphore("job", Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    assert_eq!(ns.event(&b"jobs"[..], Open::Create, false, false).unwrap_err(), NamedError::Invalid, "another kind");
    let long = "x".repeat(ufutex::named::NAME_MAX + 1);
    assert_eq!(ns.semaphore(long.as_str(), Open::Create, 0).unwrap_err(), NamedError::NameTooLong);
    let pid = child(|| {
        let ns = Namespace::open("tests").unwrap();
        match ns.semaphore("jobs", Open::Existing, 0) {
            Ok((s, true)) => s.post(2).map_or(2, |()| 0),
            _ => 1,
        }
    });
    assert_eq!(reap(pid), 0);
    assert_eq!(s.value(), Ok(2));
    let listed = ns.objects();
    assert!(listed.iter().any(|o| o.name.as_deref() == Some(&b"jobs"[..])), "{listed:?}");
    ns.remove("jobs").unwrap();
    assert_eq!(s.value().unwrap_err(), NamedError::Removed);
}
