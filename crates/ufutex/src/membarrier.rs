//! The asymmetric fence of the (A)/(B) protocol (argued at the top of `wait.rs`): with
//! [`Pays::Waiter`] a wake costs no fence, and a waiter that is about to queue pays for both
//! sides with `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` before it compares its word.
//!
//! What the kernel promises: when `membarrier` returns, every other thread of the process that
//! was running has executed a full memory barrier at some point between the call's start and
//! its end (an IPI makes it), and a thread that was not running passed one when it was switched
//! out or in. So a waker's program point between its store to the word and its read of the
//! bucket's count — [`waker_point`], a compiler barrier only — behaves, for this one waiter, as
//! if it held a `fence(SeqCst)` placed before the waiter's call or after it: wherever the
//! barrier lands in the waker's path, either the waker's read comes after it and sees the
//! waiter's count (incremented before the call), or the waker's store came before it and the
//! waiter's compare (after the call) sees the store.
//!
//! What it costs: ~100 ns when no other CPU runs a thread of the process, ~12 µs on the
//! project's KVM guests when one does (the IPI); a waiter pays it only when it is about to queue
//! and sleep, after its spin on the word found no change. `ufutex::sync` keeps the symmetric
//! protocol ([`Pays::Waker`]): its wakers have just made an RMW on the word, and its waiters
//! sleep often.
//!
//! The barrier needs a one-time registration per process. Whether it worked is decided once
//! (by the first wake or waiter's barrier) and never changes: until it is known, and for ever
//! if it failed (seccomp, an old kernel, not Linux), the waker's point is a real
//! `fence(SeqCst)` and the waiter's [`waiter_barrier`] does nothing — the symmetric protocol.
//!
//! Under loom, the kernel's guarantee is modelled with one loom mutex: the waker's point locks
//! and unlocks it, and the waiter's barrier does too (between two SC fences). Whichever comes
//! first in the mutex's order happens-before the other, which is exactly the edge the IPI
//! gives: either the waker's store is visible to the waiter after its barrier, or the waiter's
//! count is visible to the waker's read. (The mutex also orders two wakers' points with each
//! other, an edge the real barrier does not give.) Without the waiter's barrier the models find
//! the lost wakeup. `UFUTEX_LOOM_FENCE=symmetric` models the fallback instead: an SC fence at
//! the waker's point and nothing at the waiter's barrier.

#[cfg(not(ufutex_loom))]
use crate::primitive::AtomicU8;
use crate::primitive::{fence, Ordering};

#[cfg(not(ufutex_loom))]
const UNKNOWN: u8 = 0;
#[cfg(not(ufutex_loom))]
const READY: u8 = 1;
#[cfg(not(ufutex_loom))]
const UNAVAILABLE: u8 = 2;

/// Whether `membarrier` works for this process: UNKNOWN until first needed, then
/// READY or UNAVAILABLE for good.
#[cfg(not(ufutex_loom))]
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

#[cfg(all(not(ufutex_loom), target_os = "linux"))]
mod sys {
    /// `<linux/membarrier.h>`.
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(cmd: libc::c_long) -> Result<(), i32> {
        // SAFETY: membarrier takes two integers and a flags word; it touches no user memory.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long, 0 as libc::c_long) };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }
    }

    pub(super) fn register() -> bool {
        membarrier(REGISTER_PRIVATE_EXPEDITED).is_ok()
    }

    /// The barrier; registers again if the kernel says this process is not registered (it
    /// does not happen: a forked child inherits the registration). `false` if it cannot be had.
    pub(super) fn barrier() -> bool {
        match membarrier(PRIVATE_EXPEDITED) {
            Ok(()) => true,
            Err(libc::EPERM) => register() && membarrier(PRIVATE_EXPEDITED).is_ok(),
            Err(_) => false,
        }
    }
}

#[cfg(all(not(ufutex_loom), not(target_os = "linux")))]
mod sys {
    pub(super) fn register() -> bool {
        false
    }
    pub(super) fn barrier() -> bool {
        false
    }
}

