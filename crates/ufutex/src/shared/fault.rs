//! Fault injection for the kill tests (in the spirit of the kernel's `should_fail_futex`):
//! `UFUTEX_SHARED_DIE_AT=<point>[:<n>]` in the environment when a process claims its slot
//! makes it `SIGKILL` itself the `n`-th time (default: the first) it reaches `point` — in the
//! middle of queue surgery, holding a bucket lock. A testing hook, not an interface: one relaxed
//! load where it is not armed.
//!
//! Under loom a model thread stands for a process: `arm` makes it "die" at a point — it
//! unwinds out of the operation without releasing what it holds ([`dying`]: the bucket guard
//! keeps its lock), and the model marks its slot dead.

/// Where a process may be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// A waiter counted in the filter, before it asks for the key.
    Counted = 1,
    /// A bucket lock just taken, nothing changed yet.
    Locked,
    /// A waiter's record linked, the bucket still marked dirty.
    Enqueued,
    /// A waker's record unlinked, not yet marked Woken.
    Unlinked,
    /// A record marked Woken, its thread not yet kicked.
    Marked,
    /// A Woken record's thread held back for its bucket's ring, not yet rung.
    Held,
    /// A requeued record out of its old queue, its new key written but not yet its own.
    Moving,
    /// A requeued record's new key and bucket its own (one store), not yet in the new queue.
    Rekeyed,
    /// A waiter's own record unlinked after a timeout, not yet Idle.
    Cancelled,
    /// A named object's slot marked Busy, its fields not yet written (`named/table.rs`).
    Creating,
    /// A named object's slot marked Dead, its waiters not yet woken.
    Removing,
    /// A reference to a counted named object recorded, its holders not yet counted up.
    Holding,
    /// A reference to a counted named object being given back, its holders not yet counted down.
    Releasing,
}

#[cfg(not(ufutex_loom))]
const POINTS: [(&str, Point); 13] = [
    ("counted", Point::Counted),
    ("locked", Point::Locked),
    ("enqueued", Point::Enqueued),
    ("unlinked", Point::Unlinked),
    ("marked", Point::Marked),
    ("held", Point::Held),
    ("moving", Point::Moving),
    ("rekeyed", Point::Rekeyed),
    ("cancelled", Point::Cancelled),
    ("creating", Point::Creating),
    ("removing", Point::Removing),
    ("holding", Point::Holding),
    ("releasing", Point::Releasing),
];

#[cfg(not(ufutex_loom))]
mod process {
    use super::{Point, POINTS};
    use std::sync::atomic::{AtomicU32, Ordering};

    static ARMED: AtomicU32 = AtomicU32::new(0);
    static LEFT: AtomicU32 = AtomicU32::new(0);

    /// Read `UFUTEX_SHARED_DIE_AT` (at slot claim: once per process, again in a forked child).
    pub(crate) fn arm_from_env() {
        let Ok(v) = std::env::var("UFUTEX_SHARED_DIE_AT") else {
            ARMED.store(0, Ordering::Relaxed);
            return;
        };
        let (name, n) = v.split_once(':').unwrap_or((&v, "1"));
        if let Some(&(_, p)) = POINTS.iter().find(|(s, _)| *s == name) {
            LEFT.store(n.parse().unwrap_or(1).max(1), Ordering::Relaxed);
            ARMED.store(p as u32, Ordering::Relaxed);
        }
    }

    /// Die here if armed for `p` and this is the n-th time.
    #[inline]
    pub(crate) fn point(p: Point) {
        if ARMED.load(Ordering::Relaxed) == p as u32 {
            reached();
        }
    }

    #[cold]
    fn reached() {
        if LEFT.fetch_sub(1, Ordering::Relaxed) == 1 {
            // SAFETY: raising a signal has no memory effects; SIGKILL ends the process here.
            unsafe { libc::raise(libc::SIGKILL) };
        }
    }

    /// A process that dies is gone: nothing of it runs on.
    #[inline]
    pub(crate) fn dying() -> bool {
        false
    }
}
#[cfg(not(ufutex_loom))]
pub(crate) use process::{arm_from_env, dying, point};

#[cfg(ufutex_loom)]
mod model {
    use super::Point;
    use std::cell::Cell;

    loom::thread_local! {
        static ARMED: Cell<Option<Point>> = Cell::new(None);
        static DYING: Cell<bool> = Cell::new(false);
    }

    /// Make this model thread die at `p` (`None`: not at all).
    pub(crate) fn arm(p: Option<Point>) {
        ARMED.with(|a| a.set(p));
    }

    /// Die here if armed for `p`: unwind without releasing anything.
    pub(crate) fn point(p: Point) {
        if ARMED.with(|a| a.get()) == Some(p) {
            DYING.with(|d| d.set(true));
            std::panic::resume_unwind(Box::new("model death"));
        }
    }

    /// Whether this thread is dying (its guards keep what they hold).
    pub(crate) fn dying() -> bool {
        DYING.with(|d| d.get())
    }
}
#[cfg(ufutex_loom)]
pub(crate) use model::{arm, dying, point};
