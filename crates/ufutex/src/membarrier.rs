//! The asymmetric fence of the (A)/(B) protocol (argued at the top of `wait.rs`): with
//! [`Pays::Waiter`] a wake costs no fence, and a waiter that is about to queue pays for both
//! sides with `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` before it compares its word.
//!
//! What the kernel promises: when `membarrier` returns, every other thread of the process that
//! was running has executed a full memory barrier at some point between the call's start and
//! its end (an IPI makes it), and a thread that was not running passed one when it was switched
//! out or in. So a waker's program point between its store to the word and its read of the
//! bucket's count — in [`waker_start`], a compiler barrier only while wakes are fence-free —
//! behaves, for this one waiter, as if it held a `fence(SeqCst)` placed before the waiter's
//! call or after it: wherever the barrier lands in the waker's path, either the waker's read
//! comes after it and sees the waiter's count (incremented before the call), or the waker's
//! store came before it and the waiter's compare (after the call) sees the store.
//!
//! What it costs: ~100 ns when no other CPU runs a thread of the process, ~12 µs on the
//! project's KVM guests when one does (the IPI); a waiter pays it only when it is about to queue
//! and sleep, after its spin on the word found no change, and only in a bucket where nobody has
//! slept lately: each bucket chooses ([`Fence`]), and one where threads keep sleeping has its
//! wakes fence instead. `ufutex::sync` keeps the symmetric protocol ([`Pays::Waker`]): its
//! wakers have just made an RMW on the word, and its waiters sleep often. A requeue is a waker
//! of its source word and pays as that word's wakes do (`requeue.rs`).
//!
//! The barrier needs a one-time registration per process. Whether it worked is decided once
//! (at load, [`decide_at_load`], or by the first wake or wait that asks: [`fence_free`]) and
//! never changes: where it failed (seccomp, an old kernel, not Linux), the waker's point is a
//! real `fence(SeqCst)` and the waiter's [`waiter_barrier`] does nothing — the symmetric
//! protocol.
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
use crate::primitive::{fence, AtomicU32, Ordering};

#[cfg(not(ufutex_loom))]
const UNKNOWN: u8 = 0;
#[cfg(not(ufutex_loom))]
const READY: u8 = 1;
#[cfg(not(ufutex_loom))]
const UNAVAILABLE: u8 = 2;

/// Whether `membarrier` works for this process: UNKNOWN until first needed, then
/// READY or UNAVAILABLE for good.
#[cfg(not(ufutex_loom))]
#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
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

/// Decide now if not yet: when the library is loaded (`load.rs`), while a process mostly has
/// one thread still. The kernel's registration then takes its fast path (a few µs), whereas in
/// a process with a second thread it waits for an RCU grace period — 10–24 ms measured here —
/// which the first wake or wait of a multithreaded program paid before (BENCHMARKS.md,
/// seventy-first session). Best effort: a library loaded late (`dlopen`) or a linker that
/// leaves the library's constructor out only leaves the decision to the first call, as before.
#[cfg(all(not(ufutex_loom), target_os = "linux"))]
pub(crate) fn decide_at_load() {
    // A compare-and-swap that changes nothing, not a load: where nothing wrote `STATE`'s page
    // yet, the first touch is then a write, one page fault. A load first maps the page (the
    // shared zero page in `.bss`, the file's page among the hot statics of `hot_code.rs`, which
    // a shared library's relocations have written but an executable's may not have), and the
    // decision's write faults again to copy it (BENCHMARKS.md, eighty-second session). Relaxed,
    // as `decide`'s.
    if STATE.compare_exchange(UNKNOWN, UNKNOWN, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        decide();
    }
}

