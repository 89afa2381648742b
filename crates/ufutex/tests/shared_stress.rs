//! Stress with invariants on the process-shared table: 3 processes × 2 threads doing random
//! wait / waitv / wake / requeue / wake-op (the C ABI's `FUTEX_WAKE_OP`) on four shared words
//! (three at the same in-page offset, so they share a filter count; a 4-bucket table, so keys
//! collide), with short deadlines, for `UFUTEX_STRESS_SECS` (2 s when unset; CI's stress step
//! runs longer). Half the wakes change their word first and half do not, so waiters both see
//! changes in their spin before queueing and are dequeued asleep.
//!
//! Every wake is accounted for: requeues wake nobody themselves (`nr_wake` 0: what they move is
//! woken by a later wake of the target, or times out), a wake-op's count is both its wakes',
//! and a waitv's other entries are words nobody wakes, so the sum of every wake's count equals
//! the number of waits and waitvs that returned `Ok`. A lost wakeup (a counted wake whose waiter
//! timed out instead) or a double wake (a waiter returning `Ok` that no waker counted) breaks
//! the equality. Beside them two processes pass a token with waits whose 10 s deadline must
//! never expire, not even the last one, which the test's final change and wake end: a lost
//! wakeup there stops them. At the end, with every worker gone, a wake of each word finds
//! nobody queued.
//!
//! Workers 0 and 2 and the first token holder register the mapping (`register_mapping`: their
//! words' identities come from the noted list), the others ask the kernel for every operation:
//! the two must give the same keys, or waits and wakes across them miss each other.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, deadline, reap, shared_anon, Rng};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::WaitEntry;

const PROCESSES: usize = 3;
const THREADS: usize = 2;

/// What every process sees, in one shared anonymous mapping.
struct Books {
    /// The mapping's address and length (registered by some processes).
    map: (usize, usize),
    /// The live words: three at the same offset of three pages, a fourth beside the first.
    w: [&'static AtomicU32; 4],
    /// Extra waitv entries: nobody changes, wakes or requeues to them.
    filler: &'static AtomicU32,
    /// Waits and waitvs that returned `Ok`; the sum of the counts every wake returned.
    ok: &'static AtomicU64,
    woken: &'static AtomicU64,
    /// The token two processes pass, its rounds, and the stop flag.
    token: &'static AtomicU32,
    rounds: &'static AtomicU64,
    stop: &'static AtomicU32,
}

/// A worker thread: random operations until stopped; 0, or 10 + errno of an unexpected error.
fn worker(b: &Books, seed: u64) -> i32 {
    let mut s = Rng::new(seed);
    while b.stop.load(Ordering::Relaxed) == 0 {
        let r = s.next();
        let w = b.w[(r % 4) as usize];
        let d = deadline(Duration::from_millis(1 + (r >> 8) % 10));
        let res = match (r >> 16) % 16 {
            0..=6 => shared::wait(w, w.load(Ordering::Relaxed), d).map(|()| 1),
            7..=8 => {
                let v = [WaitEntry::new(b.filler, 0), WaitEntry::new(w, w.load(Ordering::Relaxed))];
                shared::waitv(&v, d).map(|i| {
                    assert_eq!(i, 1, "a waitv woken through a word nobody wakes");
                    1
                })
            }
            9..=13 => {
                if r & (1 << 40) != 0 {
                    w.fetch_add(1, Ordering::Release);
                }
                shared::wake(w, 1 + (r >> 24) as usize % 3).map(|n| {
                    b.woken.fetch_add(n as u64, Ordering::Relaxed);
                    0
                })
            }
            14 => {
                // The C ABI's FUTEX_WAKE_OP: ADD 1 to `to`, whose waiters are woken too when
                // the comparison (GE 0 or LT 0 on its old value, which stays small) says so.
                let to = b.w[((r >> 24) % 4) as usize];
                let cmp = if r & (1 << 41) != 0 { common::CMP_GE } else { common::CMP_LT };
                let op = common::futex_op(common::OP_ADD, 1, cmp, 0);
                let (n1, n2) = (((r >> 28) % 3) as i32, ((r >> 32) % 3) as i32);
                match common::shared_wake_op(w, to, n1, n2, op) {
                    Ok(n) => {
                        b.woken.fetch_add(n as u64, Ordering::Relaxed);
                        Ok(0)
                    }
                    Err(errno) => return 30 + errno,
                }
            }
            _ => {
                let to = b.w[((r >> 24) % 4) as usize];
                shared::requeue(w, w.load(Ordering::Relaxed), to, 0, 1 + (r >> 28) as usize % 2).map(|_| 0)
            }
        };
        match res {
            Ok(1) => {
                b.ok.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) | Err(SharedError::TimedOut) | Err(SharedError::WouldBlock) => {}
            Err(e) => return 10 + e.errno(),
        }
    }
    0
}

/// Register the mapping in this process: 0, or 50 + errno.
fn register(b: &Books) -> i32 {
    shared::register_mapping(b.map.0 as *const u8, b.map.1).map_or_else(|e| 50 + e.errno(), |()| 0)
}

/// A worker process: its threads' worst status.
fn workers(b: &'static Books, k: usize) -> i32 {
    let r = if k.is_multiple_of(2) { register(b) } else { 0 };
    if r != 0 {
        return r;
    }
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..THREADS).map(|t| s.spawn(move || worker(b, (k * THREADS + t) as u64 + 1))).collect();
        ts.into_iter().map(|t| t.join().unwrap_or(99)).max().unwrap_or(0)
    })
}

