//! A wait whose word does not hold the expected value returns `WouldBlock` at once, at every
//! size, through the free functions and through a private domain, whatever its mask or
//! deadline — and leaves nothing queued. A wait that does hold the value sleeps until woken.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, default_domain_lock, fixed};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ufutex::{Deadline, Domain, WaitEntry, WaitError, MATCH_ANY};

#[test]
fn mismatch_is_wouldblock_at_every_size() {
    let _g = default_domain_lock();
    let (w8, w16, w32, w64) = (AtomicU8::new(1), AtomicU16::new(2), AtomicU32::new(3), AtomicU64::new(4));
    assert_eq!(ufutex::wait(&w8, 0, None), Err(WaitError::WouldBlock));
    assert_eq!(ufutex::wait(&w16, 0, None), Err(WaitError::WouldBlock));
    assert_eq!(ufutex::wait(&w32, 0, None), Err(WaitError::WouldBlock));
    assert_eq!(ufutex::wait(&w64, 0, None), Err(WaitError::WouldBlock));
    assert_eq!(Domain::default_domain().queued_waiters(), 0);
}

#[test]
fn mismatch_is_wouldblock_in_a_private_domain() {
    let d = fixed(2);
    let (w8, w16, w32, w64) = (AtomicU8::new(1), AtomicU16::new(2), AtomicU32::new(3), AtomicU64::new(4));
    assert_eq!(d.wait(&w8, 2, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&w16, 3, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&w32, 4, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&w64, 5, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait_bitset(&w32, 0, 0b1, None), Err(WaitError::WouldBlock));
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn mismatch_wins_over_any_mask_and_deadline() {
    let d = fixed(4);
    let w = AtomicU32::new(7);
    // The value is checked first: a deadline already passed, or a mask that no wake could
    // match, does not turn a mismatch into TimedOut.
    let past: [Option<Deadline>; 4] = [
        Some(Deadline::Monotonic(Instant::now())),
        Some(Deadline::Realtime(UNIX_EPOCH)),
        Some(Duration::ZERO.into()),
        Some(Deadline::Realtime(SystemTime::now() + Duration::from_secs(3600))),
    ];
    for dl in past {
        assert_eq!(d.wait(&w, 8, dl), Err(WaitError::WouldBlock), "{dl:?}");
        for mask in [0, 1, MATCH_ANY] {
            assert_eq!(d.wait_bitset(&w, 8, mask, dl), Err(WaitError::WouldBlock), "{dl:?} {mask:#x}");
        }
    }
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn waitv_mismatch_is_wouldblock() {
    let _g = default_domain_lock();
    let (a, b) = (AtomicU8::new(1), AtomicU64::new(u64::MAX));
    let entries = [WaitEntry::new(&a, 1), WaitEntry::new(&b, 0)];
    assert_eq!(ufutex::waitv(&entries, None), Err(WaitError::WouldBlock));
    assert_eq!(Domain::default_domain().queued_waiters(), 0);
}

#[test]
fn wouldblock_maps_to_eagain() {
    assert_eq!(WaitError::WouldBlock.errno(), libc::EAGAIN);
    let e: std::io::Error = WaitError::WouldBlock.into();
    assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
    assert!(!WaitError::WouldBlock.to_string().is_empty());
}

#[test]
fn many_threads_mismatching_leave_nothing_queued() {
    let d = fixed(2);
    let words: Vec<AtomicU32> = (0..16).map(AtomicU32::new).collect();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (d, words) = (&d, &words);
            s.spawn(move || {
                for i in 0..10_000u32 {
                    let w = &words[((i + t) % 16) as usize];
                    let v = w.load(Ordering::Relaxed);
                    assert_eq!(d.wait(w, v.wrapping_add(1), None), Err(WaitError::WouldBlock));
                }
            });
        }
    });
    assert_eq!(d.queued_waiters(), 0);
    for w in &words {
        assert_eq!(d.wake(w, usize::MAX), 0);
    }
}

#[test]
fn a_changed_value_after_sleeping_is_seen_by_the_retry() {
    // The classic loop: the waiter sleeps on 0, the waker stores 1 then wakes; the waiter's
    // next wait on 0 would block, so it leaves the loop.
    let d = fixed(2);
    let w = AtomicU16::new(0);
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let r = d.wait(&w, 0, None);
            assert_eq!(d.wait(&w, 0, None), Err(WaitError::WouldBlock));
            r
        });
        await_queued(&d, 1);
        w.store(1, Ordering::SeqCst);
        assert_eq!(d.wake(&w, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
    assert_eq!(d.queued_waiters(), 0);
}
