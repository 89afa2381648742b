//! The parker as loom sees it: a counter, a spin that yields to loom's scheduler, and a timed
//! park that gives up at the first point where the count is short — so loom explores a timeout
//! firing before, during and after every wake.

use super::ParkTimeout;
use crate::deadline::Timeout;
use crate::primitive::{yield_now, AtomicU32, Ordering};
use std::sync::Arc;

pub(crate) struct Parker {
    count: Arc<AtomicU32>,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker { count: Arc::new(AtomicU32::new(0)) }
    }

    pub(crate) fn park(&self, need: u32, timeout: Option<&Timeout>) -> Result<(), ParkTimeout> {
        loop {
            if self.count.load(Ordering::Acquire) >= need {
                return Ok(());
            }
            if timeout.is_some() {
                return Err(ParkTimeout::TimedOut);
            }
            yield_now();
        }
    }

    pub(crate) fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
    }

    pub(crate) fn handle(&self) -> UnparkHandle {
        UnparkHandle { count: self.count.clone() }
    }
}

pub(crate) struct UnparkHandle {
    count: Arc<AtomicU32>,
}

impl UnparkHandle {
    pub(crate) fn unpark(self) {
        self.count.fetch_add(1, Ordering::Release);
    }
}