#[test]
fn every_shared_wake_is_counted_once_and_nothing_is_left_queued() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_SHARED_BUCKETS", "4");
    let secs = common::stress_secs();
    let p = shared_anon(4 * 4096);
    // SAFETY: a live mapping, never unmapped; every offset aligned for its type.
    let b: &'static Books = Box::leak(Box::new(unsafe {
        Books {
            map: (p as usize, 4 * 4096),
            w: [at(p, 64), at(p, 4096 + 64), at(p, 8192 + 64), at(p, 72)],
            filler: at(p, 3 * 4096),
            ok: at(p, 3 * 4096 + 64),
            woken: at(p, 3 * 4096 + 128),
            token: at(p, 3 * 4096 + 192),
            rounds: at(p, 3 * 4096 + 256),
            stop: at(p, 3 * 4096 + 320),
        }
    }));
    assert_eq!(shared::wake(b.token, 1), Ok(0)); // map the table before forking

    let holders = [0, 1].map(|mine| {
        child(move || match if mine == 0 { register(b) } else { 0 } {
            0 => common::pass_token(b.token, b.stop, b.rounds, mine, true),
            failed => failed,
        })
    });
    let procs: Vec<libc::pid_t> = (0..PROCESSES).map(|k| child(move || workers(b, k))).collect();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(50));
    }
    b.stop.store(1, Ordering::Relaxed);
    for pid in procs {
        assert_eq!(reap(pid), 0, "a worker failed");
    }
    b.token.fetch_add(1, Ordering::Release);
    assert!(shared::wake(b.token, 2).is_ok());
    for pid in holders {
        assert_eq!(reap(pid), 0, "a token holder lost a wakeup or failed");
    }
    assert!(b.rounds.load(Ordering::Relaxed) > 0, "the token never went round");
    for &w in b.w.iter().chain([&b.filler, &b.token]) {
        assert_eq!(shared::wake(w, usize::MAX), Ok(0), "a waiter left queued");
    }
    let (ok, woken) = (b.ok.load(Ordering::Relaxed), b.woken.load(Ordering::Relaxed));
    eprintln!("{ok} waits woken, {} token rounds", b.rounds.load(Ordering::Relaxed));
    assert!(ok > 0, "no wait was ever woken: the stress did not stress");
    assert_eq!(ok, woken, "waits woken ({ok}) and wakes counted ({woken}) differ");
}
