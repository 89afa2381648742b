//! Every word size at its limits: a word holding its size's maximum (0xFF, 0xFFFF, u32::MAX,
//! u64::MAX) can be waited on, woken, requeued and waitv'd; values are compared at the word's
//! own width — bits beyond it are not looked at, and a u64 whose low 32 bits match but high
//! bits differ is a mismatch (`WouldBlock`) for wait, waitv and requeue.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, fixed, watchdog};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use ufutex::{Domain, Futex, WaitEntry, WaitError};

/// Wait on `w` holding `v` from another thread, wake it, and check it returned Ok.
fn sleeps_and_wakes<F: Futex>(d: &Domain, w: &F, v: F::Value)
where
    F::Value: Send,
{
    std::thread::scope(|s| {
        let t = s.spawn(move || d.wait(w, v, None));
        await_queued(d, 1);
        assert_eq!(d.wake(w, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

#[test]
fn each_size_at_its_maximum_sleeps_and_wakes() {
    watchdog();
    let d = fixed(2);
    sleeps_and_wakes(&d, &AtomicU8::new(0xFF), 0xFF);
    sleeps_and_wakes(&d, &AtomicU16::new(0xFFFF), 0xFFFF);
    sleeps_and_wakes(&d, &AtomicU32::new(u32::MAX), u32::MAX);
    sleeps_and_wakes(&d, &AtomicU64::new(u64::MAX), u64::MAX);
    // and at zero
    sleeps_and_wakes(&d, &AtomicU8::new(0), 0);
    sleeps_and_wakes(&d, &AtomicU64::new(0), 0);
}

#[test]
fn each_size_off_by_one_below_its_maximum_is_wouldblock() {
    let d = fixed(2);
    assert_eq!(d.wait(&AtomicU8::new(0xFF), 0xFE, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&AtomicU16::new(0xFFFF), 0xFFFE, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&AtomicU32::new(u32::MAX), u32::MAX - 1, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&AtomicU64::new(u64::MAX), u64::MAX - 1, None), Err(WaitError::WouldBlock));
    // The max of a narrower size is not the max of a wider one.
    assert_eq!(d.wait(&AtomicU16::new(0xFFFF), 0xFF, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&AtomicU32::new(u32::MAX), 0xFFFF, None), Err(WaitError::WouldBlock));
    assert_eq!(d.wait(&AtomicU64::new(u64::MAX), u32::MAX as u64, None), Err(WaitError::WouldBlock));
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn u64_with_matching_low_half_but_different_high_half_is_wouldblock() {
    let d = fixed(2);
    for (held, expected) in [
        (0x0000_0001_0000_0000u64, 0u64),
        (0xFFFF_FFFF_0000_0007, 7),
        (0x8000_0000_0000_0000, 0),
        (7, 0xFFFF_FFFF_0000_0007),
        (u64::MAX, u32::MAX as u64),
    ] {
        let w = AtomicU64::new(held);
        assert_eq!(d.wait(&w, expected, None), Err(WaitError::WouldBlock), "{held:#x} vs {expected:#x}");
        assert_eq!(d.waitv(&[WaitEntry::new(&w, expected)], None), Err(WaitError::WouldBlock));
        let to = AtomicU64::new(0);
        assert_eq!(d.requeue(&w, expected, &to, 1, 1), Err(WaitError::WouldBlock));
    }
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn u64_high_half_change_while_queued_is_seen_by_the_retry() {
    watchdog();
    // The waiter sleeps on a u64; the waker changes only the high half and wakes: the next
    // wait on the old value must see the change (the whole 64 bits are compared).
    let d = fixed(2);
    let w = AtomicU64::new(5);
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let r = d.wait(&w, 5, None);
            (r, d.wait(&w, 5, None))
        });
        await_queued(&d, 1);
        w.fetch_add(1 << 32, Ordering::SeqCst);
        assert_eq!(d.wake(&w, 1), 1);
        assert_eq!(t.join().unwrap(), (Ok(()), Err(WaitError::WouldBlock)));
    });
}

#[test]
fn max_values_through_waitv_and_requeue() {
    watchdog();
    let d = fixed(2);
    let (a8, a16, a32, a64) =
        (AtomicU8::new(0xFF), AtomicU16::new(0xFFFF), AtomicU32::new(u32::MAX), AtomicU64::new(u64::MAX));
    let entries = [
        WaitEntry::new(&a8, 0xFF),
        WaitEntry::new(&a16, 0xFFFF),
        WaitEntry::new(&a32, u32::MAX),
        WaitEntry::new(&a64, u64::MAX),
    ];
    std::thread::scope(|s| {
        let t = s.spawn(|| d.waitv(&entries, None));
        await_queued(&d, 4);
        assert_eq!(d.wake(&a16, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(1));
    });
    let (from, to) = (AtomicU8::new(0xFF), AtomicU8::new(0));
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(&from, 0xFF, None));
        await_queued(&d, 1);
        assert_eq!(d.requeue(&from, 0xFE, &to, 0, 1), Err(WaitError::WouldBlock));
        assert_eq!(d.requeue(&from, 0xFF, &to, 0, 1), Ok(1));
        assert_eq!(d.wake(&to, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
    let (from, to) = (AtomicU64::new(u64::MAX), AtomicU64::new(u64::MAX));
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(&from, u64::MAX, None));
        await_queued(&d, 1);
        assert_eq!(d.requeue(&from, u64::MAX, &to, 0, 1), Ok(1));
        assert_eq!(d.wake(&to, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
    assert_eq!(d.queued_waiters(), 0);
}

/// A u8 (and u16, u32) view of the low end of a u64 word: same address, hence the same key.
#[cfg(target_endian = "little")]
#[test]
fn a_narrow_view_compares_only_its_own_width() {
    watchdog();
    let d = fixed(2);
    // 0xAB_CD_EF_01_23_45_67_FF: the low byte is 0xFF, the low u16 0x67FF, the low u32 0x234567FF.
    let wide = AtomicU64::new(0xABCD_EF01_2345_67FF);
    let p = wide.as_ptr();
    // SAFETY:
    // - `p` is valid and aligned for u64, hence for u8, u16 and u32 at the same address;
    // - the views live no longer than `wide`;
    // - no access races across sizes: only the views are read while waiters are queued, and
    //   nothing writes the word during this test (std forbids racing mixed-size accesses).
    let (v8, v16, v32) =
        unsafe { (AtomicU8::from_ptr(p.cast()), AtomicU16::from_ptr(p.cast()), AtomicU32::from_ptr(p.cast())) };
    // Compared at their own widths, the views hold their low parts; the bits above are ignored.
    sleeps_and_wakes(&d, v8, 0xFF);
    sleeps_and_wakes(&d, v16, 0x67FF);
    sleeps_and_wakes(&d, v32, 0x2345_67FF);
    assert_eq!(d.wait(v8, 0x7F, None), Err(WaitError::WouldBlock));
    // Keys are addresses, whatever the size: a wake through the u64 finds a waiter on the u8.
    std::thread::scope(|s| {
        let t = s.spawn(|| d.wait(v8, 0xFF, None));
        await_queued(&d, 1);
        assert_eq!(d.wake(&wide, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(()));
    });
}

#[test]
fn adjacent_small_words_are_separate_futexes() {
    watchdog();
    let d = fixed(2);
    let bytes: [AtomicU8; 8] = std::array::from_fn(|i| AtomicU8::new(if i % 2 == 0 { 0xFF } else { 0 }));
    let halves: [AtomicU16; 4] = std::array::from_fn(|_| AtomicU16::new(0xFFFF));
    std::thread::scope(|s| {
        let t8 = s.spawn(|| d.wait(&bytes[3], 0, None));
        await_queued(&d, 1);
        let t16 = s.spawn(|| d.wait(&halves[2], 0xFFFF, None));
        await_queued(&d, 2);
        for (i, b) in bytes.iter().enumerate() {
            if i != 3 {
                assert_eq!(d.wake(b, usize::MAX), 0, "byte {i}");
            }
        }
        for (i, h) in halves.iter().enumerate() {
            if i != 2 {
                assert_eq!(d.wake(h, usize::MAX), 0, "half {i}");
            }
        }
        assert_eq!(d.wake(&bytes[3], usize::MAX), 1);
        assert_eq!(d.wake(&halves[2], usize::MAX), 1);
        assert_eq!(t8.join().unwrap(), Ok(()));
        assert_eq!(t16.join().unwrap(), Ok(()));
    });
}
