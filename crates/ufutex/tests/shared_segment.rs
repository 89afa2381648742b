//! The shared table's segment: who may use it (a regular file of the user's, no group or other
//! permission bits, not a symlink — else `EACCES`) and its capacities (process slots, waiter
//! records per process — `ENOSPC` when reached). Each scenario runs in a child process of its
//! own, which opens its own table directory (a process maps its table once).
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, await_until, brief, child, deadline, reap, shared_anon};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::WaitEntry;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ufutex-seg-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// In a child using the table in `dir`: the result of a shared wake of a word nobody waits on.
fn wake_result(dir: &std::path::Path) -> i32 {
    let dir = dir.to_path_buf();
    let pid = child(move || {
        std::env::set_var("UFUTEX_SHARED_DIR", &dir);
        let w = AtomicU32::new(0);
        match shared::wake(&w, 1) {
            Ok(_) => 0,
            Err(e) => e.errno(),
        }
    });
    reap(pid)
}

#[test]
fn a_segment_not_safely_owned_is_refused() {
    // Its children set the environment, as the other test's do.
    let _alone = common::env_fork_lock();
    // Group or other permission bits.
    let dir = fresh_dir("mode");
    std::fs::write(dir.join("table"), b"").unwrap();
    std::fs::set_permissions(dir.join("table"), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(wake_result(&dir), libc::EACCES);
    // A symlink where the segment should be (to a file we own, even).
    let dir2 = fresh_dir("link");
    std::fs::write(dir2.join("target"), b"").unwrap();
    std::fs::set_permissions(dir2.join("target"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(dir2.join("target"), dir2.join("table")).unwrap();
    assert_eq!(wake_result(&dir2), libc::EACCES);
    // Owned by another user (only root can arrange that).
    // SAFETY: geteuid has no arguments.
    if unsafe { libc::geteuid() } == 0 {
        let dir3 = fresh_dir("owner");
        let f = dir3.join("table");
        std::fs::write(&f, b"").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
        assert_eq!(wake_result(&dir3), libc::EACCES);
        let _ = std::fs::remove_dir_all(&dir3);
    }
    // A fresh directory: the table is created 0600.
    let dir4 = fresh_dir("fresh");
    assert_eq!(wake_result(&dir4), 0);
    let mode = std::fs::metadata(dir4.join("table")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    for d in [dir, dir2, dir4] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn capacities_give_enospc_and_come_back() {
    // Its child sets the environment (see the lock).
    let _alone = common::env_fork_lock();
    let dir = fresh_dir("capacity");
    let p = shared_anon(4096);
    // SAFETY: a live mapping; aligned offsets.
    let (hold, release): (&'static AtomicU32, &'static AtomicU32) = unsafe { (at(p, 0), at(p, 64)) };
    let d = dir.clone();
    let pid = child(move || {
        std::env::set_var("UFUTEX_SHARED_DIR", &d);
        std::env::set_var("UFUTEX_SHARED_PROCS", "2");
        std::env::set_var("UFUTEX_SHARED_WAITERS", "4");
        // Our slot (a wait that queues, then times out soon, claims it).
        if shared::wait(hold, 0, brief()) != Err(SharedError::TimedOut) {
            return 1;
        }
        // Four records per process: a waitv of five shared entries cannot be queued.
        let bytes: Vec<AtomicU8> = (0..5).map(|_| AtomicU8::new(0)).collect();
        let v: Vec<WaitEntry<'_>> = bytes.iter().map(|b| WaitEntry::new(b, 0)).collect();
        if shared::waitv(&v, brief()) != Err(SharedError::NoSpace) {
            return 2;
        }
        // With its deadline passed, too: the records are counted before the timer is looked at
        // (as the kernel allocates before it does).
        if shared::waitv(&v, deadline(Duration::ZERO)) != Err(SharedError::NoSpace) {
            return 8;
        }
        if shared::waitv(&v[..3], brief()) != Err(SharedError::TimedOut) {
            return 3; // three (plus none held) fit
        }
        // Two slots: a child takes the second; a third process finds none.
        let holder = child(move || {
            let _ = shared::wait(hold, 0, brief());
            release.store(1, Ordering::Release);
            // (Bounded: a failed test never leaves it behind.)
            await_until("told to let go", || release.load(Ordering::Acquire) == 2);
            0
        });
        let t = Instant::now();
        while release.load(Ordering::Acquire) != 1 {
            if t.elapsed() > common::CAP {
                return 4;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let third = child(move || match shared::wait(hold, 0, brief()) {
            Err(SharedError::NoSpace) => 0,
            _ => 1,
        });
        if reap(third) != 0 {
            return 5;
        }
        // Its holder gone, the slot is claimed again (reaped from the dead).
        release.store(2, Ordering::Release);
        if reap(holder) != 0 {
            return 6;
        }
        let fourth = child(move || match shared::wait(hold, 0, brief()) {
            Err(SharedError::TimedOut) => 0,
            _ => 1,
        });
        if reap(fourth) != 0 {
            return 7;
        }
        0
    });
    assert_eq!(reap(pid), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
