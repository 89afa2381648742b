//! Live resizing: waiters queued while `Domain::set_slots` changes the table's size many times
//! are all still woken exactly once; thousands of keys crowded on 2 buckets stay correct
//! (and survive a grow and a shrink); a wake of many whose sleepers queued between resizes (so
//! sleep on the bells of several tables) takes exactly its count; a hand-set size does not
//! change when threads arrive, while an automatic one grows with them; bad sizes are refused;
//! and the memory held by a domain does not grow over 10^4 resizes between a few sizes.
#![cfg(not(ufutex_loom))]

mod common;

use common::{auto, await_queued, await_until, fixed, watchdog, StopOnDrop};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;
use ufutex::{Domain, Slots, WaitEntry, WaitError};

const SIZES: [Slots; 7] = [
    Slots::Fixed(2),
    Slots::Fixed(64),
    Slots::Auto,
    Slots::Fixed(1024),
    Slots::Large,
    Slots::Fixed(8),
    Slots::Fixed(4),
];

/// Resize `d` through `SIZES` until `stop`, counting the resizes made in `made`.
fn resize_until(d: &Domain, stop: &AtomicBool, made: &AtomicUsize) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        d.set_slots(SIZES[n % SIZES.len()]).expect("valid size");
        n += 1;
        made.store(n, Ordering::SeqCst);
    }
}

struct Words {
    w8: AtomicU8,
    w16: AtomicU16,
    w32: AtomicU32,
    w64: AtomicU64,
}

impl Words {
    fn wait(&self, d: &Domain, which: usize, deadline: Option<ufutex::Deadline>) -> Result<(), WaitError> {
        match which % 4 {
            0 => d.wait(&self.w8, 0, deadline),
            1 => d.wait(&self.w16, 0, deadline),
            2 => d.wait(&self.w32, 0, deadline),
            _ => d.wait(&self.w64, 0, deadline),
        }
    }

    fn wake_all_one_each(&self, d: &Domain) -> usize {
        d.wake(&self.w8, 1) + d.wake(&self.w16, 1) + d.wake(&self.w32, 1) + d.wake(&self.w64, 1)
    }
}

#[test]
fn waiters_queued_during_resizes_are_each_woken_once() {
    watchdog();
    let d = fixed(2);
    let words = Words { w8: AtomicU8::new(0), w16: AtomicU16::new(0), w32: AtomicU32::new(0), w64: AtomicU64::new(0) };
    let stop = AtomicBool::new(false);
    let (returned, made) = (AtomicUsize::new(0), AtomicUsize::new(0));
    const N: usize = 24;
    let woken = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let resizer = s.spawn(|| resize_until(&d, &stop, &made));
        // Timed waiters churning through the queues while they move.
        let churn: Vec<_> = (0..2)
            .map(|t| {
                let (d, words) = (&d, &words);
                s.spawn(move || {
                    for i in 0..300 {
                        let r = words.wait(d, i + t, Some(Duration::from_micros(200).into()));
                        assert_eq!(r, Err(WaitError::TimedOut), "nobody wakes before all N are queued");
                    }
                })
            })
            .collect();
        let waiters: Vec<_> = (0..N)
            .map(|i| {
                let (d, words, returned) = (&d, &words, &returned);
                s.spawn(move || {
                    let r = if i % 3 == 0 {
                        // The second entry (mask 0) is queued and migrated but never woken, so
                        // each waiter is woken through exactly one entry: the count is exact.
                        let e = [WaitEntry::new(&words.w8, 0), WaitEntry::new(&words.w64, 0).with_mask(0)];
                        d.waitv(&e, None).map(|_| ())
                    } else {
                        words.wait(d, i, None)
                    };
                    returned.fetch_add(1, Ordering::SeqCst);
                    r
                })
            })
            .collect();
        for t in churn {
            t.join().unwrap();
        }
        // waitv waiters are queued twice (two entries).
        await_queued(&d, N + N / 3);
        // Every waiter moves at least once while queued: a whole resize after they all queued
        // (whenever the scheduler lets the resizer run).
        let before = made.load(Ordering::SeqCst);
        await_until("a resize with every waiter queued", || made.load(Ordering::SeqCst) > before + 1);
        let mut woken = 0;
        while returned.load(Ordering::SeqCst) < N {
            woken += words.wake_all_one_each(&d);
        }
        for t in waiters {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
        stop.store(true, Ordering::SeqCst);
        resizer.join().unwrap();
        woken
    });
    let resizes = made.load(Ordering::SeqCst);
    assert_eq!(woken, N, "each waiter woken exactly once (after {resizes} resizes)");
    assert_eq!(d.queued_waiters(), 0);
    assert_eq!(words.wake_all_one_each(&d), 0);
}

