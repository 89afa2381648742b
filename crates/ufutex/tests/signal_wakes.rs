//! A signal handler may call ufutex as it may call the kernel's futex: a handler that posts a
//! semaphore (a count and a wake, as `sem_post` does) may interrupt its thread anywhere — also
//! inside a bucket's critical section of that thread's own wake or wait on the same word —
//! and no post is lost, nothing deadlocks, nothing stays queued. A handler's wait that
//! interrupts its thread's wait or critical section ends without queueing (`Interrupted`),
//! and one that interrupts nothing of ours waits as any wait does.
//!
//! Rounds of two signals (SIGUSR1 and SIGUSR2, the second may land inside the first's handler)
//! to a thread that wakes and waits on the semaphore's word without a pause, with masks that
//! never meet the consumer's; a consumer sleeps on the word until each round's posts arrive.
//! A lost wake leaves the consumer asleep and the round never ends (the watchdog aborts);
//! before the fix, a handler's wake that found its thread holding the word's bucket lock
//! waited for it forever. For `UFUTEX_STRESS_SECS` (2 by default), first with a private
//! semaphore, then with one in shared memory (process-shared calls, whose bucket locks and
//! deferred wakes are the shared table's; the handlers may also land inside the thread's
//! set-up of the shared table, on its first process-shared call).
#![cfg(not(ufutex_loom))]

mod common;

use common::{shared_anon, stress_secs, watchdog, StopOnDrop, CAP};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::{Deadline, WaitError};

/// The private semaphore's word.
static PRIVATE_SEM: AtomicU32 = AtomicU32::new(0);
/// The semaphore of the round: units posted and not yet taken (`PRIVATE_SEM`, or a word in
/// shared memory).
static SEM: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());
/// Whether the round's calls are process-shared.
static SHARED: AtomicBool = AtomicBool::new(false);
/// Posts made by handlers.
static POSTS: AtomicUsize = AtomicUsize::new(0);
/// A word nobody wakes: the handlers' own waits (of a private round; a shared round's is in
/// its page, [`never`]).
static NEVER: AtomicU32 = AtomicU32::new(0);
/// How the handlers' waits ended: `Ok` (must stay 0), timed out, interrupted, other.
static NESTED: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// The consumer's mask; the busy thread's operations use the other bit, so they never take the
/// consumer or a post.
const CONSUMER: u64 = 0b01;
const BUSY: u64 = 0b10;

/// The round's semaphore.
fn sem() -> &'static AtomicU32 {
    // SAFETY: `SEM` points to `PRIVATE_SEM` or to a shared page that is never unmapped; it is
    // set before the round's threads start.
    unsafe { &*SEM.load(Ordering::SeqCst) }
}

/// The round's word that nobody wakes.
fn never() -> &'static AtomicU32 {
    if SHARED.load(Ordering::Relaxed) {
        // SAFETY: 64 bytes into the shared page of `sem`, aligned, never unmapped.
        unsafe { &*SEM.load(Ordering::SeqCst).add(16) }
    } else {
        &NEVER
    }
}

/// How a wait ended, whichever kind it was.
#[derive(Debug, PartialEq)]
enum Ended {
    Woken,
    TimedOut,
    WouldBlock,
    Interrupted,
    Other(String),
}

/// Wait on `word` with `mask`, privately or process-shared as the round is.
fn wait(word: &AtomicU32, v: u32, mask: u64, deadline: Option<Deadline>) -> Ended {
    if SHARED.load(Ordering::Relaxed) {
        match shared::wait_bitset(word, v, mask, deadline) {
            Ok(()) => Ended::Woken,
            Err(SharedError::TimedOut) => Ended::TimedOut,
            Err(SharedError::WouldBlock) => Ended::WouldBlock,
            Err(SharedError::Interrupted) => Ended::Interrupted,
            Err(e) => Ended::Other(format!("{e:?}")),
        }
    } else {
        match ufutex::wait_bitset(word, v, mask, deadline) {
            Ok(()) => Ended::Woken,
            Err(WaitError::TimedOut) => Ended::TimedOut,
            Err(WaitError::WouldBlock) => Ended::WouldBlock,
            Err(WaitError::Interrupted) => Ended::Interrupted,
        }
    }
}

/// Wake up to `n` waiters of `word` with `mask`, as the round is: how many.
fn wake(word: &AtomicU32, n: usize, mask: u64) -> usize {
    if SHARED.load(Ordering::Relaxed) {
        shared::wake_bitset(word, n, mask).expect("a process-shared wake")
    } else {
        ufutex::wake_bitset(word, n, mask)
    }
}