#[cfg(not(ufutex_loom))]
#[cold]
fn decide() -> u8 {
    let found = if sys::register() { READY } else { UNAVAILABLE };
    // Relaxed: the first answer stands (every caller in a process gets the same one), and a
    // waker that reads READY needs nothing from this thread but that its waiters barrier —
    // which every `waiter_barrier` does once it reads READY, or decides itself.
    match STATE.compare_exchange(UNKNOWN, found, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => found,
        Err(first) => first,
    }
}

/// Who pays for the (A)/(B) protocol's order on a word: every waiter and every waker of one
/// word must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pays {
    /// Every wake fences; a waiter's (A) fence suffices. For `ufutex::sync`, whose wakers have
    /// just made an RMW on the word anyway and whose waiters sleep often.
    Waker,
    /// A waiter that is about to queue, with [`waiter_barrier`]; a wake costs no fence (where
    /// `membarrier` works). The public API: wakes are many, waits that queue are about to sleep.
    Waiter,
}

/// The waker's (B) point, between the caller's store to the word and the wake's first read of
/// the tables: with [`Pays::Waiter`], a compiler barrier once `membarrier` works; else
/// `fence(SeqCst)`.
#[inline(always)]
pub(crate) fn waker_point(pays: Pays) {
    if pays == Pays::Waker {
        fence(Ordering::SeqCst);
        return;
    }
    #[cfg(not(ufutex_loom))]
    {
        // Relaxed: see the module docs; READY never changes back.
        match STATE.load(Ordering::Relaxed) {
            // Keeps the compiler from moving the tables' reads above the caller's store: the
            // barrier the kernel adds lands between instructions, so their order must be the
            // program's.
            READY => std::sync::atomic::compiler_fence(Ordering::SeqCst),
            UNKNOWN => {
                decide(); // the first wake of a process that has not waited yet
                fence(Ordering::SeqCst);
            }
            _ => fence(Ordering::SeqCst),
        }
    }
    #[cfg(ufutex_loom)]
    {
        if loom_model::symmetric() {
            fence(Ordering::SeqCst);
        } else {
            drop(loom_model::ipi().lock().unwrap());
        }
    }
}

/// The waiter's half, after its (A) increment and before its compare: after it returns, a
/// waker that read the bucket's count without seeing the increment has made its store to the
/// word visible to this thread (or fenced itself).
pub(crate) fn waiter_barrier() {
    #[cfg(not(ufutex_loom))]
    {
        let state = match STATE.load(Ordering::Relaxed) {
            UNKNOWN => decide(),
            s => s,
        };
        // SeqCst fences around the call: the count's increment is ordered before it, the
        // compare after it (the kernel's own barriers do it too; these cost nothing next to
        // the system call).
        fence(Ordering::SeqCst);
        if state == READY && !sys::barrier() {
            // Wakers already leave out their fence, and the barrier that stands for theirs
            // cannot be had: going on could lose a wakeup. No kernel does this (a registration
            // lasts until exec; a forked child inherits it, and `sys::barrier` registers again).
            eprintln!("ufutex: membarrier failed after it had worked; cannot keep wakeups safe");
            std::process::abort();
        }
        fence(Ordering::SeqCst);
    }
    #[cfg(ufutex_loom)]
    {
        fence(Ordering::SeqCst);
        if !loom_model::symmetric() {
            drop(loom_model::ipi().lock().unwrap());
        }
        fence(Ordering::SeqCst);
    }
}

/// Whether wakers leave out their fence in this process (the benchmark report says so).
#[cfg(not(ufutex_loom))]
pub fn fence_free() -> bool {
    match STATE.load(Ordering::Relaxed) {
        UNKNOWN => decide() == READY,
        s => s == READY,
    }
}

#[cfg(ufutex_loom)]
mod loom_model {
    loom::lazy_static! {
        static ref IPI: loom::sync::Mutex<()> = loom::sync::Mutex::new(());
    }

    pub(super) fn ipi() -> &'static loom::sync::Mutex<()> {
        &IPI
    }

    /// `UFUTEX_LOOM_FENCE=symmetric`: model the fallback (both sides fence).
    pub(super) fn symmetric() -> bool {
        static SYMMETRIC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SYMMETRIC.get_or_init(|| std::env::var("UFUTEX_LOOM_FENCE").is_ok_and(|v| v == "symmetric"))
    }
}
