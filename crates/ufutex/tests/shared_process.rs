//! Process-shared futexes across real processes (ufutex's own shared table): every mapping kind,
//! every size, waitv, requeue, masks, private memory, and waiters killed with SIGKILL.
//!
//! One test runs every scenario in turn, so that no other test thread is running while it forks
//! (a child of a multithreaded process may only rely on what fork keeps consistent). Children
//! report through their exit status; every wait has a deadline, so a bug fails, never hangs.
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, child, deadline, map, memfd, reap, shared_anon, wake_until_one};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
use std::time::{Duration, Instant};
use ufutex::shared::{self, SharedError};
use ufutex::WaitEntry;

const LONG: Duration = Duration::from_secs(20);

#[test]
fn shared_futexes_across_processes() {
    let _table = common::isolated_shared_table();
    // Map the table in the parent before any fork (the children inherit the mapping).
    let warm = AtomicU32::new(0);
    assert_eq!(shared::wake(&warm, 1), Ok(0));

    fork_and_shared_anonymous_memory();
    memfd_at_different_addresses_every_size();
    sysv_segment_attached_twice();
    shm_open_and_a_shared_file();
    private_memory_stays_in_its_process();
    requeue_across_processes();
    requeue_between_mappings();
    waitv_across_processes_mixed_sizes();
    masks_across_processes();
    killed_waiters_are_not_counted();
    mixed_private_and_shared_waitv();
    waiters_are_woken_oldest_first();
    a_read_only_private_file_mapping_meets_the_file();
    a_dead_waiter_never_takes_a_live_ones_wake();
    exec_d_helper();
}

fn fork_and_shared_anonymous_memory() {
    let p = shared_anon(4096);
    // SAFETY: a live page-aligned mapping.
    let w: &AtomicU32 = unsafe { at(p, 64) };
    let pid = child(|| match shared::wait(w, 0, deadline(LONG)) {
        Ok(()) => 0,
        Err(e) => e.errno(),
    });
    wake_until_one(|| shared::wake(w, 1));
    assert_eq!(reap(pid), 0);
}

fn memfd_at_different_addresses_every_size() {
    let fd = memfd(3 * 4096);
    let a = map(3 * 4096, libc::MAP_SHARED, fd, 0);
    // The child maps the second page alone, at an address of its own choosing.
    for (i, size) in [1usize, 2, 4, 8].into_iter().enumerate() {
        let off = 4096 + 8 * i;
        let pid = child(move || {
            let b = map(4096, libc::MAP_SHARED, fd, 4096);
            assert_ne!(b, a);
            let o = off - 4096;
            // SAFETY: `b` maps the page; `o` is aligned for the size.
            let r = unsafe {
                match size {
                    1 => shared::wait(at::<AtomicU8>(b, o), 0, deadline(LONG)),
                    2 => shared::wait(at::<AtomicU16>(b, o), 0, deadline(LONG)),
                    4 => shared::wait(at::<AtomicU32>(b, o), 0, deadline(LONG)),
                    _ => shared::wait(at::<AtomicU64>(b, o), 0, deadline(LONG)),
                }
            };
            r.map_or_else(|e| e.errno(), |()| 0)
        });
        // SAFETY: `a` maps three pages; `off` is aligned for the size.
        wake_until_one(|| unsafe {
            match size {
                1 => shared::wake(at::<AtomicU8>(a, off), 1),
                2 => shared::wake(at::<AtomicU16>(a, off), 1),
                4 => shared::wake(at::<AtomicU32>(a, off), 1),
                _ => shared::wake(at::<AtomicU64>(a, off), 1),
            }
        });
        assert_eq!(reap(pid), 0, "size {size}");
        // The same offset in the first page is another word of the same object: nobody there.
        // SAFETY: as above.
        assert_eq!(shared::wake(unsafe { at::<AtomicU32>(a, 64) }, 1), Ok(0));
    }
}

fn sysv_segment_attached_twice() {
    // SAFETY: plain SysV calls on a fresh private segment, removed once attached.
    let (a, b) = unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
        assert!(id >= 0);
        let a = libc::shmat(id, std::ptr::null(), 0) as *mut u8;
        let b = libc::shmat(id, std::ptr::null(), 0) as *mut u8;
        libc::shmctl(id, libc::IPC_RMID, null_mut());
        (a, b)
    };
    // SAFETY: both attachments map the same live page.
    let (wa, wb): (&AtomicU32, &AtomicU32) = unsafe { (at(a, 128), at(b, 128)) };
    // In one process: a thread waits through one attachment, we wake through the other.
    let t = std::thread::spawn(move || shared::wait(wa, 0, deadline(LONG)));
    wake_until_one(|| shared::wake(wb, 1));
    assert_eq!(t.join().unwrap(), Ok(()));
    // And across processes.
    let pid = child(move || shared::wait(wb, 0, deadline(LONG)).map_or_else(|e| e.errno(), |()| 0));
    wake_until_one(|| shared::wake(wa, 1));
    assert_eq!(reap(pid), 0);
    // A memfd whose inode number equals the segment's shmid is another object: never meets it
    // (the kernel reports the same device and inode for both; the class keeps them apart).
    let fd = memfd(4096);
    let m = map(4096, libc::MAP_SHARED, fd, 0);
    // SAFETY: a live mapping.
    let wm: &AtomicU32 = unsafe { at(m, 128) };
    let t = std::thread::spawn(move || shared::wait(wm, 0, deadline(Duration::from_millis(300))));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(shared::wake(wa, 1), Ok(0));
    assert_eq!(t.join().unwrap(), Err(SharedError::TimedOut));
}

