//! Targeted kills: a process dies (SIGKILL, by the fault-injection hook
//! `UFUTEX_SHARED_DIE_AT`) at each step of queue surgery in the shared table, holding a bucket
//! lock; the survivors take the lock over, repair the queue, lose no wakeup, never count the
//! dead, and a fresh round counts exactly.
//!
//! One test runs every point in turn (so nothing else runs while it forks). The table has 4
//! buckets, so every word of a scenario shares its bucket with others.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, deadline, dies_at, reap, shared_anon, wake_until_one};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};

const LONG: Duration = Duration::from_secs(20);

/// A child that waits on `w` (value 0): exit 0 if woken, 1 on timeout, 2 on another error.
fn waiter(w: &'static AtomicU32, patience: Duration) -> libc::pid_t {
    child(move || match shared::wait(w, 0, deadline(patience)) {
        Ok(()) => 0,
        Err(SharedError::TimedOut) => 1,
        Err(_) => 2,
    })
}

fn await_queued(w: &AtomicU32, n: usize) {
    common::await_shared_queued(w, n, Instant::now() + LONG, || format!("never saw {n} queued"));
}

/// After a scenario: nobody is left on `w`, and a fresh round of `n` waiters counts exactly.
fn fresh_round_is_exact(w: &'static AtomicU32, n: usize) {
    assert_eq!(shared::wake(w, usize::MAX), Ok(0), "no waiter (dead or alive) left");
    let pids: Vec<_> = (0..n).map(|_| waiter(w, LONG)).collect();
    await_queued(w, n);
    assert_eq!(shared::wake(w, usize::MAX), Ok(n));
    for pid in pids {
        assert_eq!(reap(pid), 0);
    }
    assert_eq!(shared::wake(w, usize::MAX), Ok(0));
}

/// The bell sleepers of the test's table (`Bucket::sleepers`, summed over its 4 buckets), read
/// from the segment file at the layout of `shared/segment.rs`: a header page, 4 filter pages,
/// 128 process slots of 64 bytes (2 pages), then the buckets, 128 bytes each, whose second line
/// holds head, tail, ticket, bell and then sleepers.
fn bell_sleepers() -> u32 {
    use std::os::unix::fs::FileExt;
    const BUCKETS_AT: u64 = 4096 + 4 * 4096 + 2 * 4096;
    let dir = std::env::var_os("UFUTEX_SHARED_DIR").expect("an isolated table");
    let f = std::fs::File::open(std::path::Path::new(&dir).join("table")).unwrap();
    (0..4)
        .map(|b| {
            let mut n = [0u8; 4];
            f.read_exact_at(&mut n, BUCKETS_AT + 128 * b + 64 + 20).unwrap();
            u32::from_le_bytes(n)
        })
        .sum()
}

