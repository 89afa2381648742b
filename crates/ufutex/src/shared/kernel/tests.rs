//! Tests of `UFUTEX_SHARED=kernel` across real processes. A child forked from this
//! multi-threaded test harness runs only a closure prepared before the fork — atomic accesses, system calls and `_exit`, never an
//! allocation, a lock or a panic — so it cannot meet a lock another thread held at the fork.
//! Every wait has a deadline of seconds and every parent loop a bound, so a bug fails a test
//! instead of hanging the suite; nothing asserts on how long anything took.

use super::*;
use crate::deadline::Deadline;
use crate::test_child::Child;
use crate::word::word_of;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// How long a child waits, and the parent polls, before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);
const PAGE: usize = 4096;

/// A deadline `PATIENCE` from now, for a wait that should be woken.
fn patient() -> Timeout {
    Timeout::from(Deadline::from(PATIENCE))
}

/// A deadline that has passed.
fn past() -> Timeout {
    Timeout::from(Deadline::from(Duration::from_millis(0)))
}

/// A wait's outcome as a child's exit status: 0 woken, else the errno.
fn code(r: Result<(), SharedError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// One page mapped `MAP_SHARED`, so a forked child shares it (also `reentry_tests`' shared
/// words).
pub(crate) struct Mapping(*mut u8);

impl Mapping {
    /// Anonymous shared memory, zeroed.
    pub(crate) fn anon() -> Mapping {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Mapping(p.cast())
    }

    /// Page 0 of the file `fd`, shared.
    fn file(fd: libc::c_int) -> Mapping {
        // SAFETY: a fresh mapping of a file at least a page long; no existing memory is touched.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), PAGE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        Mapping(p.cast())
    }

    /// The word of `size` at byte `off`.
    fn word(&self, off: usize, size: Size) -> WordRef {
        assert!(off.is_multiple_of(size.bytes()) && off + size.bytes() <= PAGE);
        // SAFETY: in the page, aligned to its size, and the page stays mapped until the
        // `Mapping` drops, after every use of the word in the test (and for ever in a child,
        // which never unmaps).
        unsafe { WordRef::from_raw(self.0 as usize + off, size) }
    }

    /// The byte at `off`.
    fn u8(&self, off: usize) -> &AtomicU8 {
        assert!(off < PAGE);
        // SAFETY: in the mapped page, borrowed no longer than the mapping.
        unsafe { &*(self.0.add(off) as *const AtomicU8) }
    }

    /// The u32 at `off`.
    pub(crate) fn u32(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= PAGE);
        // SAFETY: aligned, in the mapped page, borrowed no longer than the mapping.
        unsafe { &*(self.0.add(off) as *const AtomicU32) }
    }

    /// The u64 at `off`.
    fn u64(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= PAGE);
        // SAFETY: aligned, in the mapped page, borrowed no longer than the mapping.
        unsafe { &*(self.0.add(off) as *const AtomicU64) }
    }
}

impl Drop for Mapping {
    /// Unmap the page.
    fn drop(&mut self) {
        // SAFETY: our own mapping; every reference into it borrowed `self` and has ended.
        unsafe { libc::munmap(self.0.cast(), PAGE) };
    }
}

/// Run `body` in a child process that exits with its result.
///
/// `body` must only touch atomics, make system calls and return (see the module comment).
fn spawn(body: impl FnOnce() -> i32) -> Child {
    // SAFETY:
    // - fork in a multi-threaded process: the child runs only `body`, which makes system
    //   calls and atomic accesses and allocates, locks and panics nothing, then `_exit`s
    //   without running destructors or atexit handlers; so no lock another thread held at
    //   the fork is ever taken in the child.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let status = body();
        // SAFETY: ends the child at once, as the comment above requires.
        unsafe { libc::_exit(status) };
    }
    Child(pid)
}

