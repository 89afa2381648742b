//! A named mutex whose owner thread ends holding it is abandoned (NT's `WAIT_ABANDONED`): the
//! next locker — another thread, or another process — takes it with `Acquired::Abandoned`,
//! once, whatever the depth it was held at; a sleeping locker is woken for it. What a thread
//! released is not abandoned; a mutex removed while held leaves the next object of its key (in
//! the same slot) alone; a forked child neither owns nor abandons its parent's mutexes. A
//! bounded stress: every acquisition is exclusive and every abandonment is reported exactly
//! once. One test runs every scenario in turn (some fork).
#![cfg(not(ufutex_loom))]

mod common;

use common::{child, deadline, reap, Rng};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use ufutex::named::{Acquired, Mutex, NamedError, Namespace, Open};

const LONG: Duration = Duration::from_secs(20);

#[test]
fn a_thread_that_ends_holding_a_named_mutex_abandons_it() {
    common::watchdog();
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "4096");
    let name = format!("thread-exit-{}", std::process::id());
    let ns = Namespace::open(&name).unwrap();

    ending_holding_it_abandons_it(&ns);
    a_recursive_holder_abandons_it_once(&ns);
    what_a_thread_released_is_not_abandoned(&ns);
    every_mutex_a_thread_holds_is_abandoned(&ns);
    a_sleeping_locker_is_woken_with_abandoned(&ns);
    a_removed_mutex_leaves_the_next_object_of_its_key_alone(&ns);
    a_thread_of_another_process_ends_holding_it(&ns, &name);
    a_forked_child_neither_owns_nor_abandons_its_parents_mutex(&ns);
    stress_exclusive_and_each_abandonment_reported_once(&ns);

    assert!(ns.is_empty(), "every scenario removes what it made: {}", ns.len());
    Namespace::unlink(&name).unwrap();
}

/// Run `f` on a new thread and wait until the thread has ended (its destructors ran).
fn on_a_thread_that_ends<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

fn ending_holding_it_abandons_it(ns: &Namespace) {
    let (m, _) = ns.mutex(1, Open::CreateNew).unwrap();
    assert_eq!(on_a_thread_that_ends(|| m.lock(None)), Ok(Acquired::Acquired));
    let shown = ns.objects().into_iter().find(|o| o.key == 1).unwrap();
    assert!(shown.abandoned && shown.owner.is_none(), "the inspection says so: {shown:?}");
    assert_eq!(m.lock(deadline(LONG)), Ok(Acquired::Abandoned), "the next locker is told");
    let shown = ns.objects().into_iter().find(|o| o.key == 1).unwrap();
    assert!(!shown.abandoned && shown.owner.is_some(), "held again: {shown:?}");
    m.unlock().unwrap();
    assert_eq!(m.lock(deadline(LONG)), Ok(Acquired::Acquired), "once: then it is a normal mutex");
    m.unlock().unwrap();
    // The same through try_lock, on both sides.
    assert_eq!(on_a_thread_that_ends(|| m.try_lock()), Ok(Some(Acquired::Acquired)));
    assert_eq!(on_a_thread_that_ends(|| m.try_lock()), Ok(Some(Acquired::Abandoned)), "another thread");
    assert_eq!(m.try_lock(), Ok(Some(Acquired::Abandoned)), "that thread ended holding it too");
    assert_eq!(m.try_lock(), Ok(Some(Acquired::Acquired)), "recursion, not abandonment");
    m.unlock().unwrap();
    m.unlock().unwrap();
    assert_eq!(m.unlock().unwrap_err(), NamedError::NotOwner);
    ns.remove(1).unwrap();
}

fn a_recursive_holder_abandons_it_once(ns: &Namespace) {
    let (m, _) = ns.mutex(2, Open::CreateNew).unwrap();
    on_a_thread_that_ends(|| {
        for _ in 0..3 {
            assert_eq!(m.lock(None), Ok(Acquired::Acquired));
        }
    });
    assert_eq!(m.lock(deadline(LONG)), Ok(Acquired::Abandoned));
    // Held once by us now, not three times.
    m.unlock().unwrap();
    assert_eq!(m.unlock().unwrap_err(), NamedError::NotOwner);
    assert_eq!(
        on_a_thread_that_ends(|| m.try_lock().and_then(|a| m.unlock().map(|()| a))),
        Ok(Some(Acquired::Acquired))
    );
    ns.remove(2).unwrap();
}

