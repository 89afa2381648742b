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
    let miss = UfutexWaitv { val: 1, ..good };
    let h = hole() as u64;
    let bad_ts = timespec { tv_sec: 0, tv_nsec: -1 };
    let big_ns = timespec { tv_sec: 0, tv_nsec: 1_000_000_000 };
    let neg_s = timespec { tv_sec: -1, tv_nsec: 0 };
    // Long expired: a mismatch is still EAGAIN (the kernel compares before it sleeps).
    let past = timespec { tv_sec: 1, tv_nsec: 0 };
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
        // A lone plain mismatch (the entry point's shortcut) after every check of the call's own.
        ("lone miss",         v(&[miss]), 1, 0,    null(),   0,               EAGAIN),
        ("lone miss, timeout",v(&[miss]), 1, 0,    &GOOD_TS, CLOCK_MONOTONIC, EAGAIN),
        ("lone miss, flags",  v(&[miss]), 1, 1,    null(),   0,               EINVAL),
        ("lone miss, 0",      v(&[miss]), 0, 0,    null(),   0,               EINVAL),
        ("lone miss, clock",  v(&[miss]), 1, 0,    &GOOD_TS, 99,              EINVAL),
        ("lone miss, ts",     v(&[miss]), 1, 0,    &bad_ts,  CLOCK_MONOTONIC, EINVAL),
        ("lone miss, nsec",   v(&[miss]), 1, 0,    &big_ns,  CLOCK_REALTIME,  EINVAL),
        ("lone miss, sec",    v(&[miss]), 1, 0,    &neg_s,   CLOCK_MONOTONIC, EINVAL),
        ("lone miss, no ts",  v(&[miss]), 1, 0,    hole() as *const timespec, CLOCK_MONOTONIC, EFAULT),
        ("lone miss, past",   v(&[miss]), 1, 0,    &past,    CLOCK_REALTIME,  EAGAIN),
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
fn the_preloads_legacy_requeue_checks_and_moves() {
    use super::calls::preload_requeue;
    let (x, y) = (5u32, 0u32);
    let (px, py): (*mut libc::c_void, *mut libc::c_void) =
        (std::ptr::from_ref(&x).cast_mut().cast(), std::ptr::from_ref(&y).cast_mut().cast());
    let h = hole() as *mut libc::c_void;
    let odd = px.wrapping_byte_add(2);
    #[rustfmt::skip]
    let table: Vec<(&str, *mut libc::c_void, *mut libc::c_void, i32, i32, Option<u32>, i32)> = vec![
        ("nr_wake < 0",        px, py, -1, 1, Some(5), EINVAL),
        ("nr_requeue < 0",     px, py, 1, -1, None, EINVAL),
        ("source misaligned",  odd, py, 1, 1, Some(5), EINVAL),
        ("source NULL",        null_mut(), py, 1, 1, None, EFAULT),
        ("target NULL",        px, null_mut(), 1, 1, Some(5), EFAULT),
        ("source unmapped",    h, py, 1, 1, Some(5), EFAULT),
        ("mismatch",           px, py, 1, 1, Some(4), EAGAIN),
    ];
    for (what, from, to, nw, nq, cmp, errno) in table {
        assert_eq!(errno_of(preload_requeue(from, to, nw, nq, cmp, false)), errno, "{what}");
    }
    assert_eq!(preload_requeue(h, py, 1, 1, None, false), 0, "FUTEX_REQUEUE reads neither word");
    assert_eq!(preload_requeue(px, py, 1, 1, Some(5), false), 0, "nobody waits");
    // A waiter on x, moved to y by the compare-and-requeue, then woken through y.
    let (x, y) = (std::sync::atomic::AtomicU32::new(5), std::sync::atomic::AtomicU32::new(0));
    let (px, py): (*mut libc::c_void, *mut libc::c_void) = (x.as_ptr().cast(), y.as_ptr().cast());
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            // SAFETY: `x` outlives the scope; no timeout.
            unsafe { ufutex_wait(x.as_ptr().cast(), 5, u32::MAX.into(), P32, null(), 0) }
        });
        let mut moved = 0;
        while moved == 0 {
            moved = preload_requeue(px, py, 0, 1, Some(5), false);
            assert!(moved >= 0, "errno {}", errno_of(moved));
            std::thread::yield_now();
        }
        assert_eq!(moved, 1);
        // SAFETY: `y` is alive; a private wake.
        assert_eq!(unsafe { ufutex_wake(py, u32::MAX.into(), 1, P32) }, 1);
        assert_eq!(waiter.join().unwrap(), 0);
    });
}

