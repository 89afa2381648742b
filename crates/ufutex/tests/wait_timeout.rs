//! Deadlines: a wait with a deadline on either clock (monotonic `Instant`, realtime
//! `SystemTime`, or a relative `Duration`) returns `TimedOut` once the deadline has passed —
//! never before it — unless a waker dequeues it first, in which case it returns `Ok`. A
//! deadline already passed times out at once after the value check (a matching value gives
//! `TimedOut`, a mismatching one `WouldBlock`). A timed-out waiter leaves its queue: a later
//! wake counts nobody.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, fixed, watchdog};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ufutex::{Deadline, WaitEntry, WaitError};

const SHORT: Duration = Duration::from_millis(20);

#[test]
fn relative_deadline_times_out_not_before_it() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(d.wait(&w, 0, Some(SHORT.into())), Err(WaitError::TimedOut));
    assert!(start.elapsed() >= SHORT, "timed out early: {:?}", start.elapsed());
    assert_eq!(d.queued_waiters(), 0);
    assert_eq!(d.wake(&w, usize::MAX), 0);
}

#[test]
fn monotonic_absolute_deadline_times_out_not_before_it() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU64::new(u64::MAX);
    let at = Instant::now() + SHORT;
    assert_eq!(d.wait(&w, u64::MAX, Some(Deadline::Monotonic(at))), Err(WaitError::TimedOut));
    assert!(Instant::now() >= at, "timed out before its monotonic deadline");
    assert_eq!(d.wake(&w, usize::MAX), 0);
}

#[test]
fn realtime_absolute_deadline_times_out_not_before_it() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU8::new(3);
    let at = SystemTime::now() + SHORT;
    assert_eq!(d.wait(&w, 3, Some(Deadline::Realtime(at))), Err(WaitError::TimedOut));
    // Holds unless someone steps the wall clock back during the test.
    assert!(SystemTime::now() >= at, "timed out before its realtime deadline");
    assert_eq!(d.wake(&w, usize::MAX), 0);
}

