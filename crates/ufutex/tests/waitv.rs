//! waitv: waits on any of 1..=1024 entries of mixed sizes; returns the highest index a waker
//! dequeued; `WouldBlock` if any entry mismatches (and then nothing stays queued), unless an
//! earlier entry was already woken while later ones were being queued — then that entry's
//! index. Duplicate entries are separate waiters: a wake that takes two counts two.
#![cfg(not(ufutex_loom))]

mod common;

use common::{await_queued, await_until, fixed, watchdog, StopOnDrop};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use ufutex::{WaitEntry, WaitError, WAITV_MAX};

/// Four words of each size.
struct Words {
    w8: [AtomicU8; 4],
    w16: [AtomicU16; 4],
    w32: [AtomicU32; 4],
    w64: [AtomicU64; 4],
}

impl Words {
    fn new() -> Words {
        Words {
            w8: std::array::from_fn(|i| AtomicU8::new(i as u8)),
            w16: std::array::from_fn(|i| AtomicU16::new(0x100 + i as u16)),
            w32: std::array::from_fn(|i| AtomicU32::new(0x1_0000 + i as u32)),
            w64: std::array::from_fn(|i| AtomicU64::new(0x1_0000_0000 + i as u64)),
        }
    }

    /// Entries interleaving the sizes: u8, u16, u32, u64, u8, ... (16 entries), all matching.
    fn entries(&self) -> Vec<WaitEntry<'_>> {
        let mut v = Vec::new();
        for i in 0..4 {
            v.push(WaitEntry::new(&self.w8[i], self.w8[i].load(Ordering::SeqCst)));
            v.push(WaitEntry::new(&self.w16[i], self.w16[i].load(Ordering::SeqCst)));
            v.push(WaitEntry::new(&self.w32[i], self.w32[i].load(Ordering::SeqCst)));
            v.push(WaitEntry::new(&self.w64[i], self.w64[i].load(Ordering::SeqCst)));
        }
        v
    }

    /// Wake whatever word entry `i` of `entries()` names.
    fn wake(&self, d: &ufutex::Domain, i: usize, n: usize) -> usize {
        let k = i / 4;
        match i % 4 {
            0 => d.wake(&self.w8[k], n),
            1 => d.wake(&self.w16[k], n),
            2 => d.wake(&self.w32[k], n),
            _ => d.wake(&self.w64[k], n),
        }
    }
}

#[test]
fn mixed_sizes_each_entry_wakes_with_its_index() {
    watchdog();
    let d = fixed(2);
    let words = Words::new();
    for i in 0..16 {
        std::thread::scope(|s| {
            let t = s.spawn(|| d.waitv(&words.entries(), None));
            await_queued(&d, 16);
            assert_eq!(words.wake(&d, i, usize::MAX), 1, "entry {i}");
            assert_eq!(t.join().unwrap(), Ok(i));
        });
        assert_eq!(d.queued_waiters(), 0, "the other 15 entries were dequeued on return");
    }
}

#[test]
fn single_entry() {
    watchdog();
    let d = fixed(4);
    let w = AtomicU16::new(0xFFFF);
    std::thread::scope(|s| {
        let t = s.spawn(|| d.waitv(&[WaitEntry::new(&w, 0xFFFF)], None));
        await_queued(&d, 1);
        assert_eq!(d.wake(&w, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(0));
    });
}

#[test]
fn duplicates_each_count_and_the_highest_index_is_returned() {
    watchdog();
    let d = fixed(2);
    let (a, b, c) = (AtomicU32::new(0), AtomicU8::new(0), AtomicU64::new(0));
    // [b, a, c, a, b]: one wake of `a` with n = MAX takes two entries (1 and 3).
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            d.waitv(
                &[
                    WaitEntry::new(&b, 0),
                    WaitEntry::new(&a, 0),
                    WaitEntry::new(&c, 0),
                    WaitEntry::new(&a, 0),
                    WaitEntry::new(&b, 0),
                ],
                None,
            )
        });
        await_queued(&d, 5);
        assert_eq!(d.wake(&a, usize::MAX), 2, "each duplicate is a waiter");
        assert_eq!(t.join().unwrap(), Ok(3), "the highest woken index");
    });
    assert_eq!(d.queued_waiters(), 0);
    // [a, a]: a wake of one takes the older entry, index 0.
    std::thread::scope(|s| {
        let t = s.spawn(|| d.waitv(&[WaitEntry::new(&a, 0), WaitEntry::new(&a, 0)], None));
        await_queued(&d, 2);
        assert_eq!(d.wake(&a, 1), 1);
        assert_eq!(t.join().unwrap(), Ok(0), "entries are queued in index order");
    });
    assert_eq!(d.queued_waiters(), 0);
    assert_eq!(d.wake(&a, usize::MAX), 0, "the duplicate left with its waitv");
}