/// The preload library's legacy requeue of process-shared words (`UFUTEX_PRELOAD_SHARED=table`):
/// each word's page is looked up for its key, source first, so an unmapped word is `EFAULT`
/// even where nothing is compared (the kernel's `get_futex_key`); then it moves a shared waiter,
/// with and without a compare.
#[test]
fn the_preloads_legacy_requeue_of_shared_words() {
    use super::calls::preload_requeue;
    use std::sync::atomic::AtomicU32;
    isolated_shared_table();
    let (x, y) = (AtomicU32::new(5), AtomicU32::new(0));
    let (px, py): (*mut libc::c_void, *mut libc::c_void) = (x.as_ptr().cast(), y.as_ptr().cast());
    let h = hole() as *mut libc::c_void;
    let odd = px.wrapping_byte_add(2);
    #[rustfmt::skip]
    let table: Vec<(&str, *mut libc::c_void, *mut libc::c_void, i32, i32, Option<u32>, i32)> = vec![
        ("nr_wake < 0",                      px, py, -1, 1, Some(5), EINVAL),
        ("source misaligned",                odd, py, 1, 1, None, EINVAL),
        ("source unmapped, no compare",      h, odd, 1, 1, None, EFAULT),
        ("target misaligned",                px, odd, 1, 1, None, EINVAL),
        ("target unmapped, no compare",      px, h, 1, 1, None, EFAULT),
        ("target NULL",                      px, null_mut(), 1, 1, None, EFAULT),
        ("mismatch",                         px, py, 1, 1, Some(4), EAGAIN),
    ];
    for (what, from, to, nw, nq, cmp, errno) in table {
        assert_eq!(errno_of(preload_requeue(from, to, nw, nq, cmp, true)), errno, "{what}");
    }
    assert_eq!(preload_requeue(px, py, 1, 1, None, true), 0, "nobody waits");
    const S32: u32 = UFUTEX_SIZE_U32;
    for cmp in [Some(5), None] {
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                // SAFETY: `x` outlives the scope; no timeout.
                unsafe { ufutex_wait(x.as_ptr().cast(), 5, u32::MAX.into(), S32, null(), 0) }
            });
            let mut moved = 0;
            while moved == 0 {
                moved = preload_requeue(px, py, 0, 1, cmp, true);
                assert!(moved >= 0, "errno {}", errno_of(moved));
                std::thread::yield_now();
            }
            assert_eq!(moved, 1, "{cmp:?}");
            // SAFETY: `y` is alive; a shared wake.
            assert_eq!(unsafe { ufutex_wake(py, u32::MAX.into(), 1, S32) }, 1, "{cmp:?}");
            assert_eq!(waiter.join().unwrap(), 0);
        });
    }
}

/// The preload library's wait of a process-shared word in the shared table also sleeps on the
/// word in the kernel, as its private waits do: a kernel wake made without the library (a raw
/// system call, a process that is not preloaded, the kernel's wake of a thread-id word) ends it
/// with 0, and leaves nothing queued. (A wait that does not watch would never be reached: the
/// wake below would find nobody until the deadline.) Where the kernel has no `futex_waitv`
/// (qemu-user) the waiter watches the word's value only, in slices: there the word is changed
/// before the kernel's wakes, as a waker changes it.
#[test]
fn the_preloads_shared_wait_is_also_woken_by_the_kernel() {
    use super::calls::preload_wait;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};
    isolated_shared_table();
    const S32: u32 = UFUTEX_SIZE_U32;
    let w = AtomicU32::new(3);
    let sleeps_on_it = crate::parker::futex::has_waitv();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            // SAFETY: `w` outlives the scope; no timeout.
            let r = unsafe { preload_wait(w.as_ptr().cast(), 3, u32::MAX.into(), S32, null(), 0) };
            (r, if r == -1 { errno_of(r) } else { 0 }) // (this thread's errno)
        });
        if !sleeps_on_it {
            std::thread::sleep(Duration::from_millis(20)); // (most likely queued by then)
            w.store(4, Ordering::SeqCst);
        }
        // The kernel's shared wake (the value unchanged where the waiter sleeps on the word) until
        // it reaches the waiter asleep, or the waiter that watches the value has returned.
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: FUTEX_WAKE reads only the address of a live word.
            let r = unsafe { libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, 1, 0, 0, 0) };
            if r == 1 || (!sleeps_on_it && waiter.is_finished()) {
                break;
            }
            assert_eq!(r, 0, "errno {}", std::io::Error::last_os_error());
            if Instant::now() > give_up {
                // SAFETY: `w` is alive; the library's own shared wake lets the waiter go, so
                // that the test fails instead of hanging.
                unsafe { ufutex_wake(w.as_ptr().cast(), u32::MAX.into(), 1, S32) };
                panic!("the kernel's wake never reached the shared wait");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match waiter.join().unwrap() {
            (0, _) => {}
            // Without futex_waitv: the waiter saw the change before it queued.
            (-1, EAGAIN) if !sleeps_on_it => {}
            (r, errno) => panic!("the wait returned {r} (errno {errno})"),
        }
    });
    // SAFETY: `w` is alive; a shared wake of the word: nobody is left queued on it.
    assert_eq!(unsafe { ufutex_wake(w.as_ptr().cast(), u32::MAX.into(), 1, S32) }, 0);
}