#[test]
fn passed_deadline_with_matching_value_is_timedout() {
    let d = fixed(2);
    let (w8, w16, w32, w64) = (AtomicU8::new(1), AtomicU16::new(2), AtomicU32::new(3), AtomicU64::new(4));
    let passed = [
        Deadline::Monotonic(Instant::now()),
        Deadline::Monotonic(Instant::now().checked_sub(Duration::from_millis(10)).unwrap_or_else(Instant::now)),
        Deadline::Realtime(UNIX_EPOCH),
        Deadline::Realtime(UNIX_EPOCH - Duration::from_secs(86_400)), // before 1970
        Deadline::Realtime(SystemTime::now() - Duration::from_secs(1)),
        Duration::ZERO.into(),
    ];
    for dl in passed {
        assert_eq!(d.wait(&w8, 1, Some(dl)), Err(WaitError::TimedOut), "{dl:?}");
        assert_eq!(d.wait(&w16, 2, Some(dl)), Err(WaitError::TimedOut), "{dl:?}");
        assert_eq!(d.wait(&w32, 3, Some(dl)), Err(WaitError::TimedOut), "{dl:?}");
        assert_eq!(d.wait(&w64, 4, Some(dl)), Err(WaitError::TimedOut), "{dl:?}");
        assert_eq!(d.waitv(&[WaitEntry::new(&w8, 1), WaitEntry::new(&w64, 4)], Some(dl)), Err(WaitError::TimedOut));
    }
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn passed_deadline_with_mismatching_value_is_wouldblock() {
    let d = fixed(2);
    let w = AtomicU32::new(3);
    for dl in [Deadline::Monotonic(Instant::now()), Deadline::Realtime(UNIX_EPOCH), Duration::ZERO.into()] {
        assert_eq!(d.wait(&w, 4, Some(dl)), Err(WaitError::WouldBlock), "{dl:?}");
        assert_eq!(d.waitv(&[WaitEntry::new(&w, 3), WaitEntry::new(&w, 4)], Some(dl)), Err(WaitError::WouldBlock));
    }
}

#[test]
fn free_functions_time_out_on_both_clocks() {
    watchdog();
    let w = AtomicU16::new(9);
    assert_eq!(ufutex::wait(&w, 9, Some(Duration::from_millis(1).into())), Err(WaitError::TimedOut));
    assert_eq!(ufutex::wait(&w, 9, Some(Deadline::Realtime(SystemTime::now()))), Err(WaitError::TimedOut));
    assert_eq!(ufutex::wait_bitset(&w, 9, 1, Some(Deadline::Monotonic(Instant::now()))), Err(WaitError::TimedOut));
    assert_eq!(ufutex::waitv(&[WaitEntry::new(&w, 9)], Some(SHORT.into())), Err(WaitError::TimedOut));
}

/// A waiter with a far deadline on `clock` is woken before it and returns Ok.
fn woken_before(deadline: Deadline) {
    watchdog();
    let d = fixed(2);
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(&w, 0, Some(deadline)));
        await_queued(&d, 1);
        w.store(1, Ordering::SeqCst);
        assert_eq!(d.wake(&w, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()), "{deadline:?}");
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn woken_before_a_relative_deadline_is_ok() {
    woken_before(Duration::from_secs(600).into());
}

#[test]
fn woken_before_a_monotonic_deadline_is_ok() {
    woken_before(Deadline::Monotonic(Instant::now() + Duration::from_secs(600)));
}

#[test]
fn woken_before_a_realtime_deadline_is_ok() {
    woken_before(Deadline::Realtime(SystemTime::now() + Duration::from_secs(600)));
}

#[test]
fn unrepresentable_relative_deadline_is_forever() {
    // Duration::MAX cannot be added to now: it must not panic, and acts as no deadline.
    woken_before(Duration::MAX.into());
    woken_before(Deadline::Realtime(UNIX_EPOCH + Duration::from_secs(u32::MAX as u64 * 8)));
}

#[test]
fn timed_out_waiter_does_not_take_a_later_wake() {
    watchdog();
    // Two waiters: one short deadline, one none. After the first times out, a wake of one
    // must find and count the second (the timed-out one left the queue), not be swallowed.
    let d = fixed(2);
    let w = AtomicU32::new(0);
    std::thread::scope(|s| {
        let timed = s.spawn(|| d.wait(&w, 0, Some(SHORT.into())));
        await_queued(&d, 1);
        let forever = s.spawn(|| d.wait(&w, 0, None));
        assert_eq!(timed.join().unwrap(), Err(WaitError::TimedOut));
        await_queued(&d, 1);
        assert_eq!(d.wake(&w, 1), 1);
        assert_eq!(forever.join().unwrap(), Ok(()));
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn wakes_racing_timeouts_are_all_accounted() {
    watchdog();
    // Waiters with tiny deadlines (one in fifty already passed: 0 µs, timed out before it
    // queues) against a waker that keeps waking: every wake counted must
    // be an Ok returned by some waiter (a waiter woken while timing out returns Ok), and no Ok
    // without a counted wake.
    let d = fixed(2);
    let w = AtomicU32::new(0);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let (oks, woken) = std::thread::scope(|s| {
        let waiters: Vec<_> = (0..3)
            .map(|t| {
                let (d, w, done) = (&d, &w, &done);
                s.spawn(move || {
                    let mut ok = 0usize;
                    for i in 0..2000u64 {
                        let dl: Deadline = Duration::from_micros((i * 7 + t) % 50).into();
                        match d.wait(w, 0, Some(dl)) {
                            Ok(()) => ok += 1,
                            Err(WaitError::TimedOut) => {}
                            Err(e) => panic!("unexpected {e:?}"),
                        }
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    ok
                })
            })
            .collect();
        let mut woken = 0;
        while done.load(Ordering::SeqCst) < 3 {
            woken += d.wake(&w, 1);
        }
        (waiters.into_iter().map(|t| t.join().unwrap()).sum::<usize>(), woken)
    });
    assert_eq!(oks, woken, "every counted wake is exactly one Ok");
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn timedout_maps_to_etimedout() {
    assert_eq!(WaitError::TimedOut.errno(), libc::ETIMEDOUT);
}
