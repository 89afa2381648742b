//! Parking across processes: a waiting thread sleeps on the `park_seq` word of its first record,
//! in the segment, with the kernel's shared futex; a waker in any process that maps the segment
//! marks the thread's record Woken, bumps that word and wakes it ([`kick`]).
//!
//! The waiter checks its records' states after reading `park_seq` and sleeps expecting the value
//! it read, so a kick between the check and the sleep makes the sleep return at once.

use super::segment::{Record, Segment};
use crate::primitive::Ordering;
#[cfg(not(ufutex_loom))]
use {
    super::segment::REC_WOKEN,
    super::SharedError,
    crate::deadline::{Deadline, Timeout},
    crate::parker::futex::{self, KernelWait},
    std::time::{Duration, Instant},
};

#[cfg(not(ufutex_loom))]
/// How long a waiter spins on its records before it sleeps (a waker in another process takes
/// a few microseconds: two mapping queries and a bucket).
const SPIN: Duration = Duration::from_micros(8);

#[cfg(not(ufutex_loom))]
/// The longest a parked waiter sleeps before it looks at its records again (see [`park`]).
const SLICE: Duration = Duration::from_millis(200);

/// Wake the thread that waits on `rec` (its park record's word). Returns how many threads the
/// kernel woke (0: the thread was not asleep — running, about to sleep, or dead).
pub(crate) fn kick(seg: &Segment, rec: &Record) -> usize {
    let Ok(park) = seg.record(rec.park.load(Ordering::Relaxed)) else { return 0 };
    // Release: the thread that sees the new sequence sees the record's Woken state.
    park.park_seq.fetch_add(1, Ordering::Release);
    #[cfg(not(ufutex_loom))]
    return futex::wake_shared(&park.park_seq, 1);
    // The models' threads never sleep: none is woken.
    #[cfg(ufutex_loom)]
    0
}

/// Sleep until one of `recs` is Woken: its position, or why not.
#[cfg(not(ufutex_loom))]
pub(crate) fn park(seg: &Segment, park: u32, recs: &[u32], timeout: Option<&Timeout>) -> Result<usize, SharedError> {
    let woken = || -> Result<Option<usize>, SharedError> {
        for (i, &r) in recs.iter().enumerate() {
            if seg.record(r)?.state.load(Ordering::Acquire) == REC_WOKEN {
                return Ok(Some(i));
            }
        }
        Ok(None)
    };
    let word = &seg.record(park)?.park_seq;
    let start = Instant::now();
    while start.elapsed() < SPIN {
        if let Some(i) = woken()? {
            return Ok(i);
        }
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
    loop {
        let seq = word.load(Ordering::Acquire);
        if let Some(i) = woken()? {
            return Ok(i);
        }
        // Sleep in slices: a waker that dies between marking a record Woken and kicking its
        // thread (holding the bucket lock) leaves the thread asleep; the slice bounds that.
        let slice = Timeout::from(Deadline::from(SLICE));
        let until = match timeout {
            Some(t) if t.remaining() < SLICE => t,
            _ => &slice,
        };
        match futex::wait_shared(word, seq, Some(until)) {
            KernelWait::Retry => {}
            KernelWait::TimedOut if timeout.is_some_and(|t| t.expired()) => return Err(SharedError::TimedOut),
            KernelWait::TimedOut => {}
            KernelWait::Interrupted => return Err(SharedError::Interrupted),
        }
    }
}