extern "C" fn on_signal(_sig: libc::c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, which a handler must leave as
    // it found it.
    let errno = unsafe { *libc::__errno_location() };
    sem().fetch_add(1, Ordering::SeqCst);
    let n = POSTS.fetch_add(1, Ordering::SeqCst);
    wake(sem(), 1, CONSUMER);
    if n.is_multiple_of(8) {
        let slot = match wait(never(), 0, !0, Some(Duration::from_micros(20).into())) {
            Ended::Woken => 0,
            Ended::TimedOut => 1,
            Ended::Interrupted => 2,
            _ => 3,
        };
        NESTED[slot].fetch_add(1, Ordering::SeqCst);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

fn install(sig: libc::c_int) {
    // SAFETY:
    // - an all-zero `sigaction` is a valid start (no flags, empty mask), filled in below;
    // - `on_signal` calls only what a handler may: atomics, ufutex's wake and wait (which this
    //   test is about; an error's message is formatted only on a failure), errno;
    // - `sa` outlives the call; a null old action is allowed.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

fn signal(thread: u64, sig: libc::c_int) {
    // SAFETY: `thread` is the busy thread of the scope below, which runs until the rounds
    // end; the signal has our handler.
    assert_eq!(unsafe { libc::pthread_kill(thread as libc::pthread_t, sig) }, 0, "pthread_kill");
}

#[test]
fn handlers_posting_inside_their_threads_critical_sections_lose_nothing() {
    watchdog();
    install(libc::SIGUSR1);
    install(libc::SIGUSR2);
    SEM.store(std::ptr::from_ref(&PRIVATE_SEM).cast_mut(), Ordering::SeqCst);
    run_rounds("private");
    assert_eq!(ufutex::Domain::default_domain().queued_waiters(), 0, "nothing stays queued");
    // A fresh page of shared memory: the first process-shared calls of the process are the
    // round's own, so its first handlers may land in the shared table's set-up.
    SEM.store(shared_anon(4096).cast(), Ordering::SeqCst);
    SHARED.store(true, Ordering::SeqCst);
    run_rounds("process-shared");
}

/// Rounds of signals for `UFUTEX_STRESS_SECS`, with the semaphore and kind set above.
fn run_rounds(kind: &str) {
    POSTS.store(0, Ordering::SeqCst);
    NESTED.iter().for_each(|n| n.store(0, Ordering::SeqCst));
    let stop = AtomicBool::new(false);
    let taken = AtomicUsize::new(0);
    let busy_tid = AtomicU64::new(0);
    let (mut rounds, mut busy_ops) = (0usize, 0u64);
    std::thread::scope(|s| {
        // The busy thread: wakes and waits on the semaphore's word with a mask the consumer's
        // never shares, so it holds that word's bucket lock often while the consumer sleeps.
        let busy = s.spawn(|| {
            let _stop = StopOnDrop(&stop);
            // SAFETY: pthread_self has no preconditions.
            busy_tid.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if ops.is_multiple_of(256) {
                    let v = sem().load(Ordering::SeqCst);
                    match wait(sem(), v, BUSY, Some(Duration::from_micros(30).into())) {
                        Ended::TimedOut | Ended::WouldBlock | Ended::Interrupted => {}
                        r => panic!("nobody wakes the busy thread's mask, yet its wait returned {r:?}"),
                    }
                } else {
                    assert_eq!(wake(sem(), 1, BUSY), 0, "nobody waits with the busy mask");
                }
                ops += 1;
            }
            ops
        });
        // The consumer: takes a unit, or sleeps (untimed) until one is posted.
        let consumer = s.spawn(|| {
            let _stop = StopOnDrop(&stop);
            while !stop.load(Ordering::SeqCst) {
                let v = sem().load(Ordering::SeqCst);
                if v > 0 {
                    if sem().compare_exchange(v, v - 1, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                    continue;
                }
                match wait(sem(), 0, CONSUMER, None) {
                    Ended::Woken | Ended::WouldBlock => {}
                    e => panic!("the consumer's untimed wait ended with {e:?}"),
                }
            }
        });
        let _stop = StopOnDrop(&stop);
        while busy_tid.load(Ordering::SeqCst) == 0 {
            assert!(!stop.load(Ordering::SeqCst), "a helper thread failed");
            std::thread::yield_now();
        }
        let tid = busy_tid.load(Ordering::SeqCst);
        let end = Instant::now() + Duration::from_secs(stress_secs());
        while Instant::now() < end && !stop.load(Ordering::SeqCst) {
            let before = POSTS.load(Ordering::SeqCst);
            signal(tid, libc::SIGUSR1);
            signal(tid, libc::SIGUSR2);
            // Both handlers run (two signals do not merge), then the consumer takes both posts.
            let start = Instant::now();
            while POSTS.load(Ordering::SeqCst) < before + 2 || taken.load(Ordering::SeqCst) < before + 2 {
                assert!(
                    start.elapsed() < CAP,
                    "round {rounds}: {} of {} posts taken after {CAP:?}: a wake was lost or a handler is stuck",
                    taken.load(Ordering::SeqCst),
                    POSTS.load(Ordering::SeqCst)
                );
                std::thread::yield_now();
            }
            rounds += 1;
        }
        stop.store(true, Ordering::SeqCst);
        // The consumer may be asleep on an empty semaphore: one post from here ends it.
        sem().fetch_add(1, Ordering::SeqCst);
        wake(sem(), 1, CONSUMER);
        busy_ops = busy.join().expect("the busy thread");
        consumer.join().expect("the consumer");
    });
    let posts = POSTS.load(Ordering::SeqCst);
    assert_eq!(posts, 2 * rounds, "every signal ran its handler once");
    // The last post (from the test, to end the consumer) may or may not have been taken.
    let left = sem().load(Ordering::SeqCst) as usize;
    assert_eq!(taken.load(Ordering::SeqCst) + left, posts + 1, "every post was taken");
    assert_eq!(NESTED[0].load(Ordering::SeqCst), 0, "a handler's wait on a word nobody wakes returned Ok");
    assert_eq!(NESTED[3].load(Ordering::SeqCst), 0, "a handler's wait ended with an unexpected error");
    eprintln!(
        "{kind}: {rounds} rounds, {posts} posts, {busy_ops} busy operations; handlers' waits: {} timed out, {} interrupted",
        NESTED[1].load(Ordering::SeqCst),
        NESTED[2].load(Ordering::SeqCst)
    );
}
