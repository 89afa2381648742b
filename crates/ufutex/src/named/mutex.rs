//! A namespace's mutex: an owner (process and thread), a recursion count, and the abandoned
//! state of NT mutexes and robust pthread mutexes — a process that dies holding it is noticed
//! by the next contender, which takes it with [`Acquired::Abandoned`] (`EOWNERDEAD`).
//!
//! ```text
//!   owner: 0 free, else (gen << 32) | (slot + 1) of the owner's process in the shared table
//!   word:  a release sequence, bumped by every release; contenders sleep on it
//! ```
//!
//! A contender reads the sequence, tries to take `owner` with a CAS, and if it is held sleeps
//! on the sequence (so a release between its CAS and its sleep makes the sleep return at once)
//! for at most [`PROBE`]; then it asks whether the owner's process lives (the shared table's
//! liveness lock: safe against PID reuse and namespaces) and takes a dead owner's mutex over
//! with a CAS from that exact owner word. The owning thread's id and the recursion count are
//! written only by the owner.

use super::table::{Slot, REMOVED};
use super::{NamedError, Namespace};
use crate::deadline::Deadline;
use crate::shared::lock::{Life, Liveness, Owner};
use crate::shared::{self, SharedError};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long a contender sleeps before it asks whether the owner is alive: the latency of
/// noticing an abandoned mutex.
const PROBE: Duration = Duration::from_millis(20);

/// How a lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// Normally (or once more by its owner thread: recursion).
    Acquired,
    /// From a process that died holding it (`EOWNERDEAD`): the caller owns it now, and what it
    /// protects may be inconsistent.
    Abandoned,
}

/// A mutex of a namespace.
#[derive(Debug, Clone, Copy)]
pub struct Mutex<'ns> {
    pub(crate) ns: &'ns Namespace,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

fn word_of(o: Owner) -> u64 {
    (u64::from(o.gen) << 32) | u64::from(o.slot + 1)
}

fn owner_of(w: u64) -> Owner {
    Owner { slot: (w as u32).wrapping_sub(1), gen: (w >> 32) as u32 }
}

fn tid() -> u32 {
    std::thread_local! {
        static TID: u32 = {
            // SAFETY: gettid has no arguments and cannot fail.
            unsafe { libc::gettid() as u32 }
        };
    }
    TID.with(|t| *t)
}

impl Mutex<'_> {
    fn slot(&self) -> Result<&Slot, NamedError> {
        self.ns.live(self.slot, self.gen)
    }

    /// Take the mutex without sleeping: `None` if another holds it.
    ///
    /// # Errors
    /// As [`Mutex::lock`].
    pub fn try_lock(&self) -> Result<Option<Acquired>, NamedError> {
        let s = self.slot()?;
        let p = shared::process::proc()?;
        self.attempt(s, p.me, p)
    }

    /// Take the mutex, sleeping while another holds it, until `deadline`. Recursive: its owner
    /// thread takes it again (release it as many times).
    ///
    /// # Errors
    /// [`NamedError::Removed`]; `Shared(TimedOut)`, `Shared(Interrupted)`.
    pub fn lock(&self, deadline: Option<Deadline>) -> Result<Acquired, NamedError> {
        let p = shared::process::proc()?;
        loop {
            let s = self.slot()?;
            let seq = s.word.load(Ordering::Acquire);
            if seq == REMOVED {
                return Err(NamedError::Removed);
            }
            if let Some(a) = self.attempt(s, p.me, p)? {
                return Ok(a);
            }
            let probe: Deadline = PROBE.into();
            let until = match deadline {
                Some(d) if earlier(d, probe) => Some(d),
                _ => Some(probe),
            };
            match shared::wait(&s.word, seq, until) {
                Ok(()) | Err(SharedError::WouldBlock) => {}
                Err(SharedError::TimedOut) if deadline.is_some_and(expired) => {
                    return Err(NamedError::Shared(SharedError::TimedOut))
                }
                Err(SharedError::TimedOut) => {} // probe: the next attempt asks about the owner
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// One try: take it free, again (recursion), or from a dead owner; `None` if held.
    fn attempt(&self, s: &Slot, me: Owner, live: &impl Liveness) -> Result<Option<Acquired>, NamedError> {
        let mine = word_of(me);
        let cur = s.owner.load(Ordering::Acquire);
        if cur == 0 {
            if s.owner.compare_exchange(0, mine, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                s.tid.store(tid(), Ordering::Relaxed);
                s.aux.store(1, Ordering::Relaxed);
                return Ok(Some(Acquired::Acquired));
            }
            return Ok(None);
        }
        if cur == mine && s.tid.load(Ordering::Relaxed) == tid() {
            let n = s.aux.load(Ordering::Relaxed);
            s.aux.store(n.checked_add(1).ok_or(NamedError::Range)?, Ordering::Relaxed);
            return Ok(Some(Acquired::Acquired));
        }
        match live.life(owner_of(cur)) {
            Life::Alive => Ok(None),
            // Dead (or a word naming no process: corrupt): take it over from that exact owner.
            Life::Dead | Life::Corrupt => {
                if s.owner.compare_exchange(cur, mine, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    s.tid.store(tid(), Ordering::Relaxed);
                    s.aux.store(1, Ordering::Relaxed);
                    return Ok(Some(Acquired::Abandoned));
                }
                Ok(None)
            }
        }
    }

    /// Release it once (the owner thread only); the last release wakes one contender.
    ///
    /// # Errors
    /// [`NamedError::NotOwner`] (`EPERM`) if this thread does not hold it; [`NamedError::Removed`].
    pub fn unlock(&self) -> Result<(), NamedError> {
        let s = self.slot()?;
        let p = shared::process::proc()?;
        if s.owner.load(Ordering::Relaxed) != word_of(p.me) || s.tid.load(Ordering::Relaxed) != tid() {
            return Err(NamedError::NotOwner);
        }
        let n = s.aux.load(Ordering::Relaxed);
        if n > 1 {
            s.aux.store(n - 1, Ordering::Relaxed);
            return Ok(());
        }
        s.tid.store(0, Ordering::Relaxed);
        // Release: the next owner sees what we did while holding it.
        s.owner.store(0, Ordering::Release);
        // The sequence after the owner: a contender that read the old one and saw us holding
        // it fails its sleep's compare, or is woken. (A removed mutex's waiters were woken.)
        let bump = |v: u32| {
            (v != REMOVED).then_some(match v.wrapping_add(1) {
                REMOVED => 0,
                n => n,
            })
        };
        if s.word.fetch_update(Ordering::Release, Ordering::Relaxed, bump).is_ok() {
            shared::wake(&s.word, 1)?;
        }
        Ok(())
    }
}

/// Whether deadline `a` comes before `b` (both from this process's clocks).
fn earlier(a: Deadline, b: Deadline) -> bool {
    let t = |d: Deadline| crate::deadline::Timeout::from(d).remaining();
    t(a) < t(b)
}

fn expired(d: Deadline) -> bool {
    crate::deadline::Timeout::from(d).expired()
}