fn shm_open_and_a_shared_file() {
    let name = format!("/ufx-test-{}", std::process::id());
    let cname = std::ffi::CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name; unlinked at once (the descriptor keeps the object).
    let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600) };
    assert!(fd >= 0);
    // SAFETY: as above.
    unsafe { libc::shm_unlink(cname.as_ptr()) };
    // SAFETY: `fd` is ours.
    assert_eq!(unsafe { libc::ftruncate(fd, 4096) }, 0);
    let path = std::env::temp_dir().join(format!("ufx-file-{}", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    file.set_len(8192).unwrap();
    std::fs::remove_file(&path).unwrap();
    use std::os::fd::AsRawFd;
    for (fd, off) in [(fd, 0i64), (file.as_raw_fd(), 4096)] {
        let a = map(4096, libc::MAP_SHARED, fd, off);
        let pid = child(move || {
            let b = map(4096, libc::MAP_SHARED, fd, off);
            // SAFETY: a live mapping of the same page.
            shared::wait(unsafe { at::<AtomicU32>(b, 8) }, 0, deadline(LONG)).map_or_else(|e| e.errno(), |()| 0)
        });
        // SAFETY: as above.
        wake_until_one(|| shared::wake(unsafe { at::<AtomicU32>(a, 8) }, 1));
        assert_eq!(reap(pid), 0);
    }
}

fn private_memory_stays_in_its_process() {
    // A heap word has the same address in parent and child, but is two words.
    let w: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    let pid = child(|| match shared::wait(w, 0, deadline(Duration::from_millis(400))) {
        Err(SharedError::TimedOut) => 0,
        other => 10 + other.is_ok() as i32,
    });
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(shared::wake(w, 1), Ok(0));
    assert_eq!(reap(pid), 0);
    // Within one process a shared wait on private memory works, and a private wake (another
    // futex, as in the kernel) does not reach it.
    let t = std::thread::spawn(|| shared::wait(w, 0, deadline(LONG)));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(ufutex::wake(w, 1), 0);
    wake_until_one(|| shared::wake(w, 1));
    assert_eq!(t.join().unwrap(), Ok(()));
}

fn requeue_across_processes() {
    let p = shared_anon(4096);
    // SAFETY: a live mapping.
    let (a, b): (&AtomicU32, &AtomicU32) = unsafe { (at(p, 0), at(p, 2048)) };
    let pids: Vec<_> =
        (0..3).map(|_| child(move || shared::wait(a, 0, deadline(LONG)).map_or_else(|e| e.errno(), |()| 0))).collect();
    // Wait until all three are queued: a requeue of 0 + 3 counts them.
    let t = Instant::now();
    loop {
        // Move nothing yet: 0 woken, 0 moved is a probe only when nobody waits... so count by
        // requeueing all of them onto the same word, which keeps their order and counts them.
        match shared::requeue(a, 0, a, 0, 3) {
            Ok(3) => break,
            Ok(_) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(shared::requeue(a, 1, b, 1, 2), Err(SharedError::WouldBlock));
    assert_eq!(shared::requeue(a, 0, b, 1, 2), Ok(3));
    assert_eq!(shared::wake(a, 10), Ok(0), "the other two moved");
    assert_eq!(shared::wake(b, 10), Ok(2));
    for pid in pids {
        assert_eq!(reap(pid), 0);
    }
}

/// A requeue from a word of one mapping to a word of another (two shared anonymous mappings:
/// two objects, never merged), whose identities are asked apart; and of a word onto itself,
/// where one question answers both.
fn requeue_between_mappings() {
    let (p, q) = (shared_anon(4096), shared_anon(4096));
    // SAFETY: live mappings.
    let (a, b): (&AtomicU32, &AtomicU32) = unsafe { (at(p, 256), at(q, 256)) };
    let pid = child(move || shared::wait(a, 0, deadline(LONG)).map_or_else(|e| e.errno(), |()| 0));
    let t = Instant::now();
    while shared::requeue(a, 0, a, 0, 1) != Ok(1) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(shared::requeue(a, 0, b, 0, 1), Ok(1));
    assert_eq!(shared::wake(a, 1), Ok(0), "moved to the other mapping's word");
    assert_eq!(shared::wake(b, 1), Ok(1));
    assert_eq!(reap(pid), 0);
}

fn waitv_across_processes_mixed_sizes() {
    let p = shared_anon(4096);
    // SAFETY: a live mapping; offsets aligned.
    let (x, y, z): (&AtomicU8, &AtomicU64, &AtomicU16) = unsafe { (at(p, 3), at(p, 64), at(p, 130)) };
    let pid = child(move || {
        let v = [WaitEntry::new(x, 0), WaitEntry::new(y, 0), WaitEntry::new(z, 0)];
        match shared::waitv(&v, deadline(LONG)) {
            Ok(i) => i as i32,
            Err(e) => 100 + e.errno(),
        }
    });
    wake_until_one(|| shared::wake(y, 1));
    assert_eq!(reap(pid), 1);
}

fn masks_across_processes() {
    let p = shared_anon(4096);
    // SAFETY: a live mapping.
    let w: &AtomicU32 = unsafe { at(p, 0) };
    let pid = child(move || shared::wait_bitset(w, 0, 0b0110, deadline(LONG)).map_or_else(|e| e.errno(), |()| 0));
    // Until it is queued, a matching wake could find nobody; a disjoint one must never count.
    let t = Instant::now();
    while shared::requeue(w, 0, w, 0, 1) != Ok(1) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(shared::wake_bitset(w, 1, 0b1001), Ok(0));
    assert_eq!(shared::wake_bitset(w, 1, 0b0100), Ok(1));
    assert_eq!(reap(pid), 0);
}

fn killed_waiters_are_not_counted() {
    let p = shared_anon(4096);
    // SAFETY: a live mapping.
    let w: &AtomicU32 = unsafe { at(p, 512) };
    let pids: Vec<_> = (0..4).map(|_| child(move || shared::wait(w, 0, deadline(LONG)).map_or(1, |()| 0))).collect();
    let t = Instant::now();
    while shared::requeue(w, 0, w, 0, 4) != Ok(4) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    for &pid in &pids {
        // SAFETY: our own children.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(reap(pid), -libc::SIGKILL);
    }
    assert_eq!(shared::wake(w, 10), Ok(0), "dead waiters are never counted");
    // A fresh round counts exactly.
    let pid = child(move || shared::wait(w, 0, deadline(LONG)).map_or(1, |()| 0));
    wake_until_one(|| shared::wake(w, 10));
    assert_eq!(reap(pid), 0);
    assert_eq!(shared::wake(w, 10), Ok(0));
}

fn exec_d_helper() {
    // A helper that is a new program image (exec'd), not a fork: it inherits the memfd and
    // maps it itself.
    let fd = memfd(4096);
    let a = map(4096, libc::MAP_SHARED, fd, 0);
    // SAFETY: a live mapping.
    let w: &AtomicU32 = unsafe { at(a, 40) };
    let exe = std::env::current_exe().unwrap();
    let mut c = std::process::Command::new(exe)
        .args(["--exact", "helper_role", "--nocapture", "--test-threads=1"])
        .env("UFX_HELPER_FD", fd.to_string())
        .spawn()
        .unwrap();
    wake_until_one(|| shared::wake(w, 1));
    assert!(c.wait().unwrap().success());
}

/// Run by `exec_d_helper` in a new process (a no-op when run by the harness itself).
#[test]
fn helper_role() {
    let Ok(fd) = std::env::var("UFX_HELPER_FD") else { return };
    let fd: i32 = fd.parse().unwrap();
    let b = map(4096, libc::MAP_SHARED, fd, 0);
    // SAFETY: a live mapping of the parent's memfd.
    let w: &AtomicU32 = unsafe { at(b, 40) };
    assert_eq!(shared::wait(w, 0, deadline(LONG)), Ok(()));
}

fn mixed_private_and_shared_waitv() {
    use ufutex::preload::{ufutex_waitv, UfutexWaitv};
    const U32: u32 = 0x02;
    const PRIVATE: u32 = 0x80;
    let p = shared_anon(4096);
    // SAFETY: a live mapping.
    let s: &AtomicU32 = unsafe { at(p, 256) };
    let first: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    let last: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    // A private entry on each side of the shared one: a wake returns the woken entry's own
    // index, not its place among the entries of its kind.
    let waitv = move || {
        let mut v = [
            UfutexWaitv { val: 0, uaddr: first.as_ptr() as u64, flags: U32 | PRIVATE, reserved: 0 },
            UfutexWaitv { val: 0, uaddr: s.as_ptr() as u64, flags: U32, reserved: 0 },
            UfutexWaitv { val: 0, uaddr: last.as_ptr() as u64, flags: U32 | PRIVATE, reserved: 0 },
        ];
        let ts = libc::timespec { tv_sec: LONG.as_secs() as i64, tv_nsec: 0 };
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let at = libc::timespec { tv_sec: now.tv_sec + ts.tv_sec, tv_nsec: now.tv_nsec };
        // SAFETY: three readable entries and a readable timespec.
        unsafe { ufutex_waitv(v.as_mut_ptr(), 3, 0, &at, libc::CLOCK_MONOTONIC) }
    };
    // The shared entry, woken from another process.
    let t = std::thread::spawn(waitv);
    let pid = child(move || {
        let t = Instant::now();
        while shared::wake(s, 1) != Ok(1) {
            if t.elapsed() > LONG {
                return 1;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        0
    });
    assert_eq!(reap(pid), 0);
    assert_eq!(t.join().unwrap(), 1);
    // Each private entry, woken by a private wake in this process.
    for (word, index) in [(first, 0), (last, 2)] {
        let t = std::thread::spawn(waitv);
        let start = Instant::now();
        while ufutex::wake(word, 1) != 1 {
            assert!(start.elapsed() < LONG);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(t.join().unwrap(), index);
    }
    assert_eq!(shared::wake(s, 1), Ok(0), "the shared entry left its queue");
}

fn waiters_are_woken_oldest_first() {
    let p = shared_anon(4096);
    // SAFETY: a live mapping; aligned offsets.
    let (w, order): (&AtomicU32, &AtomicU32) = unsafe { (at(p, 0), at(p, 64)) };
    // Three children queue one after the other (each queued before the next starts); each
    // records when it was woken, in order.
    let mut pids = Vec::new();
    for i in 0..3u32 {
        pids.push(child(move || match shared::wait(w, 0, deadline(LONG)) {
            Ok(()) => {
                let n = order.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n == i {
                    0
                } else {
                    50 + n as i32
                }
            }
            Err(e) => e.errno(),
        }));
        let t = Instant::now();
        while shared::requeue(w, 0, w, 0, usize::MAX) != Ok(i as usize + 1) {
            assert!(t.elapsed() < LONG);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for (i, pid) in pids.into_iter().enumerate() {
        assert_eq!(shared::wake(w, 1), Ok(1));
        // Each woken child records its rank before the next wake.
        let t = Instant::now();
        while order.load(std::sync::atomic::Ordering::SeqCst) != i as u32 + 1 {
            assert!(t.elapsed() < LONG);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(reap(pid), 0, "waiter {i} was not the oldest");
    }
}

fn a_read_only_private_file_mapping_meets_the_file() {
    // The kernel keys an un-COWed page of a read-only MAP_PRIVATE file mapping by the file.
    let path = std::env::temp_dir().join(format!("ufx-ro-{}", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    file.set_len(4096).unwrap();
    std::fs::remove_file(&path).unwrap();
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    let rw = map(4096, libc::MAP_SHARED, fd, 0);
    let pid = child(move || {
        // SAFETY: a fresh read-only private mapping of the file.
        let ro = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0) };
        if ro == libc::MAP_FAILED {
            return 3;
        }
        // SAFETY: a live mapping; the word is only read.
        shared::wait(unsafe { at::<AtomicU32>(ro as *mut u8, 16) }, 0, deadline(LONG))
            .map_or_else(|e| e.errno(), |()| 0)
    });
    // SAFETY: a live mapping.
    wake_until_one(|| shared::wake(unsafe { at::<AtomicU32>(rw, 16) }, 1));
    assert_eq!(reap(pid), 0);
}

fn a_dead_waiter_never_takes_a_live_ones_wake() {
    let p = shared_anon(4096);
    // SAFETY: a live mapping.
    let w: &AtomicU32 = unsafe { at(p, 128) };
    let dead = child(move || shared::wait(w, 0, deadline(LONG)).map_or(1, |()| 0));
    let t = Instant::now();
    while shared::requeue(w, 0, w, 0, usize::MAX) != Ok(1) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    let live = child(move || shared::wait(w, 0, deadline(LONG)).map_or(1, |()| 0));
    while shared::requeue(w, 0, w, 0, usize::MAX) != Ok(2) {
        assert!(t.elapsed() < LONG);
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: our own child.
    unsafe { libc::kill(dead, libc::SIGKILL) };
    assert_eq!(reap(dead), -libc::SIGKILL);
    // The dead one is first in line: the wake passes it by, uncounted, to the live one.
    assert_eq!(shared::wake(w, 1), Ok(1));
    assert_eq!(reap(live), 0);
    assert_eq!(shared::wake(w, 1), Ok(0));
}
