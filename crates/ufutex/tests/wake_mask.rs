//! Bitset wakes: `wake_bitset(f, n, mask)` counts and wakes only waiters whose mask shares a
//! bit with `mask` (up to `n` of them, oldest first); non-matching waiters stay queued, in
//! place, and are not counted. A wait with mask 0 is woken by nothing. Masks survive waitv and
//! requeue.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, await_until, fixed, watchdog};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};
use std::sync::Mutex;
use std::time::Duration;
use ufutex::{WaitEntry, WaitError, MATCH_ANY};

fn len<T>(log: &Mutex<Vec<T>>) -> usize {
    log.lock().unwrap().len()
}

#[test]
fn only_matching_waiters_are_counted_and_woken() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU32::new(0);
    let masks = [0b01u64, 0b10, 0b11, MATCH_ANY, 1 << 63];
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (i, &m) in masks.iter().enumerate() {
            let (d, w, log) = (&d, &w, &log);
            s.spawn(move || {
                assert_eq!(d.wait_bitset(w, 0, m, None), Ok(()));
                log.lock().unwrap().push(m);
            });
            await_queued(d, i + 1);
        }
        assert_eq!(d.wake_bitset(&w, usize::MAX, 0b100), 1, "only MATCH_ANY shares bit 2");
        await_until("MATCH_ANY waiter to log", || len(&log) == 1);
        assert_eq!(d.wake_bitset(&w, usize::MAX, 0b01), 2, "0b01 and 0b11 match");
        await_until("two more to log", || len(&log) == 3);
        assert_eq!(d.queued_waiters(), 2);
        assert_eq!(d.wake_bitset(&w, usize::MAX, 0), 0, "mask 0 matches nobody");
        assert_eq!(d.wake_bitset(&w, usize::MAX, 1 << 63), 1, "the top bit is a bit like any other");
        await_until("the top-bit waiter to log", || len(&log) == 4);
        assert_eq!(d.wake(&w, usize::MAX), 1, "a plain wake matches any mask");
    });
    let mut got = log.into_inner().unwrap();
    got[1..3].sort();
    assert_eq!(got, vec![MATCH_ANY, 0b01, 0b11, 1 << 63, 0b10]);
}

#[test]
fn n_counts_only_matching_waiters_oldest_first() {
    watchdog();
    // Queue order: 0b10 (a), 0b01 (b), 0b10 (c), 0b01 (e). wake_bitset(1, 0b01) skips a
    // without counting it and takes b; the next takes e; a and c stay in order.
    let d = fixed(2);
    let w = AtomicU8::new(9);
    let log = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (i, (id, m)) in [('a', 0b10u64), ('b', 0b01), ('c', 0b10), ('e', 0b01)].into_iter().enumerate() {
            let (d, w, log) = (&d, &w, &log);
            s.spawn(move || {
                assert_eq!(d.wait_bitset(w, 9, m, None), Ok(()));
                log.lock().unwrap().push(id);
            });
            await_queued(d, i + 1);
        }
        for k in 0..2 {
            assert_eq!(d.wake_bitset(&w, 1, 0b01), 1);
            await_until("the woken waiter to log", || len(&log) == k + 1);
        }
        assert_eq!(d.wake_bitset(&w, 1, 0b01), 0, "no 0b01 waiter left");
        assert_eq!(d.wake_bitset(&w, 1, 0b10), 1);
        await_until("a to log", || len(&log) == 3);
        assert_eq!(d.wake_bitset(&w, 5, 0b11), 1);
    });
    assert_eq!(log.into_inner().unwrap(), vec!['b', 'e', 'a', 'c']);
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn a_mask_zero_waiter_is_woken_by_nothing() {
    watchdog();
    let d = fixed(2);
    let w = AtomicU64::new(1);
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait_bitset(&w, 1, 0, Some(Duration::from_millis(100).into())));
        await_queued(&d, 1);
        assert_eq!(d.wake(&w, usize::MAX), 0);
        assert_eq!(d.wake_bitset(&w, usize::MAX, MATCH_ANY), 0);
        assert_eq!(t.join().unwrap(), Err(WaitError::TimedOut));
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn waitv_entries_keep_their_own_masks() {
    watchdog();
    let d = fixed(2);
    let (a, b) = (AtomicU32::new(0), AtomicU32::new(0));
    std::thread::scope(|s| {
        let t =
            s.spawn(|| d.waitv(&[WaitEntry::new(&a, 0).with_mask(0b01), WaitEntry::new(&b, 0).with_mask(0b10)], None));
        await_queued(&d, 2);
        assert_eq!(d.wake_bitset(&a, 1, 0b10), 0, "entry 0 only takes 0b01");
        assert_eq!(d.wake_bitset(&b, 1, 0b01), 0, "entry 1 only takes 0b10");
        assert_eq!(d.queued_waiters(), 2);
        assert_eq!(d.wake_bitset(&b, 1, 0b110), 1);
        assert_eq!(t.join().unwrap(), Ok(1));
    });
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn requeue_moves_waiters_of_any_mask_and_keeps_the_mask() {
    watchdog();
    let d = fixed(2);
    let (from, to) = (AtomicU32::new(0), AtomicU32::new(0));
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait_bitset(&from, 0, 0b100, None));
        await_queued(&d, 1);
        assert_eq!(d.requeue(&from, 0, &to, 0, 1), Ok(1), "requeue takes waiters whatever their mask");
        assert_eq!(d.wake_bitset(&to, 1, 0b011), 0, "the moved waiter still has mask 0b100");
        assert_eq!(d.wake_bitset(&from, 1, 0b100), 0, "and is no longer on the source");
        assert_eq!(d.wake_bitset(&to, 1, 0b100), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}
