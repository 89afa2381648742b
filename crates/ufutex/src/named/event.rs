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

use super::table::{Slot, Unchanged, REMOVED};
use super::{NamedError, Namespace};
use crate::deadline::Deadline;
use crate::shared::{self, SharedError};
use std::sync::atomic::Ordering;

const SIGNALED: u32 = 1;
/// `aux`: manual reset.
pub(super) const MANUAL: u32 = 1;

/// An event of a namespace: manual or auto reset, set, reset and pulse (NT's). Waiters are not
/// served in order: an auto-reset set releases one waiter, not necessarily the oldest.
///
/// # Examples
/// ```
/// use ufutex::named::{Namespace, Open};
/// let name = format!("doc-event-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_2300 + std::process::id() as u64;
/// let (ev, _) = ns.event(key, Open::CreateNew, true, false).unwrap();
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| ev.wait(None).unwrap());
///     }
///     ev.set().unwrap(); // manual reset: releases both, and stays set
/// });
/// ev.wait(None).unwrap();
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
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
    /// one releases one waiter (or the next to come), which resets it. Sets do not count: two
    /// sets of an auto-reset event before any wait release one waiter.
    ///
    /// # Errors
    /// [`NamedError::Removed`]; `Shared(_)` if the wake cannot use the shared table (it is
    /// signaled).
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// use ufutex::shared::SharedError;
    /// let name = format!("doc-event-set-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2400 + std::process::id() as u64;
    /// let (ev, _) = ns.event(key, Open::CreateNew, false, false).unwrap(); // auto reset
    /// ev.set().unwrap();
    /// ev.set().unwrap();
    /// ev.wait(None).unwrap(); // takes the signal
    /// let now = Some(Duration::ZERO.into()); // a deadline that has passed
    /// assert_eq!(ev.wait(now), Err(NamedError::Shared(SharedError::TimedOut)));
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn set(&self) -> Result<(), NamedError> {
        self.release(|w| w | SIGNALED)
    }

    /// Change the word with `f` (Release: a waiter that sees the change sees what came before
    /// it) and wake its waiters: all of a manual event, one of an auto one.
    fn release(&self, f: impl Fn(u32) -> u32) -> Result<(), NamedError> {
        let s = self.change(Ordering::Release, f)?;
        shared::wake(&s.word, if Self::manual(s) { usize::MAX } else { 1 })?;
        Ok(())
    }

    /// Change the word with `f` while the event is the handle's (`set`: the ordering of the
    /// change): its slot.
    fn change(&self, set: Ordering, f: impl Fn(u32) -> u32) -> Result<&Slot, NamedError> {
        let s = self.slot()?;
        s.update_word(self.gen, set, Ordering::Relaxed, |w| Some(f(w))).map_err(|_| NamedError::Removed)?;
        Ok(s)
    }

    /// Make it unsignaled. Wakes nobody; a waiter that a set woke but that has not looked yet
    /// sleeps again.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// use ufutex::shared::SharedError;
    /// let name = format!("doc-event-reset-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2500 + std::process::id() as u64;
    /// let (ev, _) = ns.event(key, Open::CreateNew, true, true).unwrap();
    /// ev.reset().unwrap();
    /// let now = Some(Duration::ZERO.into()); // a deadline that has passed
    /// assert_eq!(ev.wait(now), Err(NamedError::Shared(SharedError::TimedOut)));
    /// ns.remove(key).unwrap();
    /// assert_eq!(ev.reset(), Err(NamedError::Removed));
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn reset(&self) -> Result<(), NamedError> {
        self.change(Ordering::Relaxed, |w| w & !SIGNALED).map(|_| ())
    }

    /// Release the waiters there are now (manual: all; auto: one) and leave it unsignaled. A
    /// pulse with nobody waiting is lost.
    ///
    /// # Errors
    /// [`NamedError::Removed`]; `Shared(_)` if the wake cannot use the shared table.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-event-pulse-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2600 + std::process::id() as u64;
    /// let (ev, _) = ns.event(key, Open::CreateNew, false, false).unwrap();
    /// std::thread::scope(|s| {
    ///     let waiter = s.spawn(|| ev.wait(None).unwrap()); // sleeps until a pulse
    ///     // Pulse until one came while it waited (each one before is lost).
    ///     while !waiter.is_finished() {
    ///         ev.pulse().unwrap();
    ///         std::thread::yield_now();
    ///     }
    /// });
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn pulse(&self) -> Result<(), NamedError> {
        self.release(pulsed)
    }

    /// Without sleeping: whether it is signaled (auto: taking the signal) or was pulsed since
    /// its word read `began`.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    pub(super) fn try_wait(&self, began: u32) -> Result<bool, NamedError> {
        let s = self.slot()?;
        let manual = Self::manual(s);
        // Auto reset: take the signal (clear it) if there is one; else only look.
        let take = |w: u32| (w & SIGNALED != 0 && !manual).then_some(w & !SIGNALED);
        match s.update_word(self.gen, Ordering::Acquire, Ordering::Acquire, take) {
            Ok(_) => Ok(true),
            Err(Unchanged::Declined(w)) if w & SIGNALED != 0 => Ok(true), // manual: signaled
            Err(Unchanged::Declined(w)) => Ok((w & !SIGNALED) != (began & !SIGNALED)), // pulsed?
            Err(Unchanged::Gone) => Err(NamedError::Removed),
        }
    }

    /// Wait until it is signaled (auto: taking the signal) or pulsed, until `deadline`. Only a
    /// pulse after the call began counts.
    ///
    /// # Errors
    /// [`NamedError::Removed`] (also when removed while waiting); `Shared(TimedOut)`,
    /// `Shared(Interrupted)`; another `Shared(_)` if the shared table cannot be used.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-event-wait-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2700 + std::process::id() as u64;
    /// let (ev, _) = ns.event(key, Open::CreateNew, false, false).unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| ev.set().unwrap());
    ///     ev.wait(None).unwrap(); // until the set
    /// });
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn wait(&self, deadline: Option<Deadline>) -> Result<(), NamedError> {
        let s = self.slot()?;
        let began = s.word.load(Ordering::Acquire);
        loop {
            // The word before the look: a set or pulse after it makes the sleep return.
            let w = s.word.load(Ordering::Acquire);
            if self.try_wait(began)? {
                return Ok(());
            }
            // `w` of this object, not of a successor in its slot (`Slot::watched`).
            let (word, seen) = s.watched(self.gen, w);
            match shared::wait(word, seen, deadline) {
                Ok(()) | Err(SharedError::WouldBlock) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