fn what_a_thread_released_is_not_abandoned(ns: &Namespace) {
    let (a, _) = ns.mutex(3, Open::CreateNew).unwrap();
    let (b, _) = ns.mutex(4, Open::CreateNew).unwrap();
    on_a_thread_that_ends(|| {
        a.lock(None).unwrap();
        a.lock(None).unwrap();
        a.unlock().unwrap();
        a.unlock().unwrap();
        b.lock(None).unwrap();
        b.unlock().unwrap();
        b.lock(None).unwrap(); // held at the end: only this one
    });
    assert_eq!(a.try_lock(), Ok(Some(Acquired::Acquired)), "released before the thread ended");
    assert_eq!(b.try_lock(), Ok(Some(Acquired::Abandoned)));
    a.unlock().unwrap();
    b.unlock().unwrap();
    assert_eq!(
        on_a_thread_that_ends(|| a.try_lock().and_then(|r| a.unlock().map(|()| r))),
        Ok(Some(Acquired::Acquired))
    );
    ns.remove(3).unwrap();
    ns.remove(4).unwrap();
}

fn every_mutex_a_thread_holds_is_abandoned(ns: &Namespace) {
    let ms: Vec<Mutex<'_>> = (10..15).map(|k| ns.mutex(k, Open::CreateNew).unwrap().0).collect();
    on_a_thread_that_ends(|| {
        for m in &ms {
            m.lock(None).unwrap();
        }
        ms[2].unlock().unwrap(); // one released in the middle of the list
    });
    for (i, m) in ms.iter().enumerate() {
        let want = if i == 2 { Acquired::Acquired } else { Acquired::Abandoned };
        assert_eq!(m.try_lock(), Ok(Some(want)), "mutex {i}");
        m.unlock().unwrap();
    }
    for k in 10..15 {
        ns.remove(k).unwrap();
    }
}

/// Whether thread `tid` of this process is asleep ('S' in its stat).
fn thread_asleep(tid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('S'))
}