/// Whether [`fence_free`] is decided already, without deciding it (tests: the decision made
/// when the library is loaded).
#[cfg(not(ufutex_loom))]
pub fn decided() -> bool {
    // Relaxed: a look, for a test.
    STATE.load(Ordering::Relaxed) != UNKNOWN
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

/// A bucket's choice of who pays for the (A)/(B) order on its words (with [`Pays::Waiter`]):
///
/// ```text
///   FREE       wakes: no fence        a waiter about to queue: membarrier
///   SWITCHING  wakes: the lock        a waiter about to queue: membarrier
///   FENCED     wakes: the lock        a waiter about to queue: nothing
/// ```
///
/// A waiter that finds the bucket FREE marks it SWITCHING before its own barrier and FENCED
/// after it: from then on the threads that sleep there pay nothing more, and its wakes pay by
/// taking the bucket's lock, under which every waiter compares its word (a fence and a
/// lockless look at the count would add a barrier to a wake that, in such a bucket, mostly
/// finds sleepers and locks anyway) — where threads sleep often (18 threads on 2 CPUs) an IPI
/// per sleep costs more than a lock per wake. A FENCED bucket with no new sleeper for
/// `DECAY_MS` goes back to FREE (a waker that finds nobody there notices: one such wake in
/// `SAMPLE` of its thread looks).
/// A waitv pays its one barrier whatever its buckets say, and changes none of them. Changes
/// are made under the bucket's lock; a waiter reads the mode under it too.
///
/// Why it is safe (the waker reads the mode after its store, and locks unless it read FREE;
/// the lock orders a waker and a waiter as the symmetric protocol's fences do):
/// - FREE → SWITCHING → FENCED: a waiter that skips its barrier read FENCED, set after a
///   barrier that began after SWITCHING was stored. A waker that read FREE read it before that
///   barrier's point in its own thread (after it, the load sees SWITCHING), so its store — before
///   its load in program order — was before the point too and is visible to the waiter's
///   compare. A waker that read anything else took the lock: the waiter compares under it.
/// - FENCED → FREE: a waiter that read FENCED had counted itself in before that hold of the
///   lock, and the change is made in a later hold; a waker that reads FREE (Acquire, pairing
///   with the change's Release) therefore sees the waiter's count and takes the lock. A waiter
///   whose hold came after the change read FREE and pays its barrier.
pub(crate) struct Fence {
    mode: AtomicU32,
    /// When a sleeper last came to the FENCED bucket: ms on [`now_ms`]'s clock.
    since: AtomicU32,
}

const FREE: u32 = 0;
const SWITCHING: u32 = 1;
const FENCED: u32 = 2;

/// A FENCED bucket without a new sleeper for this long goes back to FREE.
#[cfg(not(ufutex_loom))]
const DECAY_MS: u32 = 20;
/// A fenced waker looks at its bucket's age once in this many fenced wakes of its thread.
#[cfg(not(ufutex_loom))]
const SAMPLE: u32 = 256;

/// What a waiter about to compare its word must do first (see [`Fence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing: the bucket is FENCED.
    Nothing,
    /// [`waiter_barrier`], with the lock dropped; `switching`: this waiter marked the bucket
    /// SWITCHING and completes the switch after it ([`Fence::switched`]).
    Barrier { switching: bool },
}