/// The preload library's waitv of private words also sleeps on each 32-bit word in the kernel,
/// as its plain waits do: a kernel wake of one (a raw system call, the kernel's wake of a
/// thread-id word) ends it with that entry's index, and leaves nothing queued. Without
/// `futex_waitv` (qemu-user), or with the portable parker, its private waits do not watch, and
/// there is nothing to test.
#[test]
fn the_preloads_waitv_is_also_woken_by_the_kernel() {
    use super::calls::preload_waitv;
    use std::sync::atomic::AtomicU32;
    use std::time::{Duration, Instant};
    if !crate::parker::can_watch() {
        return;
    }
    let words = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
    let flags = UFUTEX_SIZE_U32 | UFUTEX_PRIVATE;
    let mut v = words.each_ref().map(|w| UfutexWaitv { val: 0, uaddr: w.as_ptr() as u64, flags, reserved: 0 });
    std::thread::scope(|s| {
        let vp = v.as_mut_ptr() as usize;
        // SAFETY: three readable entries naming words that outlive the scope; no timeout.
        let waiter = s.spawn(move || unsafe { preload_waitv(vp as *mut UfutexWaitv, 3, 0, null(), 0) });
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: FUTEX_WAKE reads only the address of a live word.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    words[2].as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    1,
                    0,
                    0,
                    0,
                )
            };
            if r == 1 {
                break;
            }
            assert_eq!(r, 0, "errno {}", std::io::Error::last_os_error());
            if Instant::now() > give_up {
                // SAFETY: `words[2]` is alive; the library's wake lets the waiter go, so that the
                // test fails instead of hanging.
                unsafe { ufutex_wake(words[2].as_ptr().cast(), u32::MAX.into(), 1, flags) };
                panic!("the kernel's wake never reached the waitv");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(waiter.join().unwrap(), 2, "the index of the word the kernel woke");
    });
    for w in &words {
        // SAFETY: `w` is alive: nobody is left queued on it.
        assert_eq!(unsafe { ufutex_wake(w.as_ptr().cast(), u32::MAX.into(), 1, flags) }, 0);
    }
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

mod named {
    //! The named objects' C calls: a handle's checks in their order (the kind included), and
    //! `ufutex_wait_any`'s, one table each; the header's side of the named ABI.

    use super::super::named::*;
    use super::{errno_of, hole, isolated_shared_table, GOOD_TS};
    use crate::named::Namespace;
    use libc::{c_long, timespec, CLOCK_MONOTONIC, EFAULT, EIDRM, EINVAL, ETIMEDOUT};
    use std::ptr::null;

    /// A namespace of this test process's own (its file removed at once: the mapping stays).
    fn namespace() -> *const Namespace {
        static NS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *NS.get_or_init(|| {
            isolated_shared_table();
            std::env::set_var("UFUTEX_NAMED_SLOTS", "64");
            let name = std::ffi::CString::new(format!("ffi-unit-{}", std::process::id())).unwrap();
            // SAFETY: a NUL-terminated name.
            let ns = unsafe { ufutex_ns_open(name.as_ptr()) };
            assert!(!ns.is_null());
            // SAFETY: as above.
            assert_eq!(unsafe { ufutex_ns_unlink(name.as_ptr()) }, 0);
            ns as usize
        }) as *const Namespace
    }

