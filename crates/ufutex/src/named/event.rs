//! A namespace's event (NT's): signaled or not, manual reset (a set releases every waiter and
//! stays set) or auto reset (a set releases one waiter, which resets it), and pulse (release
//! the waiters there are now — all, or one — and leave it unsignaled).
//!
//! ```text
//!   word: (pulse sequence << 1) | signaled
//! ```
//!
//! A waiter takes the signal (auto: with a CAS that clears it) or, finding it unsignaled, sleeps
//! on the word expecting what it read; a pulse bumps the sequence and wakes, so a waiter that
//! slept before it sees the sequence changed and returns, and one that comes after does not.

use super::table::{Slot, REMOVED};
use super::{NamedError, Namespace};
use crate::deadline::Deadline;
use crate::shared::{self, SharedError};
use std::sync::atomic::Ordering;

const SIGNALED: u32 = 1;
/// `aux`: manual reset.
pub(super) const MANUAL: u32 = 1;

/// An event of a namespace.
#[derive(Debug, Clone, Copy)]
pub struct Event<'ns> {
    pub(crate) ns: &'ns Namespace,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

/// The next pulse sequence of word `w`, signaled cleared; never the removed mark.
fn pulsed(w: u32) -> u32 {
    match (w & !SIGNALED).wrapping_add(2) {
        v if v == REMOVED & !SIGNALED => 0,
        v => v,
    }
}

impl Event<'_> {
    fn slot(&self) -> Result<&Slot, NamedError> {
        self.ns.live(self.slot, self.gen)
    }

    fn manual(s: &Slot) -> bool {
        s.aux.load(Ordering::Relaxed) == MANUAL
    }

    /// Signal it: a manual-reset event releases every waiter and stays signaled; an auto-reset
    /// one releases one waiter (or the next to come), which resets it.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    pub fn set(&self) -> Result<(), NamedError> {
        let s = self.slot()?;
        let prev =
            s.word.fetch_update(Ordering::Release, Ordering::Relaxed, |w| (w != REMOVED).then_some(w | SIGNALED));
        match prev {
            Err(_) => Err(NamedError::Removed),
            Ok(_) => {
                shared::wake(&s.word, if Self::manual(s) { usize::MAX } else { 1 })?;
                Ok(())
            }
        }
    }

    /// Make it unsignaled.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    pub fn reset(&self) -> Result<(), NamedError> {
        let s = self.slot()?;
        s.word
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| (w != REMOVED).then_some(w & !SIGNALED))
            .map(|_| ())
            .map_err(|_| NamedError::Removed)
    }

    /// Release the waiters there are now (manual: all; auto: one) and leave it unsignaled.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    pub fn pulse(&self) -> Result<(), NamedError> {
        let s = self.slot()?;
        if s.word.fetch_update(Ordering::Release, Ordering::Relaxed, |w| (w != REMOVED).then(|| pulsed(w))).is_err() {
            return Err(NamedError::Removed);
        }
        shared::wake(&s.word, if Self::manual(s) { usize::MAX } else { 1 })?;
        Ok(())
    }

    /// Without sleeping: whether it is signaled (auto: taking the signal) or was pulsed since
    /// its word read `began`.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    pub(super) fn try_wait(&self, began: u32) -> Result<bool, NamedError> {
        let s = self.slot()?;
        let mut w = s.word.load(Ordering::Acquire);
        loop {
            if w == REMOVED {
                return Err(NamedError::Removed);
            }
            if w & SIGNALED == 0 {
                return Ok((w & !SIGNALED) != (began & !SIGNALED));
            }
            if Self::manual(s) {
                return Ok(true);
            }
            match s.word.compare_exchange(w, w & !SIGNALED, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Ok(true),
                Err(now) => w = now,
            }
        }
    }

    /// Wait until it is signaled (auto: taking the signal) or pulsed, until `deadline`.
    ///
    /// # Errors
    /// [`NamedError::Removed`] (also when removed while waiting); `Shared(TimedOut)`,
    /// `Shared(Interrupted)`.
    pub fn wait(&self, deadline: Option<Deadline>) -> Result<(), NamedError> {
        let s = self.slot()?;
        let began = s.word.load(Ordering::Acquire);
        loop {
            // The word before the look: a set or pulse after it makes the sleep return.
            let w = s.word.load(Ordering::Acquire);
            if self.try_wait(began)? {
                return Ok(());
            }
            match shared::wait(&s.word, w, deadline) {
                Ok(()) | Err(SharedError::WouldBlock) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
