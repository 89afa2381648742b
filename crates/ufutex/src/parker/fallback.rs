//! The portable parker: a count under a `Mutex`, slept on with a `Condvar`. Never reports
//! `Interrupted`. The waker holds an `Arc`, so the memory outlives a thread that exits.

use super::{Bell, Direct, Park, ParkTimeout, Unpark, Watch};
use crate::deadline::Timeout;
use std::sync::{Arc, Condvar, Mutex};

struct Inner {
    count: Mutex<u32>,
    cv: Condvar,
}

pub(crate) struct Parker {
    inner: Arc<Inner>,
}

/// One waker's unparks: each thread at once (no bell here).
pub(crate) type WakeBatch<'b> = Direct<UnparkHandle>;

impl Park for Parker {
    type Handle = UnparkHandle;

    fn new() -> Parker {
        Parker { inner: Arc::new(Inner { count: Mutex::new(0), cv: Condvar::new() }) }
    }

    /// No spin: this backend is for portability, not speed.
    fn spin(&self, _need: u32) -> bool {
        false
    }

    fn spin_for(&self, _done: impl Fn() -> bool) -> bool {
        false
    }

    /// `_bell`, `_watch`: this backend sleeps on its own state only (see [`Bell`], [`Watch`]).
    fn sleep(
        &self,
        need: u32,
        timeout: Option<&Timeout>,
        _bell: Option<&Bell>,
        _watch: &[Watch<'_>],
    ) -> Result<(), ParkTimeout> {
        let mut count = self.inner.count.lock().unwrap_or_else(|e| e.into_inner());
        while *count < need {
            count = match timeout {
                None => self.inner.cv.wait(count).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    let left = t.remaining();
                    if left.is_zero() {
                        return Err(ParkTimeout::TimedOut);
                    }
                    self.inner.cv.wait_timeout(count, left).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
        Ok(())
    }

    fn reset(&self) {
        *self.inner.count.lock().unwrap_or_else(|e| e.into_inner()) = 0;
    }

    fn handle(&self) -> UnparkHandle {
        UnparkHandle { inner: self.inner.clone() }
    }
}

pub(crate) struct UnparkHandle {
    inner: Arc<Inner>,
}

impl Unpark for UnparkHandle {
    fn unpark(self) {
        *self.inner.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.inner.cv.notify_one();
    }
}
