//! The Linux parker: a per-thread `AtomicU32` slept on with the kernel futex.
//!
//! | bits | meaning |
//! |---|---|
//! | 0..31 | unparks received this episode |
//! | 31 | SLEEPING: the thread is (about to be) in `futex_wait`; an unpark must call `futex_wake` |

use super::futex::{self, KernelWait};
use super::ParkTimeout;
use crate::deadline::Timeout;
use std::sync::atomic::{AtomicU32, Ordering};

const SLEEPING: u32 = 1 << 31;
const COUNT: u32 = SLEEPING - 1;

/// Busy-wait iterations before yielding. A PAUSE costs ~70 ns on the target machines (AMD EPYC),
/// so this spins ~4 µs: long enough to catch a partner that is running on the other CPU (a
/// spin round trip is ~40 ns, a wake's slow path well under a µs), short enough that a thread
/// whose partner is *not* running wastes little. See BENCHMARKS.md for the measurements.
const SPINS: u32 = 64;
/// Then give the CPU away this many times before sleeping: when the machine is oversubscribed
/// the partner may be runnable on this very CPU, and a yield lets it run without the ~15–55 µs
/// sleep/wake round trip; on an idle CPU a yield returns at once.
const YIELDS: u32 = 4;

pub(crate) struct Parker {
    word: AtomicU32,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker { word: AtomicU32::new(0) }
    }

    #[inline]
    fn reached(&self, need: u32) -> bool {
        // Acquire: pairs with the unpark's Release, so the waker's queue surgery is visible.
        self.word.load(Ordering::Acquire) & COUNT >= need
    }

    /// Wait until `need` unparks of this episode have arrived, or `timeout` passes.
    pub(crate) fn park(&self, need: u32, timeout: Option<&Timeout>) -> Result<(), ParkTimeout> {
        for _ in 0..SPINS {
            if self.reached(need) {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        for _ in 0..YIELDS {
            if self.reached(need) {
                return Ok(());
            }
            std::thread::yield_now();
        }
        loop {
            let v = self.word.load(Ordering::Acquire);
            if v & COUNT >= need {
                return Ok(());
            }
            if v & SLEEPING == 0
                && self.word.compare_exchange(v, v | SLEEPING, Ordering::Relaxed, Ordering::Relaxed).is_err()
            {
                continue; // an unpark arrived: re-check
            }
            match futex::wait(&self.word, v | SLEEPING, timeout) {
                KernelWait::Retry => {}
                KernelWait::TimedOut if !self.reached(need) => return Err(ParkTimeout::TimedOut),
                KernelWait::Interrupted if !self.reached(need) => return Err(ParkTimeout::Interrupted),
                _ => return Ok(()),
            }
        }
    }

    /// End the episode. Only once every unpark owed to it has arrived.
    pub(crate) fn reset(&self) {
        self.word.store(0, Ordering::Relaxed);
    }

    /// Taken by a waker under the bucket lock, used after unlocking it.
    pub(crate) fn handle(&self) -> UnparkHandle {
        UnparkHandle { word: &self.word }
    }
}

pub(crate) struct UnparkHandle {
    word: *const AtomicU32,
}

impl UnparkHandle {
    pub(crate) fn unpark(self) {
        // SAFETY:
        // - the parked thread cannot end its episode (nor return, nor exit) before this
        //   increment, because it waits for the count to include it: the word is alive here.
        // Release: publishes the dequeue to the woken thread's Acquire load.
        let prev = unsafe { &*self.word }.fetch_add(1, Ordering::Release);
        if prev & SLEEPING != 0 {
            // From here on the memory may be gone: only its address is used.
            futex::wake_addr(self.word, 1);
        }
    }
}
