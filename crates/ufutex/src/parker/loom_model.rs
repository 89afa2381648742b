//! The parker as loom sees it: a counter plus loom's own thread park/unpark, so that a thread
//! left parked forever is reported by loom as a deadlock (a lost wakeup). A timed park gives up
//! at the first point where the count is short — loom explores that point before, during and
//! after every wake, which is exactly the timeout-versus-wake race.

use super::{Bell, Direct, Park, ParkTimeout, Unpark, Watch};
use crate::deadline::Timeout;
use crate::primitive::{AtomicU32, Ordering};
use loom::thread::Thread;
use std::sync::Arc;

pub(crate) struct Parker {
    count: Arc<AtomicU32>,
    thread: Thread,
}

/// One waker's unparks: each thread at once (no bell here).
pub(crate) type WakeBatch<'b> = Direct<UnparkHandle>;

impl Park for Parker {
    type Handle = UnparkHandle;

    fn new() -> Parker {
        Parker { count: Arc::new(AtomicU32::new(0)), thread: loom::thread::current() }
    }

    /// One look: loom explores the unparks arriving before it or after.
    fn spin(&self, need: u32) -> bool {
        self.spin_for(|| self.count.load(Ordering::Acquire) >= need)
    }

    fn spin_for(&self, done: impl Fn() -> bool) -> bool {
        done()
    }

    /// `_bell`, `_watch`: this backend sleeps on its own state only (see [`Bell`], [`Watch`]).
    fn sleep(
        &self,
        need: u32,
        timeout: Option<&Timeout>,
        _bell: Option<&Bell>,
        _watch: &[Watch<'_>],
    ) -> Result<(), ParkTimeout> {
        loop {
            if self.count.load(Ordering::Acquire) >= need {
                return Ok(());
            }
            if timeout.is_some() {
                return Err(ParkTimeout::TimedOut);
            }
            loom::thread::park();
        }
    }

    fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
    }

    fn handle(&self) -> UnparkHandle {
        UnparkHandle { count: self.count.clone(), thread: self.thread.clone() }
    }
}

pub(crate) struct UnparkHandle {
    count: Arc<AtomicU32>,
    thread: Thread,
}

impl Unpark for UnparkHandle {
    fn unpark(self) {
        self.count.fetch_add(1, Ordering::Release);
        self.thread.unpark();
    }
}
