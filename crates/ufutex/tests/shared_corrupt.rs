//! A corrupt shared table gives errors, never undefined behaviour, a crash or a hang: child
//! processes scribble random bytes over every region of a live segment (header, filter, process
//! slots, buckets, waiter records) and keep operating on it; a new process opening a segment
//! whose header was scribbled over gets `ENOTRECOVERABLE` or a working table. A child that
//! crashes (a signal) or hangs (killed by the watchdog) fails the test.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, await_until, brief, child, deadline, reap_within, shared_anon, Rng};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::WaitEntry;

/// Operations that must each end (Ok or an error) on whatever the segment holds.
fn operate(words: &[&'static AtomicU32; 3], rounds: u32) {
    for i in 0..rounds {
        let w = words[i as usize % 3];
        let t = std::thread::spawn(move || shared::wait(w, 0, deadline(Duration::from_millis(5))));
        let _ = shared::wake(w, 1);
        let _ = shared::requeue(w, 0, words[(i as usize + 1) % 3], 0, 1);
        let _ = shared::waitv(
            &[WaitEntry::new(words[0], 0), WaitEntry::new(words[2], 0)],
            deadline(Duration::from_millis(1)),
        );
        let r = t.join().expect("a waiter panicked");
        if let Err(e) = r {
            assert!(e != SharedError::WouldBlock, "the word never changes");
        }
    }
}

#[test]
fn a_scribbled_segment_gives_errors_never_a_crash_or_a_hang() {
    let root = std::env::temp_dir().join(format!("ufutex-corrupt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir(&root).unwrap();
    std::env::set_var("UFUTEX_SHARED_PROCS", "4");
    std::env::set_var("UFUTEX_SHARED_WAITERS", "16");
    std::env::set_var("UFUTEX_SHARED_BUCKETS", "8");
    let p = shared_anon(3 * 4096);
    // SAFETY: a live mapping, never unmapped; aligned offsets.
    let words: [&'static AtomicU32; 3] = unsafe { [at(p, 0), at(p, 4096), at(p, 8192 + 4)] };
    let trials: u64 = std::env::var("UFUTEX_CORRUPT_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let mut errors = 0;
    for trial in 0..trials {
        let dir = root.join(trial.to_string());
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let file = dir.join("table");
        let pid = child(move || {
            std::env::set_var("UFUTEX_SHARED_DIR", &dir);
            operate(&words, 3);
            let f = std::fs::OpenOptions::new().read(true).write(true).open(&file).unwrap();
            let len = f.metadata().unwrap().len();
            let mut s = Rng::new(trial + 1);
            for _ in 0..1 + trial % 64 {
                // Mostly where the live structures are: the first pages (header, filter, slots,
                // buckets) and the first records.
                let at = match s.next() % 4 {
                    0 => s.next() % 4096,
                    1 => 4096 + s.next() % (5 * 4096),
                    _ => s.next() % len,
                };
                let bytes = s.next().to_le_bytes();
                let n = 1 + (s.next() % 8) as usize;
                f.write_at(&bytes[..n], at).unwrap();
            }
            operate(&words, 4);
            0
        });
        match reap_within(pid, Duration::from_secs(20)) {
            Some(0) => {}
            None => panic!("trial {trial}: a process hung on a corrupt segment"),
            Some(st) if st < 0 => panic!("trial {trial}: a process died of signal {} on a corrupt segment", -st),
            Some(st) => {
                errors += 1;
                eprintln!("trial {trial}: exit {st}");
            }
        }
    }
    assert_eq!(errors, 0, "operations panicked (a test assertion, not a crash)");
    // A new process opening a segment whose header is scribbled over: an error or a table.
    for trial in 0..16u64 {
        let dir = root.join(format!("header-{trial}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let d = dir.clone();
        let pid = child(move || {
            std::env::set_var("UFUTEX_SHARED_DIR", &d);
            shared::wake(words[0], 1).map_or(1, |_| 0)
        });
        assert_eq!(reap_within(pid, Duration::from_secs(20)), Some(0));
        let f = std::fs::OpenOptions::new().write(true).open(dir.join("table")).unwrap();
        f.write_at(&(trial * 0x0101_0101_0101_0101 + 1).to_le_bytes(), 8 * (trial % 4)).unwrap();
        let pid = child(move || {
            std::env::set_var("UFUTEX_SHARED_DIR", &dir);
            match shared::wake(words[0], 1) {
                Ok(_) => 0,
                Err(SharedError::NotRecoverable) => 0,
                Err(_) => 1,
            }
        });
        assert_eq!(reap_within(pid, Duration::from_secs(20)), Some(0), "header trial {trial}");
    }
    // Queue links scribbled over heal: the wake that finds them corrupt fails and marks the
    // bucket, and the next lock holder rebuilds the queue from the records, which are intact.
    let dir = root.join("heal");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let d = dir.clone();
    let healer = child(move || {
        std::env::set_var("UFUTEX_SHARED_DIR", &d);
        let w = words[0];
        let t = std::thread::spawn(move || shared::wait(w, 0, deadline(Duration::from_secs(20))));
        while shared::requeue(w, 0, w, 0, 1) != Ok(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The layout of `shared/segment.rs` with 4 process slots and 8 buckets: every bucket's
        // queue head (64 bytes into its 128) points into nowhere.
        let buckets_at = 4096 + 4 * 4096 + 4096;
        let f = std::fs::OpenOptions::new().write(true).open(d.join("table")).unwrap();
        for b in 0..8u64 {
            f.write_at(&0x00ab_cdefu32.to_le_bytes(), buckets_at + 128 * b + 64).unwrap();
        }
        let first = shared::wake(w, 1);
        let second = shared::wake(w, 1);
        match (first, second, t.join().unwrap()) {
            (Err(SharedError::NotRecoverable), Ok(1), Ok(())) => 0,
            other => {
                eprintln!("heal: {other:?}");
                1
            }
        }
    });
    assert_eq!(reap_within(healer, Duration::from_secs(30)), Some(0), "corrupt links did not heal");
    // A segment of another version (or with a corrupt header) is refused while a process that
    // claimed a slot in it lives, and started afresh once none does.
    let dir = root.join("version");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (d, go, ready) = (dir.clone(), words[1], words[2]);
    let holder = child(move || {
        std::env::set_var("UFUTEX_SHARED_DIR", &d);
        // Claim a slot (a wait that queues and times out soon), say so, then hold it until told
        // to go (or the test has long failed: never left behind).
        let _ = shared::wait(go, 0, brief());
        ready.store(1, std::sync::atomic::Ordering::Release);
        await_until("told to go", || go.load(std::sync::atomic::Ordering::Acquire) != 0);
        0
    });
    let opener = |expect: Result<usize, SharedError>| {
        let d = dir.clone();
        let pid = child(move || {
            std::env::set_var("UFUTEX_SHARED_DIR", &d);
            i32::from(shared::wake(words[0], 1) != expect)
        });
        reap_within(pid, Duration::from_secs(20))
    };
    let file = dir.join("table");
    let t = Instant::now();
    while ready.load(std::sync::atomic::Ordering::Acquire) == 0 {
        assert!(t.elapsed() < Duration::from_secs(20), "the holder never claimed its slot");
        std::thread::sleep(Duration::from_millis(1));
    }
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.write_at(&99u32.to_le_bytes(), 8).unwrap(); // the version field
    assert_eq!(opener(Err(SharedError::NotRecoverable)), Some(0), "a live process's segment is never pulled away");
    go.store(1, std::sync::atomic::Ordering::Release);
    assert_eq!(reap_within(holder, Duration::from_secs(20)), Some(0));
    assert_eq!(opener(Ok(0)), Some(0), "a segment nobody uses is started afresh");
    let _ = std::fs::remove_dir_all(&root);
}