impl Fence {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> Fence {
            Fence { mode: AtomicU32::new(FREE), since: AtomicU32::new(0) }
        }
    }

    /// In a forked child (`fork.rs`), whose buckets hold no waiter: FREE, as new. (A switch
    /// that a parent's thread began is never finished in the child; with one thread there is
    /// no waker to order against.)
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn forget(&self) {
        // (`since` is read only while FENCED, and set on the way there.)
        crate::primitive::reset_in_child(&self.mode, FREE);
    }

    /// A waiter of [`Pays::Waiter`] came, its count in: what it needs before it compares.
    /// The caller holds the bucket's lock.
    pub(crate) fn waiter_came(&self) -> Need {
        if !fence_free() {
            return Need::Nothing; // wakers always fence here: the (A) fence suffices
        }
        // Relaxed: changed only under the lock we hold.
        match self.mode.load(Ordering::Relaxed) {
            FENCED => {
                self.since.store(now_ms(), Ordering::Relaxed);
                Need::Nothing
            }
            FREE => {
                self.mode.store(SWITCHING, Ordering::Relaxed);
                Need::Barrier { switching: true }
            }
            _ => Need::Barrier { switching: false },
        }
    }

    /// The waiter that marked the bucket SWITCHING had its barrier: FENCED, unless something
    /// else happened meanwhile. The caller holds the bucket's lock again.
    pub(crate) fn switched(&self) {
        if self.mode.load(Ordering::Relaxed) == SWITCHING {
            self.since.store(now_ms(), Ordering::Relaxed);
            self.mode.store(FENCED, Ordering::Relaxed);
        }
    }

    /// The waker's (B) point, second part, before it reads the bucket's count: 0 if the
    /// bucket is FREE (no fence needed); else the waker takes the bucket's lock
    /// ([`Fence::waker_looks`]). A number rather than a `bool`, so that the waker can test it
    /// and the count with one branch (`private_table.rs`, `see`).
    #[inline(always)]
    pub(crate) fn busy(&self) -> u32 {
        // Acquire: pairs with `Fence::decay`'s Release (see `Fence`).
        let mode = self.mode.load(Ordering::Acquire);
        #[cfg(ufutex_loom)]
        loom_model::ipi_point();
        const { assert!(FREE == 0) };
        mode
    }

    /// A waker in a bucket that is not FREE, which pays for the order with the bucket's lock
    /// (`private_table.rs`, `look_fenced`): whether to look at the bucket's age under it.
    pub(crate) fn waker_looks(&self) -> Waker {
        // Relaxed: only a hint for the decay, which reads it again under the lock.
        if self.mode.load(Ordering::Relaxed) == FENCED && self.sample() {
            Waker::LookAtAge
        } else {
            Waker::Done
        }
    }

    /// Whether a waker of this bucket should look whether it is stale ([`Fence::decay`]).
    #[inline]
    fn sample(&self) -> bool {
        #[cfg(not(ufutex_loom))]
        {
            std::thread_local! {
                static FENCED_WAKES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
            }
            FENCED_WAKES.with(|n| {
                n.set(n.get().wrapping_add(1));
                n.get() % SAMPLE == 0
            })
        }
        #[cfg(ufutex_loom)]
        true
    }

    /// A FENCED bucket without a new sleeper for [`DECAY_MS`] goes back to FREE. The caller
    /// holds the bucket's lock.
    pub(crate) fn decay(&self) {
        #[cfg(not(ufutex_loom))]
        let stale = now_ms().wrapping_sub(self.since.load(Ordering::Relaxed)) > DECAY_MS;
        #[cfg(ufutex_loom)]
        let stale = true;
        if stale && self.mode.load(Ordering::Relaxed) == FENCED {
            // Release: a waker that reads FREE sees the counts of every waiter that compared
            // under FENCED (see the type's docs).
            self.mode.store(FREE, Ordering::Release);
        }
    }
}

/// Milliseconds on the monotonic clock, cut to 32 bits (a coarse clock for [`Fence`]'s age,
/// which takes only wrapping differences of it; no base to set once, so nothing a fork could
/// leave half made: `once.rs`).
fn now_ms() -> u32 {
    #[cfg(not(ufutex_loom))]
    {
        let t = crate::deadline::Clock::Monotonic.now();
        (t.sec as u64).wrapping_mul(1000).wrapping_add(u64::from(t.nsec / 1_000_000)) as u32
    }
    #[cfg(ufutex_loom)]
    0
}

/// What the waker's point decided: whether to look at the bucket's age under its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waker {
    Done,
    /// The bucket is FENCED and this wake was sampled: call [`Fence::decay`] under the lock
    /// (only worth it when nobody waits there).
    LookAtAge,
}

/// The waker's (B) point, first part, after the caller's store and before the wake reads the
/// tables: `fence(SeqCst)` (returns `false`), unless the wake may leave it out — [`Pays::Waiter`]
/// with `membarrier` working — in which case [`Fence::busy`] decides once the bucket is known.
#[inline(always)]
pub(crate) fn waker_start(pays: Pays) -> bool {
    if pays == Pays::Waiter && fence_free() {
        fence_free_point();
        return true;
    }
    fence(Ordering::SeqCst);
    false
}