fn a_sleeping_locker_is_woken_with_abandoned(ns: &Namespace) {
    let (m, _) = ns.mutex(20, Open::CreateNew).unwrap();
    let (held_tx, held_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let (waiter_tx, waiter_rx) = mpsc::channel();
    std::thread::scope(|s| {
        let end_tx = end_tx; // dropped if an assertion fails: the owner thread then ends too
        let owner = s.spawn(move || {
            m.lock(None).unwrap();
            held_tx.send(()).unwrap();
            end_rx.recv().unwrap(); // then end, holding it
        });
        held_rx.recv().unwrap();
        let waiter = s.spawn(move || {
            // SAFETY: gettid has no arguments and cannot fail.
            waiter_tx.send(unsafe { libc::gettid() }).unwrap();
            let got = m.lock(deadline(LONG));
            if got.is_ok() {
                m.unlock().unwrap();
            }
            got
        });
        let tid = waiter_rx.recv().unwrap();
        let t = Instant::now();
        while !thread_asleep(tid) {
            assert!(t.elapsed() < LONG, "the waiter never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
        end_tx.send(()).unwrap();
        owner.join().unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(Acquired::Abandoned), "the sleeper was woken and told");
    });
    assert_eq!(m.try_lock(), Ok(Some(Acquired::Acquired)));
    m.unlock().unwrap();
    ns.remove(20).unwrap();
}

/// The generation of the object `key` (as the inspection sees it).
fn generation(ns: &Namespace, key: u64) -> u32 {
    ns.objects().iter().find(|o| o.key == key && o.name.is_none()).unwrap().generation
}

fn a_removed_mutex_leaves_the_next_object_of_its_key_alone(ns: &Namespace) {
    let (old_m, _) = ns.mutex(30, Open::CreateNew).unwrap();
    let (old_s, _) = ns.mutex(31, Open::CreateNew).unwrap();
    let (g30, g31) = (generation(ns, 30), generation(ns, 31));
    let (held_tx, held_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let end_tx = end_tx; // dropped if an assertion fails: the thread then ends too
        let t = s.spawn(move || {
            old_m.lock(None).unwrap();
            old_s.lock(None).unwrap();
            held_tx.send(()).unwrap();
            end_rx.recv().unwrap();
            assert_eq!(old_m.unlock().unwrap_err(), NamedError::Removed);
            // Ends holding the removed old_s (and, as far as it knows, old_m).
        });
        held_rx.recv().unwrap();
        // Both removed under their holder, and new objects made under the keys: a mutex that
        // we hold, and a semaphore. (They take other slots: a removed mutex keeps its slot
        // while a thread holds it.)
        ns.remove(30).unwrap();
        ns.remove(31).unwrap();
        let (new_m, _) = ns.mutex(30, Open::CreateNew).unwrap();
        let (new_s, _) = ns.semaphore(31, Open::CreateNew, 5).unwrap();
        assert_eq!(new_m.lock(None), Ok(Acquired::Acquired));
        end_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(new_s.value(), Ok(5), "the ended thread's release did not count");
        new_m.unlock().unwrap();
        assert_eq!(new_m.try_lock(), Ok(Some(Acquired::Acquired)), "not abandoned");
        new_m.unlock().unwrap();
    });
    assert_eq!(old_m.lock(None).unwrap_err(), NamedError::Removed);
    ns.remove(30).unwrap();
    ns.remove(31).unwrap();
    // The thread let go of both (old_m at its unlock, which answered Removed; old_s as it
    // ended): objects made under the keys now take their slots again.
    ns.mutex(30, Open::CreateNew).unwrap();
    ns.semaphore(31, Open::CreateNew, 0).unwrap();
    assert_eq!((generation(ns, 30), generation(ns, 31)), (g30 + 1, g31 + 1), "the slots were let go");
    ns.remove(30).unwrap();
    ns.remove(31).unwrap();
}

fn a_thread_of_another_process_ends_holding_it(ns: &Namespace, name: &str) {
    let (m, _) = ns.mutex(40, Open::CreateNew).unwrap();
    let step = common::shared_word();
    let pid = child(|| {
        let ns = Namespace::open(name).unwrap();
        let (m, _) = ns.mutex(40, Open::Existing).unwrap();
        if on_a_thread_that_ends(|| m.lock(deadline(LONG))) != Ok(Acquired::Acquired) {
            return 1;
        }
        step.store(1, Ordering::SeqCst);
        // Alive until the parent took it: the abandonment is the thread's, not the process's.
        let t = Instant::now();
        while step.load(Ordering::SeqCst) != 2 {
            if t.elapsed() > LONG {
                return 2;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        0
    });
    common::await_value(step, 1);
    assert_eq!(m.lock(deadline(LONG)), Ok(Acquired::Abandoned));
    let mut st = 0;
    // SAFETY: `st` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) }, 0, "the child process lives");
    step.store(2, Ordering::SeqCst);
    assert_eq!(reap(pid), 0);
    m.unlock().unwrap();
    assert_eq!(m.try_lock(), Ok(Some(Acquired::Acquired)));
    m.unlock().unwrap();
    ns.remove(40).unwrap();
}

/// Fork from the calling thread; in the child, run `f` and then end this thread (not the
/// process): the child process exits 0 when its only thread has ended.
fn fork_and_end_the_thread(f: impl FnOnce()) -> libc::pid_t {
    // SAFETY: the child runs `f` and returns from this thread's closure: its start routine
    // ends, the thread's destructors run, and the C library exits the process.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            f();
            0
        }
        pid => pid,
    }
}

fn a_forked_child_neither_owns_nor_abandons_its_parents_mutex(ns: &Namespace) {
    let (m, _) = ns.mutex(50, Open::CreateNew).unwrap();
    let seen = common::shared_word();
    let (pids_tx, pids_rx) = mpsc::channel();
    let (asked_tx, asked_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let asked_tx = asked_tx; // dropped if an assertion fails: the thread then ends too
        let t = s.spawn(move || {
            m.lock(None).unwrap();
            m.lock(None).unwrap();
            // A child whose copy of this thread ends at once, with the copy of our list of what
            // we hold: its exit hook must leave our mutex alone.
            let quiet = fork_and_end_the_thread(|| {});
            if quiet == 0 {
                return;
            }
            // A child that tries to use our mutex: it does not own it.
            let curious = fork_and_end_the_thread(|| {
                let mut ok = m.unlock() == Err(NamedError::NotOwner);
                ok &= m.try_lock() == Ok(None);
                seen.store(if ok { 1 } else { 2 }, Ordering::SeqCst);
            });
            if curious == 0 {
                return;
            }
            pids_tx.send([quiet, curious]).unwrap();
            asked_rx.recv().unwrap();
            // Still ours, twice.
            m.unlock().unwrap();
            m.unlock().unwrap();
        });
        for pid in pids_rx.recv().unwrap() {
            assert_eq!(reap(pid), 0, "the child's thread ended and the child exited");
        }
        assert_eq!(seen.load(Ordering::SeqCst), 1, "the child saw the mutex held by another");
        assert_eq!(m.try_lock(), Ok(None), "still held by its thread in the parent");
        asked_tx.send(()).unwrap();
        t.join().unwrap();
    });
    assert_eq!(m.try_lock(), Ok(Some(Acquired::Acquired)), "released, not abandoned");
    m.unlock().unwrap();
    ns.remove(50).unwrap();
}