impl Child {
    /// Whether the child sleeps in the system call `nr` (its `/proc` state is `S` and its
    /// `/proc/<pid>/syscall` names `nr`). Panics if it has already exited.
    fn sleeps_in(&self, nr: libc::c_long) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        assert_ne!(state, Some('Z'), "child {} exited before it slept", self.0);
        // Where `/proc/<pid>/syscall` cannot be read (ptrace-restricted sandboxes), the state
        // alone: the child makes no other sleeping system call.
        let in_nr = match std::fs::read_to_string(format!("/proc/{}/syscall", self.0)) {
            Ok(call) => call.split_whitespace().next() == Some(nr.to_string().as_str()),
            Err(_) => true,
        };
        state == Some('S') && in_nr
    }

    /// Wait until the child sleeps in the system call `nr`. Once it shows so, the kernel
    /// has queued it, or holds the futex hash bucket lock that any wake or requeue must
    /// take first: a futex operation from now on finds it.
    fn await_sleep(&self, nr: libc::c_long) {
        let start = Instant::now();
        while !self.sleeps_in(nr) {
            assert!(start.elapsed() < PATIENCE, "child {} never slept in system call {nr}", self.0);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The match-any mask of a U32.
const ANY32: u64 = u32::MAX as u64;

/// A lane's container, bits and bitset (little-endian), and a U64's halves.
#[test]
fn lanes_sit_on_their_bits_of_the_containing_u32() {
    let m = Mapping::anon();
    let b2 = Lane::of(m.word(6, Size::U8));
    assert_eq!(b2.container, m.0 as usize + 4);
    assert_eq!((b2.shift, b2.bits), (16, 0xFF));
    assert_eq!(b2.value(0x00AB_0000), 0xAB);
    assert_eq!(b2.bitset(0x0F), Ok(0x000F_0000));
    let h1 = Lane::of(m.word(2, Size::U16));
    assert_eq!((h1.container, h1.shift, h1.bits), (m.0 as usize, 16, 0xFFFF));
    assert_eq!(h1.value(0x1234_5678), 0x1234);
    assert_eq!(h1.bitset(u64::from(u16::MAX)), Ok(0xFFFF_0000));
    assert_eq!(h1.bitset(0x1_0000), Err(SharedError::Invalid));
    assert_eq!(halves(0x1111_2222_3333_4444), [0x3333_4444, 0x1111_2222]);
}

/// A U32 waiter in another process is woken by a wake (and not by a wake of 0).
#[test]
fn u32_wait_is_woken_across_processes() {
    let m = Mapping::anon();
    m.u32(0).store(7, Ordering::SeqCst);
    let (w, t) = (m.word(0, Size::U32), patient());
    let child = spawn(move || code(wait(w, 7, ANY32, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAIT);
    assert_eq!(wake(w, 0, ANY32), Ok(0), "n = 0 wakes nobody");
    assert!(child.sleeps_in(SYS_FUTEX_WAIT));
    assert_eq!(wake(w, usize::MAX, ANY32), Ok(1));
    assert_eq!(child.join(), 0);
}

/// The kernel's shared `FUTEX_WAKE_OP`: the kernel applies the operation to the second word and
/// wakes its waiter in another process when the old value compares true; ENOSYS for an unknown
/// operation, which writes nothing.
#[test]
fn wake_op_wakes_the_second_word_across_processes() {
    let m = Mapping::anon();
    let (a, b, t) = (m.word(0, Size::U32), m.word(64, Size::U32), patient());
    let child = spawn(move || code(wait(b, 0, ANY32, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAIT);
    // SET b = 7, compare old == 0 (FUTEX_OP(0, 7, 0, 0)): true.
    assert_eq!(wake_op(a.addr(), b.addr(), 1, 1, 7 << 12), Ok(1));
    assert_eq!(child.join(), 0);
    assert_eq!(m.u32(64).load(Ordering::SeqCst), 7);
    assert_eq!(wake_op(a.addr(), b.addr(), 1, 1, 5 << 28), Err(libc::ENOSYS), "an unknown op");
    assert_eq!(m.u32(64).load(Ordering::SeqCst), 7, "an unknown op writes nothing");
    // ADD 1, an unknown comparison (6): written, then ENOSYS.
    assert_eq!(wake_op(a.addr(), b.addr(), 1, 1, (1 << 28) | (6 << 24) | (1 << 12)), Err(libc::ENOSYS));
    assert_eq!(m.u32(64).load(Ordering::SeqCst), 8);
}

/// The Rust API's match-any mask (`u64::MAX`, what `shared::wait` and `shared::wake` pass) is
/// every size's all-ones: taken at every size, as the C ABI's all-ones is.
#[test]
fn the_match_any_mask_fits_every_size() {
    let m = Mapping::anon();
    for (off, size) in [(0, Size::U8), (2, Size::U16), (4, Size::U32), (8, Size::U64)] {
        let w = m.word(off, size);
        assert_eq!(wait(w, 1, u64::MAX, Some(&past())), Err(SharedError::WouldBlock), "{size:?}");
        assert_eq!(wait(w, 0, u64::MAX, Some(&past())), Err(SharedError::TimedOut), "{size:?}");
        assert_eq!(wake(w, 1, u64::MAX), Ok(0), "{size:?}");
    }
    // Other masks wider than the word are still refused.
    assert_eq!(wake(m.word(4, Size::U32), 1, 1 << 40), Err(SharedError::Invalid));
}

/// Kernel mode interoperates with processes that call futex_wait/futex_wake directly.
#[test]
fn raw_kernel_calls_meet_kernel_mode() {
    let m = Mapping::anon();
    let (w, t) = (m.word(0, Size::U32), patient());
    // A kernel-mode waiter woken by a plain futex_wake from another process.
    let child = spawn(move || code(wait(w, 0, ANY32, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAIT);
    // SAFETY: futex_wake(uaddr, mask, nr, flags) on our mapped word; reads nothing else.
    let r = unsafe { libc::syscall(SYS_FUTEX_WAKE, m.0, libc::c_ulong::from(MATCH_ANY), 1, FUTEX2_SIZE_U32) };
    assert_eq!(r, 1);
    assert_eq!(child.join(), 0);
    // A plain futex_wait in another process woken by a kernel-mode wake.
    let ts = t.at().to_libc();
    let child = spawn(move || {
        // SAFETY: futex_wait on the mapped word with a live absolute timespec.
        let r = unsafe {
            libc::syscall(
                SYS_FUTEX_WAIT,
                w.addr(),
                0 as libc::c_ulong,
                libc::c_ulong::from(MATCH_ANY),
                FUTEX2_SIZE_U32,
                &ts as *const libc::timespec,
                t.clock.id(),
            )
        };
        if r == 0 {
            0
        } else {
            errno()
        }
    });
    child.await_sleep(SYS_FUTEX_WAIT);
    assert_eq!(wake(w, 1, ANY32), Ok(1));
    assert_eq!(child.join(), 0);
}

/// One file page mapped at two addresses: waiter and waker meet through either.
#[test]
fn a_memfd_mapped_at_two_addresses_is_one_word() {
    // SAFETY: a NUL-terminated name; the call reads nothing else.
    let fd = unsafe { libc::memfd_create(c"ufutex-kernel-test".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: our own fresh fd.
    assert_eq!(unsafe { libc::ftruncate(fd, PAGE as libc::off_t) }, 0);
    let (parents, childs) = (Mapping::file(fd), Mapping::file(fd));
    assert_ne!(parents.0, childs.0);
    // SAFETY: our own fd; both mappings keep the file alive.
    unsafe { libc::close(fd) };
    parents.u32(8).store(3, Ordering::SeqCst);
    let t = patient();
    // The child uses only its own address of the page: U32, then a U16 lane.
    let (w32, w16) = (childs.word(8, Size::U32), childs.word(14, Size::U16));
    let child = spawn(move || code(wait(w32, 3, ANY32, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAIT);
    assert_eq!(wake(parents.word(8, Size::U32), usize::MAX, ANY32), Ok(1));
    assert_eq!(child.join(), 0);
    let child = spawn(move || code(wait(w16, 0, 0xFFFF, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAIT);
    assert_eq!(wake(parents.word(12, Size::U16), usize::MAX, 0xFFFF), Ok(0), "the other half");
    assert_eq!(wake(parents.word(14, Size::U16), usize::MAX, 0xFFFF), Ok(1));
    assert_eq!(child.join(), 0);
}

/// Two waiters on neighbouring lanes of one u32: a wake on one lane wakes that one only.
fn neighbouring_lanes(size: Size) {
    let m = Mapping::anon();
    let (a, b) = (m.word(0, size), m.word(size.bytes(), size));
    let (max, t) = (size.max(), patient());
    let first = spawn(move || code(wait(a, 0, max, Some(&t))));
    let second = spawn(move || code(wait(b, 0, max, Some(&t))));
    first.await_sleep(SYS_FUTEX_WAIT);
    second.await_sleep(SYS_FUTEX_WAIT);
    assert_eq!(wake(a, usize::MAX, max), Ok(1));
    assert_eq!(first.join(), 0);
    assert!(second.sleeps_in(SYS_FUTEX_WAIT), "the neighbour stays asleep");
    assert_eq!(wake(b, usize::MAX, max), Ok(1));
    assert_eq!(second.join(), 0);
}

/// See [`neighbouring_lanes`].
#[test]
fn u8_lanes_wake_only_their_byte() {
    neighbouring_lanes(Size::U8);
}

/// See [`neighbouring_lanes`].
#[test]
fn u16_lanes_wake_only_their_half() {
    neighbouring_lanes(Size::U16);
}

/// A lane wake meets a lane waiter only if their masks share a bit, and only on its byte.
#[test]
fn u8_masks_select_waiters() {
    let m = Mapping::anon();
    m.u8(2).store(9, Ordering::SeqCst);
    let (w, t) = (m.word(2, Size::U8), patient());
    let child = spawn(move || code(wait(w, 9, 0x0F, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAIT);
    assert_eq!(wake(w, usize::MAX, 0xF0), Ok(0), "a disjoint mask");
    assert_eq!(wake(m.word(3, Size::U8), usize::MAX, 0x0F), Ok(0), "the same mask on the next byte");
    assert_eq!(wake(w, usize::MAX, 0x01), Ok(1));
    assert_eq!(child.join(), 0);
}

/// A lane wait compares the lane, whatever its neighbours hold.
#[test]
fn a_lane_wait_ignores_its_neighbours_values() {
    let m = Mapping::anon();
    m.u8(1).store(0x55, Ordering::SeqCst);
    // Byte 0 holds 0 while the u32 does not: the wait is compared on the lane only.
    assert_eq!(wait(m.word(0, Size::U8), 0, 0xFF, Some(&past())), Err(SharedError::TimedOut));
    assert_eq!(wait(m.word(1, Size::U8), 0, 0xFF, Some(&patient())), Err(SharedError::WouldBlock));
}

/// A U64 waiter in another process (futex_waitv on both halves) is woken by a wake.
#[test]
fn u64_wait_is_woken_by_wake() {
    let m = Mapping::anon();
    m.u64(8).store(0x1_0000_0002, Ordering::SeqCst);
    let (w, t) = (m.word(8, Size::U64), patient());
    let child = spawn(move || code(wait(w, 0x1_0000_0002, u64::MAX, Some(&t))));
    child.await_sleep(SYS_FUTEX_WAITV);
    assert_eq!(wake(w, usize::MAX, u64::MAX), Ok(1));
    assert_eq!(child.join(), 0);
}

/// Requeue returns woken + moved, compares only with a value, and moved waiters are woken
/// from the target.
#[test]
fn requeue_counts_woken_and_moved_across_processes() {
    let m = Mapping::anon();
    m.u32(0).store(5, Ordering::SeqCst);
    let (from, to, t) = (m.word(0, Size::U32), m.word(4, Size::U32), patient());
    let children: Vec<Child> = (0..3).map(|_| spawn(move || code(wait(from, 5, ANY32, Some(&t))))).collect();
    for c in &children {
        c.await_sleep(SYS_FUTEX_WAIT);
    }
    assert_eq!(requeue(from, Some(6), to, 1, 1), Err(SharedError::WouldBlock));
    assert_eq!(requeue(from, Some(5), to, 1, 1), Ok(2), "one woken + one moved");
    assert_eq!(requeue(from, None, to, 0, usize::MAX), Ok(1), "the last one moved");
    assert_eq!(wake(from, usize::MAX, ANY32), Ok(0));
    assert_eq!(wake(to, usize::MAX, ANY32), Ok(2), "the moved ones are woken from the target");
    for c in children {
        assert_eq!(c.join(), 0);
    }
}

/// waitv of three U32 words returns the index of the one woken.
#[test]
fn waitv_returns_the_woken_index() {
    let m = Mapping::anon();
    for (i, v) in [1, 2, 3].into_iter().enumerate() {
        m.u32(4 * i).store(v, Ordering::SeqCst);
    }
    let entries = [(m.word(0, Size::U32), 1), (m.word(4, Size::U32), 2), (m.word(8, Size::U32), 3)];
    let t = patient();
    let child = spawn(move || match waitv(&entries, Some(&t)) {
        Ok(i) => 200 + i as i32,
        Err(e) => e.errno(),
    });
    child.await_sleep(SYS_FUTEX_WAITV);
    assert_eq!(wake(entries[1].0, usize::MAX, ANY32), Ok(1));
    assert_eq!(child.join(), 201);
}

/// What the kernel cannot do exactly is `Invalid`, before any system call.
#[test]
fn inexact_arguments_are_invalid() {
    let (w8, w16, w32, w64) = (AtomicU8::new(0), AtomicU16::new(0), AtomicU32::new(0), AtomicU64::new(0));
    let (w8, w16, w32, w64) = (word_of(&w8), word_of(&w16), word_of(&w32), word_of(&w64));
    let t = patient();
    assert_eq!(wait(w64, 0, 1, Some(&t)), Err(SharedError::Invalid), "U64 with a mask");
    assert_eq!(wake(w64, 1, 1), Err(SharedError::Invalid), "U64 with a mask");
    assert_eq!(waitv(&[(w32, 0), (w8, 0)], Some(&t)), Err(SharedError::Invalid), "a lane in waitv");
    assert_eq!(waitv(&[(w64, 0)], Some(&t)), Err(SharedError::Invalid), "a U64 in waitv");
    assert_eq!(requeue(w16, Some(0), w32, 1, 1), Err(SharedError::Invalid), "requeue of a U16");
    assert_eq!(requeue(w32, None, w16, 1, 1), Err(SharedError::Invalid), "requeue onto a U16");
    assert_eq!(waitv(&[(w32, 0); WAITV_MAX + 1], Some(&t)), Err(SharedError::Invalid), "129 entries");
    assert_eq!(waitv(&[], Some(&t)), Err(SharedError::Invalid), "no entries");
    assert_eq!(wait(w8, 0x100, 0xFF, Some(&t)), Err(SharedError::Invalid), "a value wider than the word");
    assert_eq!(wake(w16, 1, 0x1_0000), Err(SharedError::Invalid), "a mask wider than the word");
    assert_eq!(wait(w32, 0, 0, Some(&t)), Err(SharedError::Invalid), "a mask of 0");
}

/// A value that differs returns `WouldBlock` at once, for every size and for waitv.
#[test]
fn a_mismatch_is_would_block_without_sleeping() {
    let m = Mapping::anon();
    m.u64(0).store(0x0102_0304_0506_0708, Ordering::SeqCst);
    let t = patient(); // reached only if the wait wrongly slept: the test then fails
                       // Little-endian: byte 1 is 0x07, half 1 is 0x0506, the second u32 0x0102_0304.
    for (size, off, now) in [(Size::U8, 1, 0x07), (Size::U16, 2, 0x0506), (Size::U32, 4, 0x0102_0304)] {
        assert_eq!(wait(m.word(off, size), now + 1, size.max(), Some(&t)), Err(SharedError::WouldBlock));
    }
    let w64 = m.word(0, Size::U64);
    assert_eq!(wait(w64, 0x0102_0304_0506_0709, u64::MAX, Some(&t)), Err(SharedError::WouldBlock));
    let entries = [(m.word(0, Size::U32), 0x0506_0708), (m.word(4, Size::U32), 0)];
    assert_eq!(waitv(&entries, Some(&t)), Err(SharedError::WouldBlock));
}

/// A deadline already passed (on either clock) ends a matching wait with `TimedOut`.
#[test]
fn a_past_deadline_times_out() {
    let m = Mapping::anon();
    let epoch = Timeout::from(Deadline::from(UNIX_EPOCH)); // CLOCK_REALTIME
    for (size, off) in [(Size::U8, 3), (Size::U16, 6), (Size::U32, 8), (Size::U64, 16)] {
        let w = m.word(off, size);
        assert_eq!(wait(w, 0, size.max(), Some(&past())), Err(SharedError::TimedOut), "{size:?}");
        assert_eq!(wait(w, 0, size.max(), Some(&epoch)), Err(SharedError::TimedOut), "{size:?}");
    }
    let entries = [(m.word(0, Size::U32), 0), (m.word(8, Size::U32), 0)];
    assert_eq!(waitv(&entries, Some(&past())), Err(SharedError::TimedOut));
}

/// The legacy fallbacks (used where futex2's 454–456 are missing) meet the futex2 calls:
/// a legacy lane wait is woken by a futex2 wake, a futex2 wait by a legacy wake, and the
/// legacy requeues count woken + moved.
#[test]
fn legacy_fallbacks_meet_futex2() {
    let m = Mapping::anon();
    let (lane, t) = (m.word(1, Size::U8), patient());
    let ts = t.at().to_libc();
    let bits = Lane::of(lane).bitset(0xFF).expect("bitset");
    let child = spawn(move || {
        code(legacy_wait(Lane::of(lane).container, 0, bits, Some(&ts), t.clock.id()).map_err(SharedError::from_errno))
    });
    child.await_sleep(libc::SYS_futex);
    assert_eq!(wake(m.word(0, Size::U8), usize::MAX, 0xFF), Ok(0), "the neighbouring byte");
    assert_eq!(wake(lane, usize::MAX, 0xFF), Ok(1));
    assert_eq!(child.join(), 0);

    let (from, to) = (m.word(8, Size::U32), m.word(12, Size::U32));
    let children: Vec<Child> = (0..3).map(|_| spawn(move || code(wait(from, 0, ANY32, Some(&t))))).collect();
    for c in &children {
        c.await_sleep(SYS_FUTEX_WAIT);
    }
    assert_eq!(legacy_requeue(from.addr(), to.addr(), Some(1), 1, 1), Err(libc::EAGAIN));
    assert_eq!(legacy_requeue(from.addr(), to.addr(), Some(0), 1, 1), Ok(2), "one woken + one moved");
    assert_eq!(legacy_requeue(from.addr(), to.addr(), None, 0, i32::MAX), Ok(1), "the last one moved");
    assert_eq!(legacy_wake(to.addr(), MATCH_ANY, i32::MAX), Ok(2));
    for c in children {
        assert_eq!(c.join(), 0);
    }
}
