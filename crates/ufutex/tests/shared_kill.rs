//! SIGKILL at random moments: worker processes hammer wait, waitv, wake, requeue and wake-op on
//! colliding process-shared words (one filter counter, a 4-bucket table) while the test kills
//! them at random and starts new ones. Two survivors pass a token back and forth through the
//! same table with untimed-in-spirit waits (a 10 s deadline that must never expire): a lost
//! wakeup stops them. At the end: with every worker dead, a wake finds nobody, and a fresh round
//! counts exactly.
//!
//! `UFUTEX_STRESS_SECS` sets how long the killing goes on (default 2 s; CI's stress step runs
//! longer).
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, deadline, reap, shared_anon, Rng};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::WaitEntry;

struct Words {
    /// Three words at the same in-page offset of three pages, and a fourth beside them.
    w: [&'static AtomicU32; 4],
    /// The survivors' token and their stop flag.
    token: &'static AtomicU32,
    stop: &'static AtomicU32,
    /// Rounds the survivors completed.
    rounds: &'static AtomicU64,
}

/// A worker: random operations forever (until killed, or the stop flag).
fn worker(ws: &'static Words) -> i32 {
    // SAFETY: getpid has no arguments.
    let mut s = Rng::new(unsafe { libc::getpid() } as u64);
    while ws.stop.load(Ordering::Relaxed) == 0 {
        let r = s.next();
        let w = ws.w[(r % 4) as usize];
        let d = deadline(Duration::from_millis(1 + (r >> 8) % 20));
        let res = match (r >> 16) % 20 {
            0..=7 => shared::wait(w, 0, d).map(|()| 0),
            8..=10 => {
                let v = [WaitEntry::new(ws.w[0], 0), WaitEntry::new(ws.w[1], 0), WaitEntry::new(ws.w[3], 0)];
                shared::waitv(&v, d)
            }
            11..=14 => shared::wake(w, 1 + (r >> 24) as usize % 3),
            15 => {
                // ADD 0 (the words stay 0, which every wait here expects), compare with 0: the
                // second word's waiters are woken too.
                let (to, n1, n2) = (ws.w[((r >> 24) % 4) as usize], (r >> 28) as i32 & 1, 1 + (r >> 30) as i32 % 2);
                match common::shared_wake_op(w, to, n1, n2, common::futex_op(common::OP_ADD, 0, common::CMP_EQ, 0)) {
                    Ok(n) => Ok(n),
                    Err(errno) => return 30 + errno,
                }
            }
            _ => shared::requeue(w, 0, ws.w[((r >> 24) % 4) as usize], (r >> 28) as usize % 2, (r >> 30) as usize % 3),
        };
        match res {
            Ok(_) | Err(SharedError::TimedOut) => {}
            Err(e) => return 10 + e.errno(),
        }
    }
    0
}

#[test]
fn random_kills_lose_no_wakeup_and_leave_nothing_queued() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_SHARED_BUCKETS", "4");
    let secs: f64 = common::stress_secs() as f64;
    let p = shared_anon(4 * 4096);
    // SAFETY: a live mapping, never unmapped; offsets aligned.
    let ws: &'static Words = Box::leak(Box::new(unsafe {
        Words {
            w: [at(p, 64), at(p, 4096 + 64), at(p, 8192 + 64), at(p, 72)],
            token: at(p, 3 * 4096 + 64),
            stop: at(p, 3 * 4096 + 128),
            rounds: at(p, 3 * 4096 + 192),
        }
    }));
    assert_eq!(shared::wake(ws.token, 1), Ok(0)); // map the table before forking

    let survivors = [0, 1].map(|mine| child(move || common::pass_token(ws.token, ws.stop, ws.rounds, mine, false)));
    let mut workers: Vec<libc::pid_t> = (0..6).map(|_| child(|| worker(ws))).collect();
    let start = Instant::now();
    let mut kills = 0u32;
    let mut s = Rng::new(0x1234_5678_9abc_def1);
    while start.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_micros(s.next() % 3000));
        let i = (s.next() % workers.len() as u64) as usize;
        // SAFETY: our own child.
        unsafe { libc::kill(workers[i], libc::SIGKILL) };
        let st = reap(workers[i]);
        assert!(st == -libc::SIGKILL || st == 0, "a worker failed on its own: {st}");
        kills += 1;
        workers[i] = child(|| worker(ws));
    }
    for &pid in &workers {
        // SAFETY: our own children.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
    }
    ws.stop.store(1, Ordering::Relaxed);
    ws.token.fetch_add(1, Ordering::Release);
    assert_eq!(shared::wake(ws.token, 2).map(|_| ()), Ok(()));
    for pid in survivors {
        assert_eq!(reap(pid), 0, "a survivor lost a wakeup or failed");
    }
    let rounds = ws.rounds.load(Ordering::Relaxed);
    eprintln!("{kills} kills, {rounds} token passes");
    assert!(rounds > 0);

    // Every worker is dead: nobody is counted on any word.
    for w in ws.w {
        assert_eq!(shared::wake(w, usize::MAX), Ok(0));
    }
    // A fresh round counts exactly.
    let w = ws.w[1];
    let pids: Vec<_> = (0..3)
        .map(|_| child(move || shared::wait(w, 0, deadline(common::CAP)).map_or_else(|e| e.errno(), |()| 0)))
        .collect();
    let t = Instant::now();
    while shared::requeue(w, 0, w, 0, usize::MAX) != Ok(3) {
        assert!(t.elapsed() < common::CAP);
        std::thread::sleep(Duration::from_millis(1));
    }
    let woken = shared::wake(w, usize::MAX);
    // Each child's exit code is 0 (woken) or the errno its wait failed with.
    let codes: Vec<_> = pids.into_iter().map(reap).collect();
    assert_eq!((woken, codes), (Ok(3), vec![0; 3]));
}
