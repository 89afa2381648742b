//! A namespace that grows: made with 32 slots, it takes thousands of objects by adding levels,
//! while another process and other threads look up the objects made before (always found, the
//! same object), find the new ones as they appear (mapping the new levels on demand), and a
//! waiter sleeping on an early object is woken after the growth. One test, forks.
#![cfg(not(ufutex_loom))]

mod common;

use common::{child, reap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use ufutex::named::{NamedError, Namespace, Open};

const NS: &str = "grow";
const EARLY: u64 = 16;
const LATER: u64 = 6000;
const LONG: Duration = Duration::from_secs(20);

#[test]
fn a_namespace_grows_while_it_is_used() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "32");
    let ns = Namespace::open(NS).unwrap();
    assert_eq!(ns.capacity(), 32);
    for k in 0..EARLY {
        ns.semaphore(k, Open::CreateNew, k as u32).unwrap();
    }
    let (sleeper_sem, _) = ns.semaphore(1000, Open::CreateNew, 0).unwrap();
    let (done, rounds) = (common::shared_word(), common::shared_word());
    // Another process: looks the early objects up (and their counts) until told to stop,
    // counting its rounds where this process waits for them; then checks every later one.
    let looker = child(|| {
        let ns = Namespace::open(NS).unwrap();
        while done.load(Ordering::SeqCst) == 0 {
            for k in 0..EARLY {
                match ns.semaphore(k, Open::Existing, 0) {
                    Ok((s, true)) if s.value() == Ok(k as u32) => {}
                    other => {
                        eprintln!("early key {k}: {other:?}");
                        return 1;
                    }
                }
            }
            rounds.fetch_add(1, Ordering::SeqCst);
        }
        for k in 0..LATER {
            if ns.semaphore(10_000 + k, Open::Existing, 0).is_err() {
                eprintln!("later key {k} missing");
                return 2;
            }
        }
        0
    });
    // The looker's lookups span the growth: a round before it starts (here) and one after it
    // ends (below), whenever the scheduler lets the looker run.
    common::await_until("the looker's first round", || rounds.load(Ordering::SeqCst) > 0);
    // A waiter of another process on an object made before the growth.
    let sleeper = child(|| {
        let ns = Namespace::open(NS).unwrap();
        let Ok((s, _)) = ns.semaphore(1000, Open::Existing, 0) else { return 1 };
        match s.wait(common::deadline(LONG)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("sleeper: {e:?}");
                2
            }
        }
    });
    // Threads of this process look up too, racing the growth for the new levels' mappings.
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                let mut found = 0;
                while !stop.load(Ordering::Relaxed) {
                    for k in (0..LATER).step_by(97) {
                        if let Ok((s, _)) = ns.semaphore(10_000 + k, Open::Existing, 0) {
                            assert_eq!(s.value(), Ok(k as u32 % 7));
                            found += 1;
                        }
                    }
                    for k in 0..EARLY {
                        assert!(ns.semaphore(k, Open::Existing, 0).is_ok(), "early key {k} lost");
                    }
                }
                found
            });
        }
        let _stop = common::StopOnDrop(&stop);
        for k in 0..LATER {
            ns.semaphore(10_000 + k, Open::CreateNew, k as u32 % 7).unwrap();
        }
    });
    assert!(ns.capacity() >= 2 * (LATER + EARLY) as usize, "grew: {} slots", ns.capacity());
    sleeper_sem.post(1).unwrap();
    assert_eq!(reap(sleeper), 0, "the sleeper on an early object woke");
    let before = rounds.load(Ordering::SeqCst);
    common::await_until("a round of the looker's after the growth", || rounds.load(Ordering::SeqCst) > before + 1);
    done.store(1, Ordering::SeqCst);
    assert_eq!(reap(looker), 0);
    // Everything is there, once; removals across levels; then empty.
    assert_eq!(ns.len(), (EARLY + LATER + 1) as usize);
    assert_eq!(ns.objects().len(), ns.len());
    for k in (0..EARLY).chain(1000..1001).chain((0..LATER).map(|k| 10_000 + k)) {
        ns.remove(k).unwrap();
    }
    assert_eq!(ns.semaphore(5, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    assert!(ns.is_empty());
    Namespace::unlink(NS).unwrap();
}
