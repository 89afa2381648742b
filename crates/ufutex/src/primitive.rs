//! The one place the crate takes its atomics from: `std` normally, `loom` under
//! `--cfg ufutex_loom`, so that the protocol code is model-checked unchanged.
//!
//! Loom's blind spots, recorded here because they shape what the models prove:
//! - loom treats `SeqCst` loads, stores and RMWs as `AcqRel`; only `fence(SeqCst)` is modelled
//!   with its full strength. The (A)/(B) protocol therefore relies on the (B) fence, and the
//!   waiter side's SeqCst RMW + SeqCst load is argued in `wait.rs`, not proven by loom alone.
//! - the queue links live in `core::cell::UnsafeCell` even under loom; the bucket lock (a loom
//!   atomic) orders them, so loom checks the lock, not each link access.
//! - no time: a timed park under loom returns `TimedOut` at a point loom chooses, which is
//!   exactly the race between a timeout and a wake that the models want to explore.

#[cfg(ufutex_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
#[cfg(not(ufutex_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

/// A constructor that is a `const fn` outside loom (so statics can be built with it) and a plain
/// `fn` under loom, whose atomics have no const constructors.
macro_rules! const_unless_loom {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $body:block) => {
        #[cfg(not(ufutex_loom))]
        $(#[$m])* $vis const fn $name($($arg: $ty),*) -> $ret $body
        #[cfg(ufutex_loom)]
        $(#[$m])* $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use const_unless_loom;

/// Only for cold paths (resize, policy); under loom a loom mutex, so a model with a resizer
/// blocks the model thread rather than the whole process.
#[cfg(ufutex_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(ufutex_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// One iteration of a busy-wait: a CPU hint normally, a scheduling point under loom.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(ufutex_loom)]
    loom::thread::yield_now();
    #[cfg(not(ufutex_loom))]
    std::hint::spin_loop();
}

/// A speculation fence: no instruction after it starts until every one before it has finished
/// (`lfence` on x86-64; nothing under loom or elsewhere). It ends a mutex's quiet busy round
/// (`sync/spin.rs`): without it, by all the evidence there, the CPU runs the look at the lock
/// that follows the round ahead of time, on a guessed exit from the spin loop, and the
/// speculative reads take the lock's line from its owner while the round was meant to leave
/// it alone.
#[inline(always)]
pub(crate) fn speculation_fence() {
    #[cfg(all(target_arch = "x86_64", not(ufutex_loom)))]
    // SAFETY: `lfence` has no operands and touches no memory; it only holds back later
    // instructions. SSE2, which has it, is part of every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_lfence();
    }
}

/// In a forked child (`fork.rs`), which has one thread: make `a` hold `v`, writing it only if
/// it does not already (the child's first write to a page costs it a copy-on-write fault, and
/// most of what the child resets is as new).
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
pub(crate) fn reset_in_child(a: &AtomicU32, v: u32) {
    // Relaxed: no other thread exists to see it.
    if a.load(Ordering::Relaxed) != v {
        a.store(v, Ordering::Relaxed);
    }
}

/// A yes-or-no fact about the host (the kernel, the CPU) that stays true while the process runs:
/// asked with `ask` the first time, read from `cache` after (0: not asked yet, 1: yes, 2: no).
/// Two threads that ask at once both ask, and get the same answer. std's atomic even under
/// loom: no model depends on such a fact.
#[cfg_attr(ufutex_loom, allow(dead_code))] // its callers are not built under loom
#[inline]
pub(crate) fn asked_once(cache: &std::sync::atomic::AtomicU8, ask: impl FnOnce() -> bool) -> bool {
    use std::sync::atomic::Ordering::Relaxed; // a cached answer, the same for every thread
    match cache.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let yes = ask();
            cache.store(if yes { 1 } else { 2 }, Relaxed);
            yes
        }
    }
}

/// Start reading the cache line at `addr` (`prefetcht0`): a hint to the CPU, nothing else. It
/// neither faults nor changes what the program sees, whatever the address, so `addr` need not
/// point at anything live. A no-op under loom and off x86-64.
#[inline(always)]
pub(crate) fn prefetch(addr: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(ufutex_loom)))]
    // SAFETY: `prefetcht0` only hints the cache; it reads nothing the program sees and cannot
    // fault on any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr.cast::<i8>());
    }
    #[cfg(not(all(target_arch = "x86_64", not(ufutex_loom))))]
    let _ = addr;
}

/// Give up the CPU (a loom scheduling point under loom).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(ufutex_loom)]
    loom::thread::yield_now();
    #[cfg(not(ufutex_loom))]
    std::thread::yield_now();
}

/// [`start_once`]'s states of its byte.
pub(crate) const FRESH: u8 = 0;
pub(crate) const STARTED: u8 = 1;
const STARTING: u8 = 2;

/// A start made once by whichever thread comes first, that no thread goes past before it is
/// made (the fork mark's fresh start, `fork.rs`): the caller that turns `mark` from
/// [`FRESH`] runs `start` and then sets [`STARTED`]; every other caller waits for that (a
/// start is short: it does not sleep). Callers that find it `STARTED` return at once.
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom (its model is)
pub(crate) fn start_once(mark: &AtomicU8, start: impl FnOnce()) {
    // Acquire (both ways): what the start did happens before the caller goes on.
    match mark.compare_exchange(FRESH, STARTING, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {
            start();
            // Release: publishes the start to every thread that reads STARTED.
            mark.store(STARTED, Ordering::Release);
        }
        Err(_) => {
            while mark.load(Ordering::Acquire) != STARTED {
                yield_now();
            }
        }
    }
}

#[cfg(all(test, ufutex_loom))]
mod loom_tests {
    use super::{start_once, AtomicU32, AtomicU8, FRESH, STARTED};
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::Ordering;
    use loom::sync::Arc;

    /// Two threads of a child made without the fork handlers make their first calls at once,
    /// each checking the wiped mark first and then queueing a waiter: the parent's waiters are
    /// forgotten exactly once, before either queues, and both of the child's waiters remain
    /// (a waiter that went on before the start would have been forgotten with the parent's).
    #[test]
    fn the_fresh_start_is_made_once_before_anyone_goes_on() {
        loom::model(|| {
            let mark = Arc::new(AtomicU8::new(FRESH));
            // The queued waiters (the parent's 40 at first), and the starts made.
            let queued = Arc::new(AtomicU32::new(40));
            let starts = Arc::new(UnsafeCell::new(0u32));
            let first_call = |mark: &AtomicU8, queued: &AtomicU32, starts: &UnsafeCell<u32>| {
                if mark.load(Ordering::Acquire) != STARTED {
                    start_once(mark, || {
                        // Relaxed: the start's order is the mark's.
                        queued.store(0, Ordering::Relaxed);
                        // SAFETY: only the one thread that makes the start writes the cell.
                        starts.with_mut(|n| unsafe { *n += 1 });
                    });
                }
                queued.fetch_add(1, Ordering::Relaxed);
            };
            let (m2, q2, s2) = (mark.clone(), queued.clone(), starts.clone());
            let other = loom::thread::spawn(move || first_call(&m2, &q2, &s2));
            first_call(&mark, &queued, &starts);
            other.join().unwrap();
            assert_eq!(queued.load(Ordering::Relaxed), 2);
            // SAFETY: the other thread is joined.
            assert_eq!(starts.with(|n| unsafe { *n }), 1);
        });
    }
}