/// [`waker_start`] for [`Pays::Waiter`] where `membarrier` is already known to work: the
/// point, and `true`; else `false`, with nothing done (not even deciding, so that a caller's
/// frame needs no call: `private_table.rs`, `look_if_fence_free`).
#[cfg(not(ufutex_loom))]
#[inline(always)]
pub(crate) fn waker_start_if_ready() -> bool {
    if !known_fence_free() {
        return false;
    }
    fence_free_point();
    true
}

/// Whether `membarrier` is already known to work, without deciding it (`false` while nobody has
/// asked yet): for a fast path that may leave out an atomic only once it does (the bucket
/// lock's quiet unlock, `lock.rs`), and takes its fenced path until then.
#[inline(always)]
pub(crate) fn known_fence_free() -> bool {
    #[cfg(not(ufutex_loom))]
    // Relaxed: see `decide`.
    return STATE.load(Ordering::Relaxed) == READY;
    #[cfg(ufutex_loom)]
    fence_free()
}

/// The point, in a thread that leaves out its fence where [`fence_free`] holds (the caller
/// checked it), between its store and a read that a [`waiter_barrier`] on another thread is
/// ordered against: a fence-free wake's (B) ([`waker_start`]), `sync`'s quiet unlock
/// (`raw_mutex.rs`), the bucket lock's quiet unlock (`lock.rs`).
#[inline(always)]
pub(crate) fn fence_free_point() {
    // Keeps the compiler from moving the read above the caller's store: the barrier the kernel
    // adds lands between instructions, so their order must be the program's.
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    #[cfg(ufutex_loom)]
    loom_model::ipi_point();
}

/// The waiter's half, after its (A) increment and before its compare: after it returns, a
/// waker that read the bucket's count without seeing the increment has made its store to the
/// word visible to this thread (or fenced itself).
pub(crate) fn waiter_barrier() {
    #[cfg(not(ufutex_loom))]
    {
        let ready = fence_free();
        // SeqCst fences around the call: the count's increment is ordered before it, the
        // compare after it (the kernel's own barriers do it too; these cost nothing next to
        // the system call).
        fence(Ordering::SeqCst);
        if ready && !sys::barrier() {
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
        if fence_free() {
            loom_model::ipi_point();
        }
        fence(Ordering::SeqCst);
    }
}

/// Whether wakes may leave out their fence in this process (`membarrier` works), decided on
/// first use, by a waker or a waiter — every waiter asks before it compares, so a waker that
/// reads READY can rely on its barrier. (The benchmark report states it too.)
#[inline(always)]
pub fn fence_free() -> bool {
    #[cfg(not(ufutex_loom))]
    {
        // Relaxed: see `decide`; READY and UNAVAILABLE never change.
        let state = STATE.load(Ordering::Relaxed);
        if state == READY {
            return true; // laid out as the straight path: every fence-free wake takes it
        }
        std::hint::cold_path();
        state == UNKNOWN && decide() == READY
    }
    #[cfg(ufutex_loom)]
    !loom_model::symmetric()
}

#[cfg(ufutex_loom)]
mod loom_model {
    loom::lazy_static! {
        static ref IPI: loom::sync::Mutex<()> = loom::sync::Mutex::new(());
    }

    /// A point of the waker's path where a concurrent `membarrier` may land (locked by the
    /// waiter's barrier too).
    pub(super) fn ipi_point() {
        drop(IPI.lock().unwrap());
    }

    /// `UFUTEX_LOOM_FENCE=symmetric`: model the fallback (both sides fence).
    pub(super) fn symmetric() -> bool {
        static SYMMETRIC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SYMMETRIC.get_or_init(|| std::env::var("UFUTEX_LOOM_FENCE").is_ok_and(|v| v == "symmetric"))
    }
}
