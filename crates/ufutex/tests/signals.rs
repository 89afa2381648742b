//! Signals: a handler installed without `SA_RESTART` that runs while a thread sleeps in a wait
//! (or waitv) makes it return `Interrupted`, leaving nothing queued; with `SA_RESTART` the wait
//! goes on — it is still queued, is later woken and returns `Ok`, or times out at its original
//! deadline. Signals are sent with `pthread_kill` to the waiting thread only.
//!
//! Not built with `fallback-parker`: the portable parker never reports `Interrupted`.
#![cfg(not(ufutex_loom))]
#![cfg(not(feature = "fallback-parker"))]

mod common;

use common::{await_queued, await_until, fixed, watchdog};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use ufutex::{Deadline, Domain, WaitEntry, WaitError};

/// Handler runs, counted.
static HITS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_usr1(_sig: libc::c_int) {
    HITS.fetch_add(1, Ordering::SeqCst);
}

/// The handler is process-wide: one test at a time installs it and signals.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn install_handler(restart: bool) {
    // SAFETY:
    // - an all-zero `sigaction` is a valid starting value (no flags, empty mask, default
    //   restorer), which we then fill in;
    // - `on_usr1` is async-signal-safe: it only increments an atomic;
    // - `sa` outlives both calls, and a null old-action pointer is allowed.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
}

/// One signal test's start: a watchdog, the test lock held (returned), our handler installed
/// with or without SA_RESTART, and a 2-slot domain.
fn setup(restart: bool) -> (MutexGuard<'static, ()>, Domain) {
    watchdog();
    let g = serial();
    install_handler(restart);
    (g, fixed(2))
}

fn current_thread() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

fn signal(thread: u64) {
    // SAFETY:
    // - `thread` is the pthread_t of a thread of a scope that has not been joined yet, so the
    //   id is still valid (it may have returned from its wait, which is harmless);
    // - SIGUSR1 has our counting handler installed, so it does not kill the process.
    let r = unsafe { libc::pthread_kill(thread as libc::pthread_t, libc::SIGUSR1) };
    assert_eq!(r, 0, "pthread_kill");
}

/// Signal `thread` every few ms until `done()`; returns how many signals were sent. The first
/// signals may land while the waiter still spins before sleeping: the loop keeps sending.
fn signal_until(thread: u64, mut done: impl FnMut() -> bool) -> usize {
    let start = Instant::now();
    let mut sent = 0;
    while !done() {
        assert!(start.elapsed() < common::CAP, "the waiter never returned after {sent} signals");
        signal(thread);
        sent += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    sent
}

/// Spawn a waiter with `op` in a scope, wait until it is queued (`queued` waiters), and hand
/// its pthread id and join handle to `check`.
fn with_waiter<R: Send>(
    d: &Domain,
    queued: usize,
    op: impl FnOnce() -> R + Send,
    check: impl FnOnce(u64, &std::thread::ScopedJoinHandle<'_, R>),
) -> R {
    let tid = AtomicU64::new(0);
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            tid.store(current_thread(), Ordering::SeqCst);
            op()
        });
        await_queued(d, queued);
        check(tid.load(Ordering::SeqCst), &t);
        t.join().unwrap()
    })
}

#[test]
fn without_sa_restart_a_sleeping_wait_is_interrupted() {
    let (_g, d) = setup(false);
    let w = AtomicU32::new(0);
    let r = with_waiter(
        &d,
        1,
        || d.wait(&w, 0, None),
        |tid, t| {
            signal_until(tid, || t.is_finished());
        },
    );
    assert_eq!(r, Err(WaitError::Interrupted));
    assert_eq!(d.queued_waiters(), 0, "an interrupted waiter leaves its queue");
    assert_eq!(d.wake(&w, usize::MAX), 0);
}