    /// Objects of keys `base + 1..=6`: a semaphore (count 0), an event (auto, unsignaled), a
    /// mutex, raw words of 8 and 32 bits (holding 0), and a removed semaphore.
    fn objects(base: u64) -> [UfutexObj; 6] {
        let ns = namespace();
        let mut o = [UfutexObj { ns, slot: 0, gen: 0 }; 6];
        let mut word = std::ptr::null_mut();
        let (u8_, u32_) = (super::super::abi::UFUTEX_SIZE_U8, super::super::abi::UFUTEX_SIZE_U32);
        let new = UFUTEX_CREAT | UFUTEX_EXCL;
        // SAFETY: `ns` is ours; every out-pointer is writable.
        unsafe {
            assert_eq!(ufutex_sem_open(ns, base + 1, new, 0, &mut o[0]), 0);
            assert_eq!(ufutex_event_open(ns, base + 2, new, 0, 0, &mut o[1]), 0);
            assert_eq!(ufutex_nmutex_open(ns, base + 3, new, &mut o[2]), 0);
            assert_eq!(ufutex_word_open_sized(ns, base + 4, new, u8_, &mut o[3], &mut word), 0);
            assert_eq!(ufutex_word_open_sized(ns, base + 5, new, u32_, &mut o[4], &mut word), 0);
            assert_eq!(ufutex_sem_open(ns, base + 6, new, 0, &mut o[5]), 0);
            assert_eq!(ufutex_obj_remove(ns, base + 6), 0);
        }
        o
    }

    #[test]
    fn handle_calls_check_in_order_and_by_kind() {
        let [sem, ev, mtx, w8, _, gone] = objects(0);
        let foreign = UfutexObj { ns: &GOOD_TS as *const timespec as *const Namespace, ..sem };
        let h = hole() as *const timespec;
        type Call = unsafe extern "C" fn(*const UfutexObj, *const timespec, libc::clockid_t) -> c_long;
        let (sem_wait, event_wait, lock): (Call, Call, Call) = (ufutex_sem_wait, ufutex_event_wait, ufutex_nmutex_lock);
        #[rustfmt::skip]
        let table: &[(&str, Call, *const UfutexObj, *const timespec, i32, i32)] = &[
            // what,                    call,       handle,        timeout,  clock,           errno
            ("NULL handle",             sem_wait,   null(),        h,        99,              EFAULT),
            ("foreign namespace",       sem_wait,   &foreign,      h,        99,              EINVAL),
            ("removed",                 sem_wait,   &gone,         h,        99,              EIDRM),
            ("removed, of another kind", lock,      &gone,         h,        99,              EIDRM),
            ("kind before clock",       lock,       &sem,          &GOOD_TS, 99,              EINVAL),
            ("kind before timespec",    event_wait, &mtx,          h,        CLOCK_MONOTONIC, EINVAL),
            ("raw word",                sem_wait,   &w8,           h,        CLOCK_MONOTONIC, EINVAL),
            ("bad clock",               sem_wait,   &sem,          &GOOD_TS, 99,              EINVAL),
            ("unmapped timespec",       event_wait, &ev,           h,        CLOCK_MONOTONIC, EFAULT),
            ("timeout",                 sem_wait,   &sem,          &GOOD_TS, CLOCK_MONOTONIC, ETIMEDOUT),
            ("mutex, wrong kind",       lock,       &ev,           &GOOD_TS, CLOCK_MONOTONIC, EINVAL),
        ];
        for &(what, call, o, ts, clock, errno) in table {
            // SAFETY: every handle is NULL or readable; every timespec readable or unmapped.
            let r = unsafe { call(o, ts, clock) };
            assert_eq!(errno_of(r), errno, "{what}");
        }
        // The untimed calls check the kind too, and change nothing.
        // SAFETY: readable handles.
        unsafe {
            assert_eq!(errno_of(ufutex_sem_post(&mtx, 1)), EINVAL);
            assert_eq!(errno_of(ufutex_event_set(&sem)), EINVAL);
            assert_eq!(errno_of(ufutex_nmutex_unlock(&ev)), EINVAL);
            assert_eq!(errno_of(ufutex_sem_trywait(&sem)), libc::EAGAIN);
            assert_eq!(ufutex_nmutex_trylock(&mtx), 0);
            assert_eq!(ufutex_nmutex_unlock(&mtx), 0);
        }
    }