#[test]
fn a_process_killed_at_any_step_leaves_the_table_usable() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_SHARED_BUCKETS", "4");
    let p = shared_anon(3 * 4096);
    // SAFETY: a live mapping, never unmapped; offsets aligned. Same in-page offset on three
    // pages: one filter counter, and (4 buckets) often one bucket.
    let (a, b, c): (&AtomicU32, &AtomicU32, &AtomicU32) = unsafe { (at(p, 64), at(p, 4096 + 64), at(p, 8192 + 64)) };
    assert_eq!(shared::wake(a, 1), Ok(0)); // map the table before forking

    // A waiter dies counted in the filter, before it queued: only the fast path is lost.
    dies_at("counted", || shared::wait(a, 0, None).map_or(2, |()| 0));
    fresh_round_is_exact(a, 2);

    // A waiter dies holding the bucket lock, nothing changed yet.
    dies_at("locked", || shared::wait(a, 0, None).map_or(2, |()| 0));
    let t = Instant::now();
    assert_eq!(shared::wake(a, 1), Ok(0));
    eprintln!("lock of a dead owner taken over in {:?}", t.elapsed());
    fresh_round_is_exact(a, 2);

    // A waiter dies with its record linked, the bucket marked dirty: the queue is rebuilt, and
    // the dead waiter is found and not counted.
    dies_at("enqueued", || shared::wait(a, 0, None).map_or(2, |()| 0));
    assert_eq!(shared::wake(a, 1), Ok(0));
    fresh_round_is_exact(a, 2);

    // A waker dies after unlinking a live waiter, before marking it: the waiter is queued again
    // by the repair and the next wake gets it.
    let w = waiter(b, LONG);
    await_queued(b, 1);
    dies_at("unlinked", || shared::wake(b, 1).map_or(2, |n| n as i32));
    wake_until_one(|| shared::wake(b, 1));
    assert_eq!(reap(w), 0);
    fresh_round_is_exact(b, 2);

    // A waker dies after marking a live waiter woken, before kicking it: the waiter sees it by
    // itself (it sleeps in slices) or the next locker kicks it; the wake counted it.
    let w = waiter(b, LONG);
    await_queued(b, 1);
    dies_at("marked", || shared::wake(b, 1).map_or(2, |n| n as i32));
    assert_eq!(reap(w), 0);
    fresh_round_is_exact(b, 2);

    // A waker dies holding back the kicks of waiters asleep on their bucket's bell, before its
    // ring: after the first of two ("held") or both ("held:2"). The next locker rings the bell
    // for it and takes the waiter left, if any; both waiters return. Where they do not sleep on
    // a bell (no `futex_waitv`), a plain wake ends them.
    for (point, left) in [("held", 1), ("held:2", 0)] {
        let ws = [waiter(b, LONG), waiter(b, LONG)];
        await_queued(b, 2);
        if ws.iter().all(|&w| common::sleeps_in_waitv(w, Duration::from_secs(5))) {
            dies_at(point, || shared::wake(b, 2).map_or(2, |n| n as i32));
            assert_eq!(shared::wake(b, 2), Ok(left), "{point}");
        } else {
            eprintln!("{point}: the waiters do not sleep in futex_waitv here; woken plainly");
            assert_eq!(shared::wake(b, 2), Ok(2));
        }
        for w in ws {
            assert_eq!(reap(w), 0, "{point}");
        }
        fresh_round_is_exact(b, 2);
    }

    // A requeuer dies between the two queues: out of the old one, before the store that gives
    // the record its new key and bucket together ("moving": the requeue never happened, the
    // waiter is back on `a`), or after it ("rekeyed": it happened, the waiter is on `c`). A
    // wake of one of the two words finds it, exactly once.
    for point in ["moving", "rekeyed"] {
        let w = waiter(a, LONG);
        await_queued(a, 1);
        dies_at(point, || shared::requeue(a, 0, c, 0, 1).map_or(2, |n| n as i32));
        let t = Instant::now();
        loop {
            let n = shared::wake(a, 1).unwrap() + shared::wake(c, 1).unwrap();
            if n == 1 {
                break;
            }
            assert_eq!(n, 0, "{point}");
            assert!(t.elapsed() < LONG, "{point}: the waiter was lost");
        }
        assert_eq!(reap(w), 0, "{point}");
        fresh_round_is_exact(a, 1);
        fresh_round_is_exact(c, 1);
    }

    // A waiter killed while it sleeps: a requeue takes its record out, neither moving nor
    // counting it (as a wake does not count it).
    let w = waiter(b, LONG);
    await_queued(b, 1);
    // SAFETY: our child, not yet reaped.
    assert_eq!(unsafe { libc::kill(w, libc::SIGKILL) }, 0);
    assert_eq!(reap(w), -libc::SIGKILL);
    assert_eq!(shared::requeue(b, 0, c, 0, usize::MAX), Ok(0));
    fresh_round_is_exact(b, 2);
    fresh_round_is_exact(c, 1);

    // A waiter killed while it sleeps on its bucket's bell: counted among the bell's sleepers
    // (the ring's hint) until a new process claims its dead process's slot, whose reap counts
    // it out (`park::forget_sleep`).
    let w = waiter(b, LONG);
    await_queued(b, 1);
    if common::sleeps_in_waitv(w, Duration::from_secs(5)) {
        assert_eq!(bell_sleepers(), 1);
        // SAFETY: our child, not yet reaped.
        assert_eq!(unsafe { libc::kill(w, libc::SIGKILL) }, 0);
        assert_eq!(reap(w), -libc::SIGKILL);
        assert_eq!(bell_sleepers(), 1, "nobody has reaped the dead slot yet");
        // A new process takes the lowest free slot: the dead one.
        assert_eq!(reap(child(|| shared::wake(c, 1).map_or(2, |_| 0))), 0);
        assert_eq!(bell_sleepers(), 0, "the reap counted the dead sleeper out");
    } else {
        eprintln!("the waiter does not sleep in futex_waitv here; woken plainly");
        assert_eq!(shared::wake(b, 1), Ok(1));
        assert_eq!(reap(w), 0);
    }
    fresh_round_is_exact(b, 2);

    // A waiter that timed out dies while taking itself out: rebuilt, found dead, not counted.
    dies_at("cancelled", || shared::wait(c, 0, deadline(Duration::from_millis(20))).map_or(2, |()| 0));
    assert_eq!(shared::wake(c, 1), Ok(0));
    fresh_round_is_exact(c, 2);
    fresh_round_is_exact(a, 1);
}
