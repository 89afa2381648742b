//! Domain sizing: `set_slots` mirrors `prctl(PR_FUTEX_HASH)` on the default domain case by case
//! (the final `Large` switch has its own binary, `domain_large_final.rs`); a 2-slot table keeps
//! a thousand keys apart; threads arriving never change a hand-set size, and `Auto` resumes
//! automatic sizing; repeated resizes do not grow memory.
#![cfg(not(ufutex_loom))]

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;
use ufutex::{Domain, DomainConfig, Slots, WaitEntry, WaitError};

fn errno(r: io::Result<()>) -> Option<i32> {
    r.err().map(|e| e.raw_os_error().expect("an errno"))
}

/// The prctl mirror, case by case, on the process default domain (this is the only test of
/// this binary that touches it).
#[test]
fn default_domain_mirrors_prctl() {
    let d = Domain::default_domain();
    assert_eq!(d.policy(), Slots::Auto, "the default domain sizes itself");
    assert!(d.slots() >= 16 && d.slots().is_power_of_two());
    // Not a power of two ≥ 2: EINVAL, and nothing changes.
    for bad in [0, 1, 3, 6, 100, usize::MAX] {
        assert_eq!(errno(d.set_slots(Slots::Fixed(bad))), Some(libc::EINVAL), "Fixed({bad})");
        assert_eq!(d.policy(), Slots::Auto);
    }
    // A power of two fixes the size and stops automatic sizing.
    for n in [2, 16, 4096, 2] {
        d.set_slots(Slots::Fixed(n)).unwrap();
        assert_eq!((d.slots(), d.policy()), (n, Slots::Fixed(n)));
    }
    // Too big to allocate: ENOMEM, nothing changes.
    assert_eq!(errno(d.set_slots(Slots::Fixed(1 << 40))), Some(libc::ENOMEM));
    assert_eq!((d.slots(), d.policy()), (2, Slots::Fixed(2)));
    // Auto resumes automatic sizing (16 ≤ 4 × threads).
    d.set_slots(Slots::Auto).unwrap();
    assert_eq!(d.policy(), Slots::Auto);
    assert!(d.slots() >= 16);
    // The free functions keep working on the resized default table.
    let w = AtomicU32::new(0);
    thread::scope(|s| {
        let t = s.spawn(|| {
            while w.load(Ordering::Acquire) == 0 {
                let _ = ufutex::wait(&w, 0, Some(Duration::from_millis(50).into()));
            }
        });
        d.set_slots(Slots::Fixed(8)).unwrap();
        w.store(1, Ordering::Release);
        ufutex::wake(&w, 1);
        t.join().unwrap();
    });
    assert_eq!(d.queued_waiters(), 0);
}

/// 1024 keys on a 2-slot table (about 512 per bucket): a wake of one key dequeues exactly the
/// waiter of that key, whichever bucket neighbours it has; a wake of a key nobody waits on
/// wakes nobody.
#[test]
fn a_thousand_keys_on_two_slots_stay_apart() {
    let d = Domain::new(DomainConfig::new().slots(Slots::Fixed(2))).unwrap();
    let words: Vec<AtomicU32> = (0..1024).map(|_| AtomicU32::new(0)).collect();
    let others: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
    for target in [0usize, 1, 511, 512, 777, 1023] {
        let ready = AtomicBool::new(false);
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                let entries: Vec<WaitEntry<'_>> = words.iter().map(|w| WaitEntry::new(w, 0)).collect();
                ready.store(true, Ordering::Release);
                d.waitv(&entries, None)
            });
            while !ready.load(Ordering::Acquire) || d.queued_waiters() < words.len() {
                thread::yield_now();
            }
            for o in &others {
                assert_eq!(d.wake(o, usize::MAX), 0, "a key nobody waits on");
            }
            assert_eq!(d.queued_waiters(), words.len());
            assert_eq!(d.wake(&words[target], usize::MAX), 1);
            assert_eq!(waiter.join().unwrap(), Ok(target));
        });
        assert_eq!(d.queued_waiters(), 0);
    }
}