    #[test]
    fn wait_any_checks_in_order() {
        let [sem, ev, mtx, w8, w32, gone] = objects(10);
        let foreign = UfutexObj { ns: &GOOD_TS as *const timespec as *const Namespace, ..sem };
        let e = |obj: UfutexObj, val: u64| UfutexWaitable { obj, val };
        let h = hole() as *const timespec;
        #[rustfmt::skip]
        let table: Vec<(&str, Vec<UfutexWaitable>, u32, *const timespec, i32, i32)> = vec![
            ("0 entries",             vec![e(gone, 0)],                0,    h,        99,              EINVAL),
            ("1025 entries",          vec![e(gone, 0)],                1025, h,        99,              EINVAL),
            ("foreign namespace",     vec![e(sem, 0), e(foreign, 0)],  2,    h,        99,              EINVAL),
            ("removed",               vec![e(sem, 0), e(gone, 0)],     2,    h,        99,              EIDRM),
            // The first bad entry decides.
            ("removed first",         vec![e(gone, 0), e(w8, 0x100)],  2,    h,        99,              EIDRM),
            ("bad val first",         vec![e(w8, 0x100), e(gone, 0)],  2,    h,        99,              EINVAL),
            ("u32 val too wide",      vec![e(w32, 1 << 32)],           1,    null(),   0,               EINVAL),
            ("reserved val",          vec![e(ev, 1)],                  1,    null(),   0,               EINVAL),
            ("entries before clock",  vec![e(mtx, 7)],                 1,    &GOOD_TS, 99,              EINVAL),
            ("bad clock",             vec![e(sem, 0)],                 1,    &GOOD_TS, 99,              EINVAL),
            ("unmapped timespec",     vec![e(sem, 0)],                 1,    h,        CLOCK_MONOTONIC, EFAULT),
            ("timeout",               vec![e(sem, 0), e(ev, 0), e(w8, 0)], 3, &GOOD_TS, CLOCK_MONOTONIC, ETIMEDOUT),
        ];
        for (what, es, n, ts, clock, errno) in table {
            // SAFETY: `n` entries are readable, or the call rejects `n` before reading.
            let r = unsafe { ufutex_wait_any(es.as_ptr(), n, ts, clock) };
            assert_eq!(errno_of(r), errno, "{what}");
        }
        // SAFETY: NULL and unmapped arrays are rejected without a crash; the rest are readable.
        unsafe {
            assert_eq!(errno_of(ufutex_wait_any(null(), 1, null(), 0)), EFAULT);
            assert_eq!(errno_of(ufutex_wait_any(hole() as *const _, 1, null(), 0)), EFAULT);
            // Ready: a raw word that differs from val, after entries that are not ready.
            let es = [e(sem, 0), e(ev, 0), e(w8, 1)];
            assert_eq!(ufutex_wait_any(es.as_ptr(), 3, &GOOD_TS, CLOCK_MONOTONIC), 2);
            // A free mutex is taken.
            let es = [e(sem, 0), e(mtx, 0)];
            assert_eq!(ufutex_wait_any(es.as_ptr(), 2, null(), 0), 1);
            assert_eq!(ufutex_nmutex_unlock(&mtx), 0);
        }
    }

