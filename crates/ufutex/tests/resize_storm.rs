//! A resize storm loses no wakeup: thousands of live resizes (every size from 2 to the large
//! table, back and forth, so retired tables are reused) while 8 threads wait, waitv, wake and
//! requeue. Every wait or waitv that returns `Ok` was counted by exactly one wake or requeue,
//! and nothing is left queued. The same with NUMA pairs spread over virtual nodes, so waiters
//! also migrate between node tables while those tables are resized.
//!
//! `UFUTEX_STORM_RESIZES=N` runs a longer storm (default 3000 resizes each).
#![cfg(not(ufutex_loom))]

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::thread;
use std::time::Duration;
use ufutex::{Domain, DomainConfig, NumaFutex, NumaWaitEntry, Slots, WaitEntry, WaitError};

fn resizes() -> usize {
    std::env::var("UFUTEX_STORM_RESIZES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

const SIZES: [Slots; 7] =
    [Slots::Fixed(2), Slots::Fixed(4), Slots::Fixed(64), Slots::Fixed(8), Slots::Large, Slots::Auto, Slots::Fixed(2)];

fn soon() -> Option<ufutex::Deadline> {
    Some(Duration::from_micros(300).into())
}

/// A tiny per-thread xorshift, so the storm's choices differ between threads without a crate.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Tallies: `oks` = waits that returned Ok, `counted` = waiters wakes and requeues dequeued
/// with a wake (moves are not wakes: a moved waiter is counted when woken from its new word).
#[derive(Default)]
struct Tally {
    oks: AtomicU64,
    counted: AtomicU64,
}

#[test]
fn resize_storm_loses_no_wakeup() {
    let d = Domain::new(DomainConfig::new().slots(Slots::Fixed(2))).unwrap();
    // The shared words always hold 0: a waiter sleeps until dequeued or timed out.
    let shared: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
    let tally = Tally::default();
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        // 3 waiters.
        for _ in 0..3 {
            s.spawn(|| {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ thread_id());
                while !stop.load(Ordering::Relaxed) {
                    match d.wait(&shared[rng.below(4)], 0, soon()) {
                        Ok(()) => _ = tally.oks.fetch_add(1, Ordering::Relaxed),
                        Err(WaitError::TimedOut) => {}
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            });
        }
        // 2 waitv threads: one shared word (the only entry anyone wakes, so a waitv is counted
        // at most once) among words of other sizes that nobody wakes.
        for _ in 0..2 {
            s.spawn(|| {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ thread_id());
                let (mine8, mine16, mine64) = (AtomicU8::new(0), AtomicU16::new(0), AtomicU64::new(0));
                while !stop.load(Ordering::Relaxed) {
                    let entries = [
                        WaitEntry::new(&mine8, 0),
                        WaitEntry::new(&shared[rng.below(4)], 0),
                        WaitEntry::new(&mine16, 0),
                        WaitEntry::new(&mine64, 0),
                    ];
                    match d.waitv(&entries, soon()) {
                        Ok(1) => _ = tally.oks.fetch_add(1, Ordering::Relaxed),
                        Err(WaitError::TimedOut) => {}
                        other => panic!("unexpected {other:?}"),
                    }
                }
            });
        }
        // 2 wakers.
        for _ in 0..2 {
            s.spawn(|| {
                let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ thread_id());
                while !stop.load(Ordering::Relaxed) {
                    let n = if rng.below(4) == 0 { usize::MAX } else { 1 };
                    let woken = d.wake(&shared[rng.below(4)], n);
                    tally.counted.fetch_add(woken as u64, Ordering::Relaxed);
                    thread::yield_now();
                }
            });
        }
        // 1 requeuer: either wakes one (nr_requeue 0: the result is all wakes) or moves some
        // (nr_wake 0: the result is all moves).
        s.spawn(|| {
            let mut rng = Rng(0x94D0_49BB_1331_11EB);
            while !stop.load(Ordering::Relaxed) {
                let (from, to) = (&shared[rng.below(4)], &shared[rng.below(4)]);
                if rng.below(2) == 0 {
                    let woken = d.requeue(from, 0, to, 1, 0).unwrap();
                    tally.counted.fetch_add(woken as u64, Ordering::Relaxed);
                } else {
                    d.requeue(from, 0, to, 0, 2).unwrap();
                }
                thread::yield_now();
            }
        });
        s.spawn(|| resize_then_stop(&d, &stop));
    });
    tally.check(&d);
}