/// Many keys on 2 slots under traffic: 4 threads each cycle through their own 256 words; every
/// wait that returns Ok was counted by exactly one wake.
#[test]
fn many_keys_on_two_slots_lose_no_wakeup() {
    let d = Domain::new(DomainConfig::new().slots(Slots::Fixed(2))).unwrap();
    let words: Vec<AtomicU32> = (0..1024).map(|_| AtomicU32::new(0)).collect();
    let (oks, woken) = (AtomicU64::new(0), AtomicU64::new(0));
    thread::scope(|s| {
        for t in 0..4 {
            let (d, words, oks) = (&d, &words, &oks);
            s.spawn(move || {
                for w in words.iter().skip(t).step_by(4) {
                    while w.load(Ordering::Acquire) == 0 {
                        if d.wait(w, 0, Some(Duration::from_millis(20).into())).is_ok() {
                            oks.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        for w in &words {
            w.store(1, Ordering::Release);
            woken.fetch_add(d.wake(w, usize::MAX) as u64, Ordering::Relaxed);
        }
    });
    assert_eq!(oks.load(Ordering::Relaxed), woken.load(Ordering::Relaxed));
    assert_eq!(d.queued_waiters(), 0);
}

/// 64 threads arriving on a domain with a hand-set size leave it alone; switching it back to
/// `Auto` resumes automatic sizing (4 × the threads using it), and an `Auto` domain grows as
/// threads arrive.
#[test]
fn arriving_threads_leave_a_hand_set_size_alone() {
    let fixed = Domain::new(DomainConfig::new().slots(Slots::Fixed(4))).unwrap();
    let auto = Domain::new(DomainConfig::new()).unwrap();
    assert_eq!(auto.slots(), 16);
    let w = AtomicU32::new(0);
    let all_waited = Barrier::new(65);
    let checked = Barrier::new(65);
    thread::scope(|s| {
        for _ in 0..64 {
            s.spawn(|| {
                let soon = || Some(Duration::from_micros(10).into());
                assert_eq!(fixed.wait(&w, 0, soon()), Err(WaitError::TimedOut));
                assert_eq!(auto.wait(&w, 0, soon()), Err(WaitError::TimedOut));
                all_waited.wait();
                checked.wait(); // stay alive (and counted) while the sizes are checked
            });
        }
        all_waited.wait();
        assert_eq!((fixed.slots(), fixed.policy()), (4, Slots::Fixed(4)));
        assert!(auto.slots() >= 256, "4 × 64 threads: {}", auto.slots());
        fixed.set_slots(Slots::Auto).unwrap();
        assert_eq!(fixed.policy(), Slots::Auto);
        assert!(fixed.slots() >= 256, "Auto resumed: {}", fixed.slots());
        checked.wait();
    });
}

/// 10^5 resizes (through every size and policy, with waiters queued) do not grow the memory a
/// domain holds: retired tables are reused.
#[test]
fn set_slots_cycles_do_not_grow_memory() {
    let d = Arc::new(Domain::new(DomainConfig::new().slots(Slots::Fixed(2))).unwrap());
    let cycle = [Slots::Fixed(2), Slots::Fixed(8), Slots::Auto, Slots::Fixed(64), Slots::Large, Slots::Fixed(4)];
    let (w8, w64) = (Arc::new(AtomicU8::new(0)), Arc::new(AtomicU64::new(0)));
    let waiters: Vec<_> = (0..2)
        .map(|i| {
            let (d, w8, w64) = (d.clone(), w8.clone(), w64.clone());
            thread::spawn(move || {
                let mut oks = 0;
                while w8.load(Ordering::Acquire) == 0 {
                    // The waitv's second entry is the stop word: one wake of it counts each
                    // thread at most once.
                    let r = match i {
                        0 => d.wait(&*w8, 0, None),
                        _ => d.waitv(&[WaitEntry::new(&*w64, 0), WaitEntry::new(&*w8, 0)], None).map(drop),
                    };
                    oks += u32::from(r.is_ok());
                }
                oks
            })
        })
        .collect();
    for s in cycle {
        d.set_slots(s).unwrap();
    }
    let footprint = d.memory_footprint();
    for i in 0..100_000 {
        d.set_slots(cycle[i % cycle.len()]).unwrap();
    }
    assert_eq!(d.memory_footprint(), footprint);
    w8.store(1, Ordering::Release);
    let woken = d.wake(&*w8, usize::MAX);
    let oks: u32 = waiters.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(oks as usize, woken);
    assert_eq!(d.queued_waiters(), 0);
}