    #[test]
    fn objects_are_found_by_name_apart_from_keys() {
        let ns = namespace();
        let mut o = [UfutexObj { ns, slot: 0, gen: 0 }; 4];
        let (name, other) = (c"jobs".as_ptr() as u64, c"jobs-2".as_ptr() as u64);
        let by = UFUTEX_BYNAME | UFUTEX_CREAT;
        let long = [b'x'; crate::named::NAME_MAX + 1];
        let longest = [b'y'; crate::named::NAME_MAX];
        let c = |b: &[u8]| std::ffi::CString::new(b).unwrap();
        let (long, longest) = (c(&long), c(&longest));
        let mut word = std::ptr::null_mut();
        // SAFETY: `ns` is ours; out-pointers writable; names NUL-terminated or a hole or NULL.
        unsafe {
            assert_eq!(ufutex_sem_open(ns, name, by | UFUTEX_EXCL, 3, &mut o[0]), 0, "made");
            assert_eq!(ufutex_sem_open(ns, name, by, 0, &mut o[1]), 1, "found again");
            assert_eq!((o[0].slot, o[0].gen), (o[1].slot, o[1].gen));
            assert_eq!(ufutex_sem_trywait(&o[1]), 0, "the same object: its count");
            // Names are apart from keys: the address of the name as a key is another object.
            assert_eq!(errno_of(ufutex_sem_open(ns, name, 0, 0, &mut o[2])), libc::ENOENT);
            // Every kind; another kind under the name is EINVAL.
            assert_eq!(ufutex_event_open(ns, other, by, 1, 0, &mut o[2]), 0);
            assert_eq!(errno_of(ufutex_nmutex_open(ns, other, by, &mut o[3])), EINVAL);
            assert_eq!(ufutex_nmutex_open(ns, longest.as_ptr() as u64, by, &mut o[3]), 0);
            let w = c"a-word".as_ptr() as u64;
            assert_eq!(ufutex_word_open_sized(ns, w, by, super::super::abi::UFUTEX_SIZE_U16, &mut o[3], &mut word), 0);
            // Bad names: nothing is made.
            assert_eq!(errno_of(ufutex_sem_open(ns, 0, by, 0, &mut o[3])), EFAULT);
            assert_eq!(errno_of(ufutex_sem_open(ns, hole() as u64, by, 0, &mut o[3])), EFAULT);
            assert_eq!(errno_of(ufutex_sem_open(ns, c"".as_ptr() as u64, by, 0, &mut o[3])), EINVAL);
            let too_long = ufutex_sem_open(ns, long.as_ptr() as u64, by, 0, &mut o[3]);
            assert_eq!(errno_of(too_long), libc::ENAMETOOLONG);
            // Removal by name: the handles fail, the name is free again.
            assert_eq!(ufutex_obj_remove_name(ns, name as *const libc::c_char), 0);
            assert_eq!(errno_of(ufutex_sem_trywait(&o[0])), EIDRM);
            assert_eq!(errno_of(ufutex_obj_remove_name(ns, name as *const libc::c_char)), libc::ENOENT);
            assert_eq!(errno_of(ufutex_obj_remove_name(ns, hole() as *const libc::c_char)), EFAULT);
            for n in [other, longest.as_ptr() as u64, w] {
                assert_eq!(ufutex_obj_remove_name(ns, n as *const libc::c_char), 0);
            }
        }
    }

    #[test]
    fn header_states_the_named_abi() {
        const HEADER: &str = include_str!("../../../../include/ufutex.h");
        let define = |name: &str| {
            let line = HEADER.lines().find(|l| l.split_whitespace().take(2).eq(["#define", name]));
            line.and_then(|l| l.split_whitespace().nth(2)).unwrap_or_else(|| panic!("{name} is not #defined"))
        };
        assert_eq!(define("UFUTEX_CREAT"), format!("{UFUTEX_CREAT:#x}"));
        assert_eq!(define("UFUTEX_EXCL"), format!("{UFUTEX_EXCL:#x}"));
        assert_eq!(define("UFUTEX_COUNTED"), format!("{UFUTEX_COUNTED:#x}"));
        assert_eq!(define("UFUTEX_BYNAME"), format!("{UFUTEX_BYNAME:#x}"));
        assert!(HEADER.contains("long ufutex_obj_close(const struct ufutex_obj *obj);"));
        assert_eq!(define("UFUTEX_WAIT_ABANDONED"), format!("{UFUTEX_WAIT_ABANDONED:#x}"));
        let body = |s: &str| {
            let fields: Vec<String> = HEADER
                .split(&format!("struct {s} {{"))
                .nth(1)
                .and_then(|b| b.split("};").next())
                .unwrap_or_else(|| panic!("struct {s} in the header"))
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('*'))
                .map(|l| l.split("/*").next().unwrap().trim().to_string())
                .collect();
            fields
        };
        assert_eq!(body("ufutex_obj"), ["ufutex_ns_t *ns;", "uint32_t slot;", "uint32_t gen;"]);
        assert_eq!(body("ufutex_waitable"), ["struct ufutex_obj obj;", "uint64_t val;"]);
        let decl =
            "long ufutex_wait_any(const struct ufutex_waitable *objs, unsigned int n, const struct timespec *timeout,";
        assert!(HEADER.contains(decl), "include/ufutex.h lacks `{decl}`");
    }
}

/// Six 32-bit word addresses for random calls: the last two of a page and the first two after
/// the unmapped page that follows it (holding their index), the unmapped page, and NULL.
fn words_around_a_hole() -> [usize; 6] {
    let [page, hole, after] = super::fault::pages_around_a_hole();
    let words = [page + 4096 - 8, page + 4096 - 4, hole, after, after + 4, 0];
    for (i, &w) in words.iter().enumerate().filter(|&(_, &w)| w != hole && w != 0) {
        // SAFETY: our own writable pages.
        unsafe { *(w as *mut u32) = i as u32 };
    }
    words
}