/// What the stress threads share about one mutex.
#[derive(Default)]
struct Tally {
    /// Nonzero while someone is in the protected section.
    inside: AtomicU32,
    /// Changed only in the protected section, with a load and a store (lost updates would show
    /// a broken exclusion).
    entries: AtomicU32,
    /// Acquisitions (not counting recursion), counted outside.
    acquired: AtomicU32,
    /// Threads that ended holding it / lockers told it was abandoned.
    ended_holding: AtomicU32,
    abandoned: AtomicU32,
}

impl Tally {
    /// We took it (not recursively): enter the protected section.
    fn enter(&self, how: Acquired) {
        assert_eq!(self.inside.swap(1, Ordering::SeqCst), 0, "two holders at once");
        self.entries.store(self.entries.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.acquired.fetch_add(1, Ordering::Relaxed);
        if how == Acquired::Abandoned {
            self.abandoned.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::yield_now(); // a holder that stays a little: others come to wait
    }

    fn leave(&self) {
        self.inside.store(0, Ordering::SeqCst);
    }
}

/// One stress thread: lock some of the mutexes (in order), maybe recursively, and release each
/// or end holding it.
fn stress_thread(ms: &[Mutex<'_>], tallies: &[Tally], seed: u64) {
    let mut r = Rng::new(seed);
    let mut depth = vec![0u32; ms.len()];
    for (i, m) in ms.iter().enumerate() {
        if r.below(3) == 0 {
            continue;
        }
        let how = if r.below(4) == 0 {
            match m.try_lock().unwrap() {
                Some(how) => how,
                None => continue,
            }
        } else {
            m.lock(deadline(LONG)).unwrap()
        };
        tallies[i].enter(how);
        depth[i] = 1;
        for _ in 0..r.below(3) {
            assert_eq!(m.lock(None), Ok(Acquired::Acquired), "recursion");
            depth[i] += 1;
        }
    }
    for (i, m) in ms.iter().enumerate().rev() {
        if depth[i] == 0 {
            continue;
        }
        tallies[i].leave();
        if r.below(4) == 0 {
            tallies[i].ended_holding.fetch_add(1, Ordering::Relaxed);
            continue; // ends holding it
        }
        for _ in 0..depth[i] {
            m.unlock().unwrap();
        }
    }
}

fn stress_exclusive_and_each_abandonment_reported_once(ns: &Namespace) {
    const MUTEXES: u64 = 2;
    const SPAWNERS: u64 = 3;
    const THREADS_EACH: u64 = 100;
    let ms: Vec<Mutex<'_>> = (0..MUTEXES).map(|k| ns.mutex(60 + k, Open::CreateNew).unwrap().0).collect();
    let tallies: Vec<Tally> = (0..MUTEXES).map(|_| Tally::default()).collect();
    std::thread::scope(|s| {
        for sp in 0..SPAWNERS {
            let (ms, tallies) = (&ms, &tallies);
            s.spawn(move || {
                for i in 0..THREADS_EACH {
                    on_a_thread_that_ends(|| stress_thread(ms, tallies, sp * 1000 + i));
                }
            });
        }
    });
    let mut ended = 0;
    for (m, t) in ms.iter().zip(&tallies) {
        // Take each once more: the last thread may have ended holding it.
        let how = m.lock(deadline(LONG)).unwrap();
        t.enter(how);
        t.leave();
        m.unlock().unwrap();
        let (abandoned, ended_holding) = (t.abandoned.load(Ordering::SeqCst), t.ended_holding.load(Ordering::SeqCst));
        assert_eq!(abandoned, ended_holding, "each abandonment reported once");
        assert_eq!(t.entries.load(Ordering::SeqCst), t.acquired.load(Ordering::SeqCst), "exclusive");
        ended += ended_holding;
    }
    assert!(ended > 0, "some threads ended holding a mutex");
    for k in 0..MUTEXES {
        ns.remove(60 + k).unwrap();
    }
}
