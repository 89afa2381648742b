//! SIGKILL at random moments over a namespace: worker processes create, look up, use and remove
//! objects under colliding keys (a 64-slot namespace) while the test kills them at random and
//! starts new ones. Afterwards the namespace is consistent: the live count equals the objects
//! found, every object is found by its key, each key once, and creating and removing work.
//!
//! `UFUTEX_STRESS_SECS` sets how long the killing goes on (default 2 s).
#![cfg(not(ufutex_loom))]

mod common;

use common::{child, Rng};
use std::collections::HashSet;
use std::time::Duration;
use ufutex::named::{NamedError, Namespace, Open};

fn worker() -> i32 {
    let Ok(ns) = Namespace::open("kills") else { return 3 };
    // SAFETY: getpid has no arguments.
    let mut s = Rng::new(unsafe { libc::getpid() } as u64);
    loop {
        let r = s.next();
        let key = r % 40;
        let res = match (r >> 8) % 6 {
            0 | 1 => ns.semaphore(key, Open::Create, 1).and_then(|(sem, _)| sem.post(1)).map(drop),
            2 => ns.semaphore(key, Open::Existing, 0).and_then(|(sem, _)| sem.try_wait()).map(drop),
            3 => ns.remove(key),
            4 => ns.mutex(key + 100, Open::Create).and_then(|(m, _)| {
                m.lock(Some(Duration::from_millis(5).into()))?;
                m.unlock()
            }),
            _ => ns.event(key + 200, Open::Create, false, false).and_then(|(e, _)| e.set()),
        };
        match res {
            Ok(()) | Err(NamedError::NotFound | NamedError::Removed | NamedError::Invalid) => {}
            Err(NamedError::Shared(ufutex::shared::SharedError::TimedOut)) => {}
            Err(_) => return 2,
        }
    }
}

#[test]
fn random_kills_leave_the_namespace_consistent() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "128");
    let secs: f64 = common::stress_secs() as f64;
    let ns = Namespace::open("kills").unwrap();
    let mut workers: Vec<libc::pid_t> = (0..4).map(|_| child(worker)).collect();
    let kills = common::kill_at_random(&mut workers, secs, 0x1234_5678, || child(worker));
    eprintln!("{kills} kills");
    // Any change takes the changers' lock over from a dead worker and finishes its change.
    ns.semaphore(1000, Open::CreateNew, 0).unwrap();
    ns.remove(1000).unwrap();
    let objects = ns.objects();
    assert_eq!(objects.len(), ns.len(), "the live count equals the objects found");
    let mut keys = HashSet::new();
    for o in &objects {
        assert!(keys.insert(o.key), "key {} twice", o.key);
    }
    // Every object can be opened by its key and removed; then nothing is left.
    for o in objects {
        let found = match o.kind {
            ufutex::named::Kind::Semaphore => ns.semaphore(o.key, Open::Existing, 0).map(|r| r.1),
            ufutex::named::Kind::Mutex => ns.mutex(o.key, Open::Existing).map(|r| r.1),
            ufutex::named::Kind::Event => ns.event(o.key, Open::Existing, false, false).map(|r| r.1),
            ufutex::named::Kind::Word => ns.word(o.key, Open::Existing).map(|r| r.1),
            ufutex::named::Kind::Word8 => ns.word_of::<std::sync::atomic::AtomicU8>(o.key, Open::Existing).map(|r| r.1),
            ufutex::named::Kind::Word16 => {
                ns.word_of::<std::sync::atomic::AtomicU16>(o.key, Open::Existing).map(|r| r.1)
            }
            ufutex::named::Kind::Word64 => {
                ns.word_of::<std::sync::atomic::AtomicU64>(o.key, Open::Existing).map(|r| r.1)
            }
            other => panic!("a kind this test does not make: {other:?}"),
        };
        assert_eq!(found, Ok(true), "{o:?}");
        ns.remove(o.key).unwrap();
    }
    assert!(ns.is_empty());
    assert!(ns.objects().is_empty());
    let _ = Namespace::unlink("kills");
}