#[test]
fn mismatch_on_any_entry_is_wouldblock() {
    let d = fixed(2);
    let words = Words::new();
    for bad in 0..16 {
        let mut e = words.entries();
        let k = bad / 4;
        e[bad] = match bad % 4 {
            0 => WaitEntry::new(&words.w8[k], words.w8[k].load(Ordering::SeqCst).wrapping_add(1)),
            1 => WaitEntry::new(&words.w16[k], words.w16[k].load(Ordering::SeqCst).wrapping_add(1)),
            2 => WaitEntry::new(&words.w32[k], words.w32[k].load(Ordering::SeqCst).wrapping_add(1)),
            _ => WaitEntry::new(&words.w64[k], words.w64[k].load(Ordering::SeqCst).wrapping_add(1)),
        };
        assert_eq!(d.waitv(&e, None), Err(WaitError::WouldBlock), "entry {bad} mismatches");
        assert_eq!(d.queued_waiters(), 0);
    }
}

#[test]
fn mismatch_found_while_queueing_leaves_nothing_queued() {
    watchdog();
    // The last entry's word flips while the first entries are queued: the waitv must either
    // sleep (and be woken) or return WouldBlock having dequeued what it queued.
    let d = fixed(2);
    let words: Vec<AtomicU32> = (0..WAITV_MAX).map(|_| AtomicU32::new(0)).collect();
    let last = &words[WAITV_MAX - 1];
    let stop = AtomicBool::new(false);
    let (mut wouldblock, mut woken) = (0, 0);
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                last.fetch_xor(1, Ordering::SeqCst);
            }
        });
        for _ in 0..50 {
            let v = last.load(Ordering::SeqCst);
            let mut e: Vec<_> = words[..WAITV_MAX - 1].iter().map(|w| WaitEntry::new(w, 0)).collect();
            e.push(WaitEntry::new(last, v));
            match d.waitv(&e, Some(std::time::Duration::from_millis(1).into())) {
                Err(WaitError::WouldBlock) => wouldblock += 1,
                Err(WaitError::TimedOut) => woken += 1,
                r => panic!("nobody wakes these words: {r:?}"),
            }
            assert_eq!(d.queued_waiters(), 0);
        }
    });
    assert_eq!(wouldblock + woken, 50);
}

#[test]
fn entry_woken_while_later_entries_are_queued_wins_over_a_later_mismatch() {
    watchdog();
    // Entry 0 is woken as soon as it is queued, then the last entry's value changes: whether the
    // waitv meets the mismatch or not, it was woken first, so it returns Ok(0), never
    // WouldBlock — and the wake is not lost.
    let d = fixed(2);
    let words: Vec<AtomicU64> = (0..WAITV_MAX).map(|_| AtomicU64::new(0)).collect();
    for round in 0..20u64 {
        let last = &words[WAITV_MAX - 1];
        let v = last.load(Ordering::SeqCst);
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                let mut e: Vec<_> = words[..WAITV_MAX - 1].iter().map(|w| WaitEntry::new(w, 0)).collect();
                e.push(WaitEntry::new(last, v));
                d.waitv(&e, None)
            });
            await_until("entry 0 to be queued", || d.queued_waiters() >= 1);
            assert_eq!(d.wake(&words[0], 1), 1, "round {round}: entry 0 was queued");
            last.store(v + 1, Ordering::SeqCst);
            assert_eq!(t.join().unwrap(), Ok(0), "round {round}");
        });
        assert_eq!(d.queued_waiters(), 0);
    }
}

