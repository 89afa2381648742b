//! A namespace file of another layout version (an older library's) or with a corrupt header is
//! made afresh when no process has it mapped, and refused (NotRecoverable) while one does.
#![cfg(not(ufutex_loom))]

mod common;

use common::{child, reap};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use ufutex::named::{NamedError, Namespace, Open};
use ufutex::shared::SharedError;

const NS: &str = "version";

fn ns_file() -> std::path::PathBuf {
    std::path::PathBuf::from(std::env::var_os("UFUTEX_SHARED_DIR").unwrap()).join(format!("ns-{NS}"))
}

/// The namespace file's layout version (bytes 8..12 of its header: after the magic).
fn version() -> u32 {
    let f = std::fs::File::open(ns_file()).unwrap();
    let mut b = [0u8; 4];
    f.read_exact_at(&mut b, 8).unwrap();
    u32::from_ne_bytes(b)
}

/// Write `version` over the namespace file's header.
fn set_version(version: u32) {
    let f = std::fs::OpenOptions::new().write(true).open(ns_file()).unwrap();
    f.write_all_at(&version.to_ne_bytes(), 8).unwrap();
}

#[test]
fn another_version_is_made_afresh_when_unused() {
    let _table = common::isolated_shared_table();
    std::env::set_var("UFUTEX_NAMED_SLOTS", "64");
    // Made by one process, which ends: then it reads as an older library's.
    let maker = child(|| {
        let Ok(ns) = Namespace::open(NS) else { return 1 };
        ns.semaphore(7, Open::CreateNew, 3).map_or(2, |_| 0)
    });
    assert_eq!(reap(maker), 0);
    let current = version();
    set_version(current - 1);
    // While a process has it mapped, it is refused; not made afresh under that process.
    let step = common::shared_word();
    let user = child(|| {
        // (Mapped before the version changes: a process checks a file once.)
        let Ok(_ns) = Namespace::open(NS) else { return 1 };
        step.store(1, Ordering::SeqCst);
        let t = Instant::now();
        while step.load(Ordering::SeqCst) != 2 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(1));
        }
        0
    });
    set_version(current);
    let t = Instant::now();
    while step.load(Ordering::SeqCst) != 1 {
        assert!(t.elapsed() < Duration::from_secs(20), "the user never opened it");
        std::thread::sleep(Duration::from_millis(1));
    }
    set_version(current - 1);
    let refused = child(|| match Namespace::open(NS) {
        Err(NamedError::Shared(SharedError::NotRecoverable)) => 0,
        other => {
            eprintln!("{other:?}");
            1
        }
    });
    assert_eq!(reap(refused), 0, "a namespace in use is never pulled away");
    step.store(2, Ordering::SeqCst);
    assert_eq!(reap(user), 0);
    // Nobody uses it now: made afresh, empty, and a ledger file of the old one goes with it.
    let stale = ns_file().with_file_name(format!("ns-{NS}+00000000deadbeef.3"));
    std::fs::write(&stale, b"old").unwrap();
    let ns = Namespace::open(NS).unwrap();
    assert!(!stale.exists(), "the old namespace's ledger is removed");
    assert!(ns.is_empty());
    assert_eq!(ns.semaphore(7, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    ns.semaphore(7, Open::CreateNew, 1).unwrap();
    Namespace::unlink(NS).unwrap();
}