/// The same storm over NUMA pairs on 3 virtual nodes: pairs bound to different nodes, a
/// requeuer moving waiters between node tables, waitv entries spanning nodes, and a resizer
/// resizing every node's table.
#[test]
fn numa_resize_storm_loses_no_wakeup() {
    let d = Domain::new(DomainConfig::new().virtual_nodes(3).slots(Slots::Fixed(2))).unwrap();
    let shared: Vec<NumaFutex<AtomicU32>> = (0..4).map(|i| NumaFutex::with_node(0, i % 3)).collect();
    let tally = Tally::default();
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ thread_id());
                while !stop.load(Ordering::Relaxed) {
                    match d.wait_numa(&shared[rng.below(4)], 0, soon()) {
                        Ok(()) => _ = tally.oks.fetch_add(1, Ordering::Relaxed),
                        Err(ufutex::NumaError::Wait(WaitError::TimedOut)) => {}
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ thread_id());
                // Nobody wakes these; they sit on other nodes than most shared pairs.
                let mine: Vec<NumaFutex<AtomicU64>> = (0..3).map(|n| NumaFutex::with_node(0, n)).collect();
                while !stop.load(Ordering::Relaxed) {
                    let entries = [
                        NumaWaitEntry::new(&mine[0], 0),
                        NumaWaitEntry::new(&mine[1], 0),
                        NumaWaitEntry::new(&shared[rng.below(4)], 0),
                        NumaWaitEntry::new(&mine[2], 0),
                    ];
                    match d.waitv_numa(&entries, soon()) {
                        Ok(2) => _ = tally.oks.fetch_add(1, Ordering::Relaxed),
                        Err(ufutex::NumaError::Wait(WaitError::TimedOut)) => {}
                        other => panic!("unexpected {other:?}"),
                    }
                }
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ thread_id());
                while !stop.load(Ordering::Relaxed) {
                    let n = if rng.below(4) == 0 { usize::MAX } else { 1 };
                    let woken = d.wake_numa(&shared[rng.below(4)], n).unwrap();
                    tally.counted.fetch_add(woken as u64, Ordering::Relaxed);
                    thread::yield_now();
                }
            });
        }
        s.spawn(|| {
            let mut rng = Rng(0x94D0_49BB_1331_11EB);
            while !stop.load(Ordering::Relaxed) {
                let (from, to) = (&shared[rng.below(4)], &shared[rng.below(4)]);
                if rng.below(2) == 0 {
                    let woken = d.requeue_numa(from, 0, to, 1, 0).unwrap();
                    tally.counted.fetch_add(woken as u64, Ordering::Relaxed);
                } else {
                    d.requeue_numa(from, 0, to, 0, 2).unwrap();
                }
                thread::yield_now();
            }
        });
        s.spawn(|| resize_then_stop(&d, &stop));
    });
    tally.check(&d);
    assert_eq!(d.tables_in_use(), 4, "the plain table and one per virtual node");
}

/// The resizer: cycles through the sizes, then ends the storm.
fn resize_then_stop(d: &Domain, stop: &AtomicBool) {
    for i in 0..resizes() {
        d.set_slots(SIZES[i % SIZES.len()]).unwrap();
        if i % 16 == 0 {
            thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
}

impl Tally {
    /// Every wait that returned Ok was counted by exactly one waker; nothing is left queued.
    fn check(&self, d: &Domain) {
        let (oks, counted) = (self.oks.load(Ordering::Relaxed), self.counted.load(Ordering::Relaxed));
        eprintln!("oks {oks} counted {counted}");
        assert_eq!(oks, counted);
        assert_eq!(d.queued_waiters(), 0);
        assert_eq!(d.homed_waiters(), 0);
    }
}

fn thread_id() -> u64 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::gettid() }) as u64
}