/// A xorshift generator: `next(below)` is in `0..below`.
fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |below| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    }
}

#[test]
fn waitv_plain_pass_agrees_with_the_whole_validation() {
    let words = words_around_a_hole();
    let past = timespec { tv_sec: 0, tv_nsec: 0 };
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let mut tally = std::collections::BTreeMap::new();
    // The value of a word of `size` at `addr`, as the whole validation would read it (the
    // words are ours, little-endian; `i` where it does not read).
    let readable = |j: usize| words[j] != words[2] && words[j] != 0; // not the hole, not NULL
    let value = |addr: usize, size: u32, i: usize| -> u64 {
        let at = |k: usize| words.iter().position(|&w| w == addr + 4 * k).filter(|&j| readable(j));
        match (size, at(0)) {
            (3, Some(j)) => j as u64 | at(1).map_or(0, |k| (k as u64) << 32),
            (_, Some(j)) => j as u64,
            (_, None) => i as u64,
        }
    };
    for _ in 0..20_000 {
        let n = 1 + next(6) as usize;
        let es: Vec<UfutexWaitv> = (0..n)
            .map(|_| {
                let i = next(words.len() as u64) as usize;
                // Every size is plain (a private word without a node).
                let size = next(4) as u32;
                let val = value(words[i], size, i);
                let mut e = UfutexWaitv { val, uaddr: words[i] as u64, flags: 0x80 | size, reserved: 0 };
                match next(24) {
                    0 => e.val += 1,
                    1 => e.val |= 1 << 32,
                    2 => e.uaddr += 2,
                    3 => e.uaddr = 0xffff_8000_0000_0000,
                    4 => e.reserved = 1,
                    5 => e.flags = 0x86, // NUMA: not plain, valid or not
                    6 => e.flags = 0xa2,
                    7 => e.val |= 1 << 8, // wide at 8 bits
                    8 => e.uaddr += 1,
                    _ => {}
                }
                e
            })
            .collect();
        let ptr = es.as_ptr() as usize;
        // SAFETY: `n` readable entries; their words are ours, or NULL, or unreadable.
        let r = unsafe { ufutex_waitv(es.as_ptr().cast_mut(), n as libc::c_uint, 0, &past, libc::CLOCK_MONOTONIC) };
        let fast = if r == -1 { Err(super::Errno(errno_of(r))) } else { Ok(r) };
        let timeout = super::validate::timeout(&past as *const timespec as usize, libc::CLOCK_MONOTONIC).unwrap();
        // SAFETY: the pages stay mapped (leaked) while `words` lives.
        let whole = super::calls::waitv_any(
            ptr,
            n,
            &mut unsafe { super::fault::ReadPages::new() },
            timeout,
            crate::wait::Wakers::Ufutex,
        );
        assert_eq!(fast, whole, "{es:x?}");
        *tally.entry(format!("{fast:?}")).or_insert(0) += 1;
    }
    // Every answer came up, with its share.
    assert_eq!(tally.len(), 4, "{tally:?}"); // EINVAL, EFAULT, EAGAIN, ETIMEDOUT
    assert!(tally.values().all(|&c| c > 500), "{tally:?}");
}

