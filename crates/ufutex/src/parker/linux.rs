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

/// The adaptive spin, in PAUSEs (~70 ns each on the target AMD EPYC machines). A cross-CPU
/// sleep/wake costs 15–55 µs there, a spin round trip ~40 ns. Spinning pays when the partner
/// runs on the other CPU (a pinned ping-pong stays out of the kernel with a few µs of spin)
/// and costs when it does not (oversubscribed, a spin burns CPU the partner needs). So each
/// thread keeps a score of how its recent spins went: a park that ended while spinning adds
/// `SCORE_WIN`, one that had to yield or sleep takes one off. While the score is above zero
/// the thread spins up to `SPIN_LONG`, else only `SPIN_SHORT` — enough to notice a partner that
/// is already answering, and to climb back when the workload changes. Spinning stays on while
/// more than one park in `SCORE_WIN + 1` succeeds by spinning. BENCHMARKS.md has the numbers.
const SPIN_SHORT: u32 = 8;
const SPIN_LONG: u32 = 128;
const SCORE_WIN: u32 = 3;
const SCORE_MAX: u32 = 32;
const SCORE_START: u32 = 8;
/// Then give the CPU away once before sleeping: when the machine is oversubscribed the partner
/// may be runnable on this very CPU, and a yield lets it run without a sleep/wake round trip;
/// on an idle CPU the yield returns at once.
const YIELDS: u32 = 1;

pub(crate) struct Parker {
    word: AtomicU32,
    /// The adaptive spin score; only its own thread reads or writes it (Relaxed).
    score: AtomicU32,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker { word: AtomicU32::new(0), score: AtomicU32::new(SCORE_START) }
    }

    #[inline]
    fn reached(&self, need: u32) -> bool {
        // Acquire: pairs with the unpark's Release, so the waker's queue surgery is visible.
        self.word.load(Ordering::Acquire) & COUNT >= need
    }

    /// Wait until `need` unparks of this episode have arrived, or `timeout` passes.
    pub(crate) fn park(&self, need: u32, timeout: Option<&Timeout>) -> Result<(), ParkTimeout> {
        let score = self.score.load(Ordering::Relaxed);
        let budget = if score > 0 { SPIN_LONG } else { SPIN_SHORT };
        for _ in 0..budget {
            if self.reached(need) {
                self.score.store((score + SCORE_WIN).min(SCORE_MAX), Ordering::Relaxed);
                return Ok(());
            }
            std::hint::spin_loop();
        }
        self.score.store(score.saturating_sub(1), Ordering::Relaxed);
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
            // Relaxed: SLEEPING only tells an unpark to call futex_wake; the kernel compares the
            // whole word again under its own lock, so an unpark that lands in between makes
            // futex_wait return EAGAIN instead of sleeping.
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
        // Relaxed: no unpark of this episode is in flight any more, and the first waker of the
        // next one reaches this thread's node only through a bucket lock taken after this.
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
