//! The exported functions, called as C would: every rejection in the kernel's order, with its
//! errno (one table per call), and the calls doing their work.

#![allow(clippy::type_complexity)] // the tables are tuples, one column per argument
use super::abi::{UfutexWaitv, UFUTEX_NUMA, UFUTEX_PRIVATE, UFUTEX_SIZE_U16, UFUTEX_SIZE_U32, UFUTEX_SIZE_U64};
use super::calls::{ufutex_requeue, ufutex_wait, ufutex_waitv, ufutex_wake};
use libc::{c_long, timespec, CLOCK_MONOTONIC, CLOCK_REALTIME, EAGAIN, EFAULT, EINVAL, ETIMEDOUT};
use std::ptr::{null, null_mut};

const P32: u32 = UFUTEX_PRIVATE | UFUTEX_SIZE_U32;

fn errno_of(r: c_long) -> i32 {
    assert_eq!(r, -1, "expected a failure");
    // SAFETY: reading this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// An address in a page that faults (PROT_NONE, kept reserved so that no other mapping lands
/// there while the tests run).
fn hole() -> usize {
    // SAFETY: map a fresh inaccessible page; nothing of ours lives there. Leaked on purpose.
    unsafe {
        let p = libc::mmap(null_mut(), 4096, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        assert_ne!(p, libc::MAP_FAILED);
        p as usize
    }
}

/// `len` bytes of fresh private read-write memory, leaked on purpose (tests change their
/// protection).
fn fresh_pages(len: usize) -> *mut libc::c_void {
    // SAFETY: a new anonymous mapping; no Rust object lives there.
    let p = unsafe {
        libc::mmap(null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    p
}

/// The last `n` bytes of a writable page that is followed by a PROT_NONE page.
fn end_of_page_before_hole(n: usize) -> usize {
    let p = fresh_pages(8192);
    // SAFETY: the second page of our own fresh mapping is made inaccessible.
    assert_eq!(unsafe { libc::mprotect(p.cast::<u8>().add(4096).cast(), 4096, libc::PROT_NONE) }, 0);
    p as usize + 4096 - n
}

const GOOD_TS: timespec = timespec { tv_sec: 0, tv_nsec: 0 };

/// Process-shared words in these tests use a shared table of their own (a 0700 directory of
/// the tests', reused from run to run), never the user's. Called by every test that passes a
/// shared word.
fn isolated_shared_table() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: geteuid has no arguments and cannot fail.
        let dir = std::env::temp_dir().join(format!("ufutex-unit-tests-{}", unsafe { libc::geteuid() }));
        let _ = std::fs::create_dir(&dir);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::env::set_var("UFUTEX_SHARED_DIR", &dir);
    });
}

#[test]
fn wait_rejects_in_the_kernels_order() {
    isolated_shared_table();
    let w = 0u64;
    let a = &w as *const u64 as *mut libc::c_void;
    let mis = (a as usize + 1) as *mut libc::c_void;
    let bad_ns = timespec { tv_sec: 0, tv_nsec: 1_000_000_000 };
    let neg = timespec { tv_sec: -1, tv_nsec: 0 };
    let h = hole() as *mut libc::c_void;
    #[rustfmt::skip]
    let table: &[(&str, *mut libc::c_void, u64, u64, u32, *const timespec, i32, i32)] = &[
        // what,                      uaddr, val,     mask, flags,                        timeout,       clock,            errno
        ("unknown flag bit",          null_mut(), 1 << 40, 0, P32 | 0x40,                 &bad_ns,       99,               EINVAL),
        ("value wider than u32",      null_mut(), 1 << 32, 0, P32,                        &bad_ns,       99,               EINVAL),
        ("value wider than u16",      null_mut(), 1 << 16, 1, UFUTEX_PRIVATE | UFUTEX_SIZE_U16, null(),  0,                EINVAL),
        ("mask wider than u8",        null_mut(), 0,       0x100, UFUTEX_PRIVATE,         null(),        0,                EINVAL),
        ("bad clock",                 null_mut(), 0,       0, P32,                        &bad_ns,       99,               EINVAL),
        // The timeout is set up before the mask is looked at.
        ("timespec before mask",      null_mut(), 0,       0, P32,                        h as *const _, CLOCK_MONOTONIC,  EFAULT),
        ("mask 0",                    null_mut(), 0,       0, P32,                        &GOOD_TS,      CLOCK_MONOTONIC,  EINVAL),
        ("unmapped timespec",         null_mut(), 0,       1, P32,                        h as *const _, CLOCK_MONOTONIC,  EFAULT),
        ("tv_nsec = 1e9",             null_mut(), 0,       1, P32,                        &bad_ns,       CLOCK_MONOTONIC,  EINVAL),
        ("tv_sec < 0",                null_mut(), 0,       1, P32,                        &neg,          CLOCK_REALTIME,   EINVAL),
        ("misaligned",                mis,        0,       1, P32,                        &GOOD_TS,      CLOCK_REALTIME,   EINVAL),
        ("NULL",                      null_mut(), 0,       1, P32,                        &GOOD_TS,      CLOCK_REALTIME,   EFAULT),
        ("misaligned shared",         mis,        0,       1, UFUTEX_SIZE_U32,            null(),        0,                EINVAL),
        ("shared, mismatch",          a,          1,       1, UFUTEX_SIZE_U32,            null(),        0,                EAGAIN),
        ("shared, unmapped",          h,          0,       1, UFUTEX_SIZE_U32,            null(),        0,                EFAULT),
        ("shared, timeout",           a,          0,       1, UFUTEX_SIZE_U16,            &GOOD_TS,      CLOCK_MONOTONIC,  ETIMEDOUT),
        ("NUMA pair misaligned",      (a as usize + 4) as *mut _, 0, 1, P32 | UFUTEX_NUMA, null(),       0,                EINVAL),
        ("NUMA pair, mismatch",       a,          1,       1, P32 | UFUTEX_NUMA,          null(),        0,                EAGAIN),
        ("unmapped",                  h,          0,       1, P32,                        null(),        0,                EFAULT),
        ("mismatch",                  a,          1,       1, UFUTEX_PRIVATE | UFUTEX_SIZE_U64, null(),  0,                EAGAIN),
        ("timeout",                   a,          0,       1, UFUTEX_PRIVATE | UFUTEX_SIZE_U64, &GOOD_TS, CLOCK_MONOTONIC, ETIMEDOUT),
    ];
    for &(what, uaddr, val, mask, flags, ts, clock, errno) in table {
        // SAFETY: every pointer is valid, NULL or unmapped, and stays so for the call.
        let r = unsafe { ufutex_wait(uaddr, val, mask, flags, ts, clock) };
        assert_eq!(errno_of(r), errno, "{what}");
    }
}

#[test]
fn wake_rejects_in_the_kernels_order() {
    isolated_shared_table();
    let w = 0u32;
    let a = &w as *const u32 as *mut libc::c_void;
    let mis = (a as usize + 2) as *mut libc::c_void;
    #[rustfmt::skip]
    let table: &[(&str, *mut libc::c_void, u64, i32, u32, i32)] = &[
        ("unknown flag bit", null_mut(), 0,       -1, P32 | 0x100,        EINVAL),
        ("mask wider",       null_mut(), 1 << 32, -1, P32,                EINVAL),
        ("mask 0",           null_mut(), 0,       -1, P32,                EINVAL),
        ("nr < 0",           null_mut(), 1,       -1, P32,                EINVAL),
        ("misaligned",       mis,        1,       1,  P32,                EINVAL),
        ("NULL",             null_mut(), 1,       1,  P32,                EFAULT),
        ("shared, unmapped", hole() as *mut _, 1, 1, UFUTEX_SIZE_U32, EFAULT),
    ];
    for &(what, uaddr, mask, nr, flags, errno) in table {
        // SAFETY: a wake never reads the word.
        let r = unsafe { ufutex_wake(uaddr, mask, nr, flags) };
        assert_eq!(errno_of(r), errno, "{what}");
    }
    // A private wake never reads the word: an unmapped one is fine.
    // SAFETY: as above.
    assert_eq!(unsafe { ufutex_wake(hole() as *mut _, u64::MAX, 1, UFUTEX_PRIVATE | UFUTEX_SIZE_U64) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { ufutex_wake(a, 1, 0, P32) }, 0);
    // A shared wake with nobody waiting: 0.
    // SAFETY: as above.
    assert_eq!(unsafe { ufutex_wake(a, 1, 5, UFUTEX_SIZE_U32) }, 0);
}

fn entry(w: &u32, val: u64, flags: u32) -> UfutexWaitv {
    UfutexWaitv { val, uaddr: w as *const u32 as u64, flags, reserved: 0 }
}

#[test]
fn waitv_rejects_in_the_kernels_order() {
    isolated_shared_table();
    let (x, y) = (0u32, 0u32);
    let good = entry(&x, 0, P32);
    let h = hole() as u64;
    let bad_ts = timespec { tv_sec: 0, tv_nsec: -1 };
    let v = |es: &[UfutexWaitv]| es.to_vec();
    #[rustfmt::skip]
    let table: Vec<(&str, Vec<UfutexWaitv>, u32, u32, *const timespec, i32, i32)> = vec![
        ("call flags",        v(&[good]), 1, 1,    &bad_ts,  99,              EINVAL),
        ("0 entries",         v(&[good]), 0, 0,    &bad_ts,  99,              EINVAL),
        ("1025 entries",      v(&[good]), 1025, 0, &bad_ts,  99,              EINVAL),
        ("bad clock",         v(&[good]), 1, 0,    &bad_ts,  99,              EINVAL),
        ("bad timespec",      v(&[good]), 1, 0,    &bad_ts,  CLOCK_MONOTONIC, EINVAL),
        ("reserved",          v(&[good, UfutexWaitv { reserved: 1, ..good }]), 2, 0, null(), 0, EINVAL),
        ("entry flag bit",    v(&[good, UfutexWaitv { flags: P32 | 0x20, ..good }]), 2, 0, null(), 0, EINVAL),
        ("entry value wide",  v(&[good, UfutexWaitv { val: 1 << 32, ..good }]), 2, 0, null(), 0, EINVAL),
        // Parsing (EINVAL) covers every entry before any address is looked at.
        ("parse before keys", v(&[UfutexWaitv { uaddr: 0, ..good }, UfutexWaitv { reserved: 1, ..good }]), 2, 0, null(), 0, EINVAL),
        ("NULL uaddr",        v(&[good, UfutexWaitv { uaddr: 0, ..good }]), 2, 0, null(), 0, EFAULT),
        // Every key before any value: a misaligned entry 1 beats a mismatch at entry 0.
        ("keys before values",v(&[UfutexWaitv { val: 1, ..good }, UfutexWaitv { uaddr: good.uaddr + 1, ..good }]), 2, 0, null(), 0, EINVAL),
        ("shared, mismatch",  v(&[good, UfutexWaitv { flags: UFUTEX_SIZE_U32, val: 1, ..good }]), 2, 0, null(), 0, EAGAIN),
        ("mixed, timeout",    v(&[good, UfutexWaitv { flags: UFUTEX_SIZE_U32, ..entry(&y, 0, 0) }]), 2, 0, &GOOD_TS, CLOCK_REALTIME, ETIMEDOUT),
        ("shared, timeout",   v(&[UfutexWaitv { flags: UFUTEX_SIZE_U32, ..entry(&y, 0, 0) }]), 1, 0, &GOOD_TS, CLOCK_MONOTONIC, ETIMEDOUT),
        // Values in index order: a mismatch at entry 0 beats a hole at entry 1.
        ("mismatch first",    v(&[UfutexWaitv { val: 1, ..good }, UfutexWaitv { uaddr: h, ..good }]), 2, 0, null(), 0, EAGAIN),
        ("hole",              v(&[good, UfutexWaitv { uaddr: h, ..good }]), 2, 0, null(), 0, EFAULT),
        ("timeout",           v(&[good, entry(&y, 0, P32)]), 2, 0, &GOOD_TS, CLOCK_REALTIME, ETIMEDOUT),
    ];
    for (what, mut es, n, flags, ts, clock, errno) in table {
        // SAFETY: `n` entries are readable, or the call rejects `n` before reading.
        let r = unsafe { ufutex_waitv(es.as_mut_ptr(), n, flags, ts, clock) };
        assert_eq!(errno_of(r), errno, "{what}");
    }
    // Entry by entry, as `futex_parse_waitv`: a bad entry 0 is found before an unreadable entry
    // 1, a good entry 0 lets the unreadable entry 1 fail with EFAULT.
    let at = end_of_page_before_hole(24) as *mut UfutexWaitv;
    for (e0, errno) in [(UfutexWaitv { reserved: 1, ..good }, EINVAL), (good, EFAULT)] {
        // SAFETY: `at` is the last 24 writable bytes of its page; the call reads past them only
        // through the fault-checked path.
        unsafe {
            at.write_unaligned(e0);
            assert_eq!(errno_of(ufutex_waitv(at, 2, 0, null(), 0)), errno);
            assert_eq!(errno_of(ufutex_requeue(at, 0, 1, 1)), errno);
        }
    }
    // SAFETY: NULL and unmapped arrays are rejected without a crash.
    unsafe {
        assert_eq!(errno_of(ufutex_waitv(null_mut(), 1, 0, null(), 0)), EINVAL);
        assert_eq!(errno_of(ufutex_waitv(hole() as *mut _, 1, 0, null(), 0)), EFAULT);
    }
}

#[test]
fn requeue_rejects_in_the_kernels_order() {
    isolated_shared_table();
    let (x, y) = (5u32, 0u32);
    let (s, t) = (entry(&x, 5, P32), entry(&y, 0, P32));
    let h = hole() as u64;
    #[rustfmt::skip]
    let table: Vec<(&str, [UfutexWaitv; 2], u32, i32, i32, i32)> = vec![
        ("call flags",      [s, t], 1, -1, -1, EINVAL),
        ("reserved",        [s, UfutexWaitv { reserved: 1, ..t }], 0, -1, -1, EINVAL),
        ("val too wide",    [UfutexWaitv { val: 1 << 33, ..s }, t], 0, -1, -1, EINVAL),
        ("flags differ",    [s, UfutexWaitv { flags: P32 | UFUTEX_NUMA, uaddr: 0, ..t }], 0, -1, -1, EINVAL),
        ("nr_wake < 0",     [s, UfutexWaitv { uaddr: 0, ..t }], 0, -1, 0, EINVAL),
        ("nr_requeue < 0",  [s, UfutexWaitv { uaddr: 0, ..t }], 0, 0, -1, EINVAL),
        ("target NULL",     [s, UfutexWaitv { uaddr: 0, ..t }], 0, 1, 1, EFAULT),
        ("target misaligned", [s, UfutexWaitv { uaddr: t.uaddr + 1, ..t }], 0, 1, 1, EINVAL),
        ("shared, mismatch",[UfutexWaitv { flags: UFUTEX_SIZE_U32, val: 4, ..s }, UfutexWaitv { flags: UFUTEX_SIZE_U32, ..t }], 0, 1, 1, EAGAIN),
        ("source unmapped", [UfutexWaitv { uaddr: h, ..s }, t], 0, 1, 1, EFAULT),
        ("mismatch",        [UfutexWaitv { val: 4, ..s }, t], 0, 1, 1, EAGAIN),
    ];
    for (what, mut es, flags, nw, nq, errno) in table {
        // SAFETY: two readable entries.
        let r = unsafe { ufutex_requeue(es.as_mut_ptr(), flags, nw, nq) };
        assert_eq!(errno_of(r), errno, "{what}");
    }
    let mut shared = [UfutexWaitv { flags: UFUTEX_SIZE_U32, ..s }, UfutexWaitv { flags: UFUTEX_SIZE_U32, ..t }];
    // SAFETY: two readable entries; nobody waits.
    assert_eq!(unsafe { ufutex_requeue(shared.as_mut_ptr(), 0, 1, 1) }, 0);
    let mut ok = [s, UfutexWaitv { uaddr: h, ..t }];
    // SAFETY: two readable entries; the target word (unmapped) is never read.
    assert_eq!(unsafe { ufutex_requeue(ok.as_mut_ptr(), 0, 1, 1) }, 0);
    // SAFETY: NULL is rejected.
    assert_eq!(errno_of(unsafe { ufutex_requeue(null_mut(), 0, 1, 1) }), EINVAL);
}

#[test]
fn wait_and_wake_every_size_through_the_abi() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    for size in 0..4u32 {
        let w = Arc::new(AtomicU64::new(0));
        let w2 = w.clone();
        let flags = UFUTEX_PRIVATE | size;
        let t = std::thread::spawn(move || {
            let a = w2.as_ptr().cast::<libc::c_void>();
            while w2.load(Ordering::Acquire) == 0 {
                // SAFETY: `a` is a live, aligned word owned by the Arc.
                let r = unsafe { ufutex_wait(a, 0, 1, flags, null(), 0) };
                assert!(r == 0 || errno_of(r) == EAGAIN);
            }
        });
        let a = w.as_ptr().cast::<libc::c_void>();
        // Wait until the waiter is queued (or gave up because the value moved: it did not).
        while crate::domain::default_domain().queued_waiters() == 0 {
            std::thread::yield_now();
        }
        w.store(1, Ordering::Release);
        // SAFETY: `a` is live; wakes never read it anyway.
        while unsafe { ufutex_wake(a, 1, 1, flags) } == 0 && !t.is_finished() {
            std::thread::yield_now();
        }
        t.join().unwrap();
    }
}

/// A NUMA pair on a read-only page: a node word of -1 must be written back, which the kernel
/// answers with EFAULT (its store faults); one that already names a node is only read.
#[test]
fn numa_write_back_to_a_read_only_page_is_efault() {
    let p = fresh_pages(4096);
    // SAFETY: our own fresh page, filled and then made read-only.
    let page = unsafe {
        let w = p.cast::<u32>();
        *w = 0; // pair 0: word 0, node -1
        *w.add(1) = u32::MAX;
        *w.add(2) = 0; // pair 1: word 0, node 0
        *w.add(3) = 0;
        assert_eq!(libc::mprotect(p, 4096, libc::PROT_READ), 0);
        p as usize
    };
    let flags = P32 | UFUTEX_NUMA;
    let (unset, set) = (page as *mut libc::c_void, (page + 8) as *mut libc::c_void);
    // SAFETY: the page stays mapped; the calls read it and (for -1) must not write it.
    unsafe {
        assert_eq!(errno_of(ufutex_wake(unset, u64::from(u32::MAX), 1, flags)), EFAULT, "wake, node -1");
        assert_eq!(errno_of(ufutex_wait(unset, 0, u64::from(u32::MAX), flags, &GOOD_TS, CLOCK_MONOTONIC)), EFAULT);
        assert_eq!(*((page + 4) as *const u32), u32::MAX, "the node word is unchanged");
        assert_eq!(ufutex_wake(set, u64::from(u32::MAX), 1, flags), 0, "a node already set is only read");
        assert_eq!(errno_of(ufutex_wait(set, 1, u64::from(u32::MAX), flags, null(), 0)), EAGAIN);
    }
}