/// `ufutex_wait`'s shortcuts answer as every check would (`wait_whole`), whatever the address,
/// value, mask and flags: random calls near the plain private 32-bit word, none of which may
/// sleep (every value that fits differs from its word), told both ways.
#[test]
fn wait_u32_fast_path_agrees_with_the_general_way() {
    isolated_shared_table();
    let mut words = words_around_a_hole().to_vec();
    words.push(0xffff_8000_0000_0000); // the kernel's half
    let mut next = xorshift(0x2545_f491_4f6c_dd1d);
    let mut tally = std::collections::BTreeMap::new();
    for _ in 0..20_000 {
        let i = next(words.len() as u64) as usize;
        let (mut uaddr, mut val, mut mask, mut flags) = (words[i], i as u64 + 1 + next(3), u64::from(u32::MAX), P32);
        match next(12) {
            0 => val |= 1 << 32,
            1 => mask = 0,
            2 => mask = 1 << 32,
            3 => uaddr += 2,
            4 => flags = UFUTEX_PRIVATE | UFUTEX_SIZE_U16,
            5 => flags = P32 | 0x40,
            6 => flags = UFUTEX_SIZE_U32, // process-shared
            7 => mask = 1 + next(0xffff),
            _ => {}
        }
        let (a, ts) = (uaddr as *mut libc::c_void, null());
        // SAFETY: every address is ours, NULL, unmapped or in the kernel's half; no call sleeps.
        let (fast, general) =
            unsafe { (ufutex_wait(a, val, mask, flags, ts, 0), super::calls::wait_whole(a, val, mask, flags, ts, 0)) };
        assert_eq!((fast, errno_of(fast)), (general, errno_of(general)), "{uaddr:#x} {val:#x} {mask:#x} {flags:#x}");
        *tally.entry(errno_of(fast)).or_insert(0) += 1;
    }
    assert_eq!(tally.keys().copied().collect::<Vec<_>>(), [EAGAIN, EFAULT, EINVAL], "{tally:?}");
    assert!(tally.values().all(|&c| c > 500), "{tally:?}");
}

/// A deadline already passed, on either clock: a wait of a shared word, and a waitv of shared
/// words or of private and shared ones together, time out at once when every value matches and
/// say `EAGAIN` when one differs (the compare comes first, as the kernel's).
#[test]
fn shared_and_mixed_waits_with_a_passed_deadline() {
    isolated_shared_table();
    let (p, s) = (5u32, 6u32);
    let past = timespec { tv_sec: 0, tv_nsec: 0 };
    let shared = UFUTEX_SIZE_U32;
    for clock in [CLOCK_MONOTONIC, CLOCK_REALTIME] {
        let wait = |val: u64| {
            let at = &s as *const u32 as *mut libc::c_void;
            // SAFETY: `s` is a live, aligned u32 for the call; `past` a valid timespec.
            errno_of(unsafe { ufutex_wait(at, val, u64::from(u32::MAX), shared, &past, clock) })
        };
        assert_eq!(wait(6), ETIMEDOUT);
        assert_eq!(wait(7), EAGAIN);
        let waitv = |es: &mut [UfutexWaitv]| {
            // SAFETY: `es` are valid entries on live words; `past` a valid timespec.
            errno_of(unsafe { ufutex_waitv(es.as_mut_ptr(), es.len() as libc::c_uint, 0, &past, clock) })
        };
        let mut es = [entry(&p, 5, P32), entry(&s, 6, shared)];
        assert_eq!(waitv(&mut es), ETIMEDOUT, "mixed");
        assert_eq!(waitv(&mut es[1..]), ETIMEDOUT, "shared");
        es[1].val = 7;
        assert_eq!(waitv(&mut es), EAGAIN, "mixed, the shared word differs");
        assert_eq!(waitv(&mut es[1..]), EAGAIN, "shared, differs");
        es[1].val = 6;
        es[0].val = 4;
        assert_eq!(waitv(&mut es), EAGAIN, "mixed, the private word differs");
    }
}

/// The most entries, on words over two pages, through the plain pass: no size limit there.
#[test]
fn waitv_the_most_entries() {
    let [page, hole, after] = super::fault::pages_around_a_hole();
    let word = |i: usize| page + 2048 + 4 * i; // 1024 words from the middle of the page on
    let mut es: Vec<UfutexWaitv> = (0..1024)
        .map(|i| {
            let at = if word(i) < hole { word(i) } else { word(i) - hole + after };
            // SAFETY: our own writable pages.
            unsafe { *(at as *mut u32) = i as u32 };
            UfutexWaitv { val: i as u64, uaddr: at as u64, flags: 0x82, reserved: 0 }
        })
        .collect();
    let past = timespec { tv_sec: 0, tv_nsec: 0 };
    let call = |es: &mut [UfutexWaitv]| {
        // SAFETY: 1024 readable entries on our words (or the hole).
        let r = unsafe { ufutex_waitv(es.as_mut_ptr(), 1024, 0, &past, libc::CLOCK_REALTIME) };
        errno_of(r)
    };
    assert_eq!(call(&mut es), libc::ETIMEDOUT);
    es[1023].val += 1;
    assert_eq!(call(&mut es), libc::EAGAIN);
    es[1000].uaddr = hole as u64;
    assert_eq!(call(&mut es), libc::EFAULT);
    es[1023].uaddr += 1;
    assert_eq!(call(&mut es), libc::EINVAL, "a key after the hole");
}