#[test]
fn without_sa_restart_a_sleeping_waitv_is_interrupted() {
    let (_g, d) = setup(false);
    let (a, b) = (AtomicU32::new(0), AtomicU64::new(u64::MAX));
    let r = with_waiter(
        &d,
        2,
        || d.waitv(&[WaitEntry::new(&a, 0), WaitEntry::new(&b, u64::MAX)], Some(Duration::from_secs(600).into())),
        |tid, t| {
            signal_until(tid, || t.is_finished());
        },
    );
    assert_eq!(r, Err(WaitError::Interrupted));
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn with_sa_restart_the_wait_goes_on_until_woken() {
    let (_g, d) = setup(true);
    let w = AtomicU32::new(0);
    let r = with_waiter(
        &d,
        1,
        || d.wait(&w, 0, None),
        |tid, t| {
            // Enough handler runs, spaced out, that several land while the thread sleeps.
            let before = HITS.load(Ordering::SeqCst);
            signal_until(tid, || HITS.load(Ordering::SeqCst) >= before + 10 || t.is_finished());
            assert!(!t.is_finished(), "a wait under SA_RESTART returned without a wake");
            assert_eq!(d.queued_waiters(), 1, "still queued after the handlers ran");
            assert_eq!(d.wake(&w, 1), 1);
        },
    );
    assert_eq!(r, Ok(()));
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn with_sa_restart_a_timed_wait_times_out_at_its_deadline() {
    let (_g, d) = setup(true);
    let w = AtomicU32::new(0);
    let at = Instant::now() + Duration::from_millis(150);
    let before = HITS.load(Ordering::SeqCst);
    let r = with_waiter(
        &d,
        1,
        || d.wait(&w, 0, Some(Deadline::Monotonic(at))),
        |tid, t| {
            signal_until(tid, || t.is_finished());
        },
    );
    assert_eq!(r, Err(WaitError::TimedOut), "restarted with the same deadline, not interrupted");
    assert!(Instant::now() >= at);
    assert!(HITS.load(Ordering::SeqCst) > before, "the handler ran");
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn interrupted_maps_to_eintr() {
    assert_eq!(WaitError::Interrupted.errno(), libc::EINTR);
}

#[test]
fn a_signal_to_a_thread_not_waiting_changes_nothing() {
    let (_g, d) = setup(false);
    let w = AtomicU32::new(0);
    // The waiter is signalled before it waits; its wait then sleeps normally and is woken.
    let tid = AtomicU64::new(0);
    let go = AtomicU32::new(0);
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            tid.store(current_thread(), Ordering::SeqCst);
            while go.load(Ordering::SeqCst) == 0 {
                let _ = ufutex::wait(&go, 0, Some(Duration::from_millis(1).into()));
            }
            d.wait(&w, 0, None)
        });
        await_until("the thread to start", || tid.load(Ordering::SeqCst) != 0);
        let before = HITS.load(Ordering::SeqCst);
        signal(tid.load(Ordering::SeqCst));
        await_until("the handler to run", || HITS.load(Ordering::SeqCst) > before);
        go.store(1, Ordering::SeqCst);
        ufutex::wake(&go, 1);
        await_queued(&d, 1);
        assert_eq!(d.wake(&w, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

/// How many shared waiters are queued on `w` (a requeue onto itself counts them, keeping their order).
fn shared_queued(w: &AtomicU32) -> usize {
    ufutex::shared::requeue(w, 0, w, 0, usize::MAX).unwrap()
}

/// A thread of `s` in a shared wait on `w`, queued: its handle and its pthread id.
fn shared_waiter<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    w: &'static AtomicU32,
) -> (std::thread::ScopedJoinHandle<'s, Result<(), ufutex::shared::SharedError>>, u64) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = s.spawn(move || {
        tx.send(current_thread()).unwrap();
        ufutex::shared::wait(w, 0, Some(Deadline::from(common::CAP)))
    });
    let id = rx.recv().unwrap();
    await_until("the shared waiter queued", || shared_queued(w) == 1);
    (t, id)
}

#[test]
fn a_shared_wait_is_interrupted_and_leaves_nothing_queued() {
    let (_g, _d) = setup(false);
    let _table = common::isolated_shared_table();
    let w = common::shared_word();
    std::thread::scope(|s| {
        let (t, id) = shared_waiter(s, w);
        signal_until(id, || t.is_finished());
        assert_eq!(t.join().unwrap(), Err(ufutex::shared::SharedError::Interrupted));
    });
    assert_eq!(shared_queued(w), 0);
    assert_eq!(ufutex::shared::wake(w, 1), Ok(0));
}

#[test]
fn a_shared_wait_goes_on_under_sa_restart() {
    let (_g, _d) = setup(true);
    let _table = common::isolated_shared_table();
    let w = common::shared_word();
    std::thread::scope(|s| {
        let (t, id) = shared_waiter(s, w);
        let before = HITS.load(Ordering::SeqCst);
        for _ in 0..5 {
            signal(id);
            std::thread::sleep(Duration::from_millis(2));
        }
        await_until("the handler ran", || HITS.load(Ordering::SeqCst) > before);
        assert!(!t.is_finished(), "SA_RESTART: the wait goes on");
        assert_eq!(shared_queued(w), 1);
        assert_eq!(ufutex::shared::wake(w, 1), Ok(1));
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}