#[test]
fn woken_entry_racing_a_mismatch_is_accounted() {
    watchdog();
    // A loop of waitvs on [a, b0..b1022, last] against a waker of `a` and a flipper of `last`:
    // every wake of `a` that counted one waiter is exactly one waitv returning Ok(0).
    //
    // It is also the bucket lock's starvation test: each wake walks the ~512 groups queued in
    // the busy bucket and the waker takes the lock back at once, so the waitv thread, asleep
    // on the lock, wakes to find it taken again, until it asks for a hand-over (`lock.rs`).
    // Without the hand-over, on an idle 2-CPU AMD EPYC family 23 host under the portable
    // parker, a run took 115–182 s (some past the watchdog); with it, 4–6 s.
    let d = fixed(2);
    let a = AtomicU32::new(0);
    let words: Vec<AtomicU32> = (0..WAITV_MAX - 1).map(|_| AtomicU32::new(0)).collect();
    let last = &words[WAITV_MAX - 2];
    let done = AtomicBool::new(false);
    let woken = AtomicUsize::new(0);
    let oks = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                woken.fetch_add(d.wake(&a, 1), Ordering::SeqCst);
                last.fetch_xor(1, Ordering::SeqCst);
            }
        });
        let _stop = StopOnDrop(&done); // the waker stops even if this thread panics
        let mut oks = 0;
        for _ in 0..300 {
            let mut e = vec![WaitEntry::new(&a, 0)];
            e.extend(words.iter().map(|w| WaitEntry::new(w, w.load(Ordering::SeqCst))));
            match d.waitv(&e, None) {
                Ok(0) => oks += 1,
                Err(WaitError::WouldBlock) => {}
                r => panic!("only entry 0 is ever woken: {r:?}"),
            }
        }
        oks
    });
    assert_eq!(woken.into_inner(), oks, "every counted wake is one Ok, and no Ok without a wake");
    assert_eq!(d.queued_waiters(), 0);
}

#[test]
fn max_entries_of_mixed_sizes() {
    watchdog();
    let d = fixed(64);
    let w8: Vec<AtomicU8> = (0..256).map(|_| AtomicU8::new(0xFF)).collect();
    let w16: Vec<AtomicU16> = (0..256).map(|_| AtomicU16::new(0xFFFF)).collect();
    let w32: Vec<AtomicU32> = (0..256).map(|_| AtomicU32::new(u32::MAX)).collect();
    let w64: Vec<AtomicU64> = (0..256).map(|_| AtomicU64::new(u64::MAX)).collect();
    let entries: Vec<WaitEntry<'_>> = (0..256)
        .flat_map(|i| {
            [
                WaitEntry::new(&w8[i], 0xFF),
                WaitEntry::new(&w16[i], 0xFFFF),
                WaitEntry::new(&w32[i], u32::MAX),
                WaitEntry::new(&w64[i], u64::MAX),
            ]
        })
        .collect();
    assert_eq!(entries.len(), WAITV_MAX);
    for (i, wake) in [(0usize, 0usize), (777, 777), (WAITV_MAX - 1, WAITV_MAX - 1)] {
        std::thread::scope(|s| {
            let t = s.spawn(|| d.waitv(&entries, None));
            await_queued(&d, WAITV_MAX);
            let k = wake / 4;
            let n = match wake % 4 {
                0 => d.wake(&w8[k], 1),
                1 => d.wake(&w16[k], 1),
                2 => d.wake(&w32[k], 1),
                _ => d.wake(&w64[k], 1),
            };
            assert_eq!(n, 1);
            assert_eq!(t.join().unwrap(), Ok(i));
        });
        assert_eq!(d.queued_waiters(), 0);
    }
    let mut bad = entries.clone();
    bad[WAITV_MAX - 1] = WaitEntry::new(&w64[255], 0);
    assert_eq!(d.waitv(&bad, None), Err(WaitError::WouldBlock));
    assert_eq!(ufutex::waitv(&bad, None), Err(WaitError::WouldBlock));
}

#[test]
#[should_panic(expected = "waitv takes")]
fn more_than_max_entries_panics() {
    let w = AtomicU32::new(1);
    let entries = vec![WaitEntry::new(&w, 0); WAITV_MAX + 1];
    let _ = ufutex::waitv(&entries, None);
}

#[test]
#[should_panic(expected = "waitv takes")]
fn zero_entries_panics() {
    let _ = ufutex::waitv(&[], None);
}

#[test]
fn waitv_twice_on_one_thread_after_a_wake() {
    watchdog();
    // Regression: a thread's waitv nodes are reused; a node left `Woken` by the previous waitv
    // must be queueable again (debug builds asserted "a woken node is never re-queued").
    let d = fixed(2);
    let (a, b) = (AtomicU32::new(0), AtomicU16::new(0));
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let first = d.waitv(&[WaitEntry::new(&a, 0), WaitEntry::new(&b, 0)], None);
            let second = d.waitv(&[WaitEntry::new(&a, 0), WaitEntry::new(&b, 0)], None);
            (first, second)
        });
        await_queued(&d, 2);
        assert_eq!(d.wake(&a, 1), 1);
        await_until("the second waitv to queue both entries", || d.queued_waiters() == 2 || t.is_finished());
        assert_eq!(d.wake(&b, 1), 1);
        assert_eq!(t.join().unwrap(), (Ok(0), Ok(1)));
    });
    assert_eq!(d.queued_waiters(), 0);
}