#[test]
fn thousands_of_keys_on_two_slots() {
    watchdog();
    const THREADS: usize = 4;
    const PER: usize = 1000;
    let d = fixed(2);
    let words: Vec<AtomicU32> = (0..THREADS * PER + 1).map(|_| AtomicU32::new(0)).collect();
    let spare = &words[THREADS * PER];
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..THREADS)
            .map(|t| {
                let (d, mine) = (&d, &words[t * PER..(t + 1) * PER]);
                s.spawn(move || d.waitv(&mine.iter().map(|w| WaitEntry::new(w, 0)).collect::<Vec<_>>(), None))
            })
            .collect();
        await_queued(&d, THREADS * PER);
        assert_eq!(d.wake(spare, usize::MAX), 0, "a word nobody waits on, in a crowded bucket");
        assert_eq!(d.slots(), 2);
        // Grow and shrink with everything queued: nothing lost, nothing duplicated.
        d.set_slots(Slots::Fixed(4096)).unwrap();
        assert_eq!(d.queued_waiters(), THREADS * PER);
        d.set_slots(Slots::Fixed(2)).unwrap();
        assert_eq!(d.queued_waiters(), THREADS * PER);
        for (t, th) in ts.into_iter().enumerate() {
            let idx = PER - 1 - 97 * t;
            assert_eq!(d.wake(&words[t * PER + idx], usize::MAX), 1, "thread {t} entry {idx}");
            assert_eq!(th.join().unwrap(), Ok(idx));
            await_queued(&d, (THREADS - 1 - t) * PER);
        }
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn a_wake_of_sleepers_from_several_tables_takes_exactly_its_count() {
    watchdog();
    // Sleepers of one word that queued between resizes sleep on the bells of five tables. A
    // wake of many may ring the bell of the first sleeper's table, which also wakes sleepers
    // it did not take: they must sleep again, still queued. The others get wakes of their own.
    let d = fixed(2);
    let w = AtomicU32::new(0);
    let returned = AtomicUsize::new(0);
    const PER: usize = 3;
    let sizes = [Slots::Fixed(64), Slots::Fixed(8), Slots::Fixed(1024), Slots::Fixed(4), Slots::Fixed(2)];
    std::thread::scope(|s| {
        let mut ts = Vec::new();
        for (round, size) in sizes.into_iter().enumerate() {
            for _ in 0..PER {
                ts.push(s.spawn(|| {
                    let r = d.wait(&w, 0, None);
                    returned.fetch_add(1, Ordering::SeqCst);
                    r
                }));
            }
            await_queued(&d, (round + 1) * PER);
            d.set_slots(size).unwrap();
        }
        // 2 of the first table's 3 (a ring that wakes the third too); 6 across three tables;
        // then the rest.
        common::wake_in_steps(&d, &w, &returned, sizes.len() * PER, &[(2, 13), (6, 7), (usize::MAX, 0)]);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn a_hand_set_size_does_not_change_with_new_threads() {
    watchdog();
    let d = fixed(4);
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..64).map(|_| s.spawn(|| d.wait(&w, 0, None))).collect();
        await_queued(&d, 64);
        assert_eq!(d.slots(), 4);
        assert_eq!(d.policy(), Slots::Fixed(4));
        assert_eq!(d.wake(&w, usize::MAX), 64);
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(d.slots(), 4);
}

#[test]
fn an_automatic_size_grows_with_threads() {
    watchdog();
    let d = auto();
    assert!(d.slots() >= 16);
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let ts: Vec<_> = (0..64).map(|_| s.spawn(|| d.wait(&w, 0, None))).collect();
        await_queued(&d, 64);
        assert!(d.slots() >= 256, "64 threads want at least 4 x 64 buckets, have {}", d.slots());
        assert_eq!(d.policy(), Slots::Auto);
        assert_eq!(d.wake(&w, usize::MAX), 64, "the growth migrated every queued waiter");
        for t in ts {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
}

#[test]
fn bad_sizes_are_refused_and_change_nothing() {
    let d = fixed(8);
    for bad in [0, 1, 3, 6, 100] {
        let e = d.set_slots(Slots::Fixed(bad)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "Fixed({bad})");
        assert!(ufutex::Domain::new(ufutex::DomainConfig::new().slots(Slots::Fixed(bad))).is_err());
    }
    let e = d.set_slots(Slots::Fixed(1 << 40)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOMEM));
    assert_eq!((d.slots(), d.policy()), (8, Slots::Fixed(8)));
    // A private domain may leave Large again.
    d.set_slots(Slots::Large).unwrap();
    d.set_slots(Slots::Fixed(16)).unwrap();
    assert_eq!(d.slots(), 16);
}

#[test]
fn the_default_domain_switched_to_large_stays_large() {
    // The only test in this binary that touches the default domain.
    let dd = Domain::default_domain();
    dd.set_slots(Slots::Fixed(32)).unwrap();
    assert_eq!(dd.slots(), 32);
    dd.set_slots(Slots::Large).unwrap();
    let large = dd.slots();
    assert!(large >= 256 && large.is_power_of_two());
    let e = dd.set_slots(Slots::Fixed(32)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EBUSY));
    assert_eq!(dd.slots(), large);
    let w = AtomicU32::new(0);
    assert_eq!(ufutex::wait(&w, 1, None), Err(WaitError::WouldBlock));
    assert_eq!(ufutex::wait(&w, 0, Some(Duration::ZERO.into())), Err(WaitError::TimedOut));
}

#[test]
fn memory_does_not_grow_over_many_resizes() {
    watchdog();
    let d = fixed(2);
    let (a, b) = (AtomicU64::new(0), AtomicU8::new(0));
    let cycle = [Slots::Fixed(16), Slots::Fixed(256), Slots::Fixed(64), Slots::Fixed(2)];
    std::thread::scope(|s| {
        // Two sleepers ride along through every migration.
        let ta = s.spawn(|| d.wait(&a, 0, None));
        let tb = s.spawn(|| d.wait(&b, 0, None));
        await_queued(&d, 2);
        for &size in &cycle {
            d.set_slots(size).unwrap();
        }
        let after_one_cycle = d.memory_footprint();
        for i in 0..10_000 {
            d.set_slots(cycle[i % cycle.len()]).unwrap();
        }
        assert_eq!(d.memory_footprint(), after_one_cycle, "a resize to a size used before allocates nothing");
        assert_eq!(d.queued_waiters(), 2);
        assert_eq!(d.wake(&a, usize::MAX), 1);
        assert_eq!(d.wake(&b, usize::MAX), 1);
        assert_eq!(ta.join().unwrap(), Ok(()));
        assert_eq!(tb.join().unwrap(), Ok(()));
    });
}
