//! The shared table's robust lock: one `AtomicU64` holding its owner — (process slot + 1) in the
//! low half, the slot's generation in the high half — so that a contender can ask whether the
//! owner is still alive, and take the lock over when it is not.
//!
//! ```text
//!   free: 0          held: (gen << 32) | (slot + 1) [| WAITERS]
//! ```
//!
//! A contender spins briefly, then marks `WAITERS` and sleeps on the low half (the kernel's
//! shared futex: the lock lives in a shared segment) for at most [`PROBE_AFTER`]; an unlock that
//! finds `WAITERS` wakes one. After a sleep that timed out with the lock unchanged, the contender
//! asks [`Liveness`] about the owner: dead (its slot was reclaimed, or the kernel dropped its
//! liveness lock) → it takes the lock over with a compare-and-swap from that exact value (two
//! contenders cannot both win) and is told so ([`Taken::FromDead`]), to repair what the dead
//! owner may have left half done. A lock word naming a slot that does not exist is corruption.

use super::SharedError;
use crate::primitive::{AtomicU64, Ordering};
use std::time::Duration;

const WAITERS: u64 = 1 << 31;
/// How long a contender sleeps before it asks whether the owner is alive (a live owner holds a
/// bucket lock for microseconds).
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(1);
/// Spins before a contender sleeps (none under loom: a sleep is a yield there).
const SPINS: u32 = if cfg!(ufutex_loom) { 0 } else { 64 };

/// A process, as a lock owner: its slot and the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

impl Owner {
    pub(crate) fn word(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.slot + 1)
    }

    /// The owner a held lock word names.
    pub(crate) fn of(word: u64) -> Owner {
        Owner { slot: ((word & 0x7fff_ffff) as u32).wrapping_sub(1), gen: (word >> 32) as u32 }
    }
}

/// Whether a process slot's owner still lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Life {
    Alive,
    Dead,
    /// The slot does not exist: the word is corrupt.
    Corrupt,
}

/// Who answers [`Life`] questions (the process table; a model in tests).
pub(crate) trait Liveness {
    fn life(&self, owner: Owner) -> Life;
}

/// How the lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    Clean,
    /// From an owner that died holding it: the caller repairs what it protects.
    FromDead,
}

/// Take `lock` for `me`.
/// The thread counts itself busy from before the lock until [`unlock`] (`reentry.rs`: a
/// signal handler's call then does not take a lock).
pub(crate) fn lock(lock: &AtomicU64, me: Owner, live: &(impl Liveness + ?Sized)) -> Result<Taken, SharedError> {
    crate::reentry::locking();
    // Acquire: the critical section sees what the previous owner wrote before unlocking.
    if lock.compare_exchange(0, me.word(), Ordering::Acquire, Ordering::Relaxed).is_ok() {
        return Ok(Taken::Clean);
    }
    let r = lock_slow(lock, me, live);
    if r.is_err() {
        crate::reentry::unlocked(); // not taken
    }
    r
}

#[cold]
#[allow(clippy::absurd_extreme_comparisons)] // SPINS is 0 under loom
fn lock_slow(lock: &AtomicU64, me: Owner, live: &(impl Liveness + ?Sized)) -> Result<Taken, SharedError> {
    let mut spins = 0;
    loop {
        let cur = lock.load(Ordering::Relaxed);
        if cur == 0 {
            // After contention we may not be the only sleeper: keep WAITERS so our unlock wakes
            // the next one (a spurious wake at worst).
            let want = if spins >= SPINS { me.word() | WAITERS } else { me.word() };
            if lock.compare_exchange(0, want, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Ok(Taken::Clean);
            }
            continue;
        }
        if spins < SPINS {
            spins += 1;
            crate::primitive::spin_hint();
            continue;
        }
        let marked = cur | WAITERS;
        if cur != marked && lock.compare_exchange(cur, marked, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            continue;
        }
        if sleep(lock, marked as u32) {
            continue; // woken or changed: try again
        }
        // Timed out with the lock unchanged: is its owner alive?
        match live.life(Owner::of(marked)) {
            Life::Alive => continue,
            Life::Corrupt => return Err(SharedError::NotRecoverable),
            Life::Dead => {
                if lock.compare_exchange(marked, me.word() | WAITERS, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                    return Ok(Taken::FromDead);
                }
            }
        }
    }
}

/// Release `lock`, waking one sleeper if any marked it.
pub(crate) fn unlock(lock: &AtomicU64) {
    // Release: the next owner sees this critical section's writes.
    if lock.swap(0, Ordering::Release) & WAITERS != 0 {
        wake_one(lock);
    }
    crate::reentry::unlocked();
}

/// The low half of the lock word, which the kernel futex sleeps on.
#[cfg(not(ufutex_loom))]
fn low(lock: &AtomicU64) -> *const std::sync::atomic::AtomicU32 {
    // x86-64 is little-endian: the low half is the first four bytes.
    lock.as_ptr() as *const std::sync::atomic::AtomicU32
}

/// Sleep while the low half reads `val`, at most [`PROBE_AFTER`]: `true` unless it timed out.
#[cfg(not(ufutex_loom))]
fn sleep(lock: &AtomicU64, val: u32) -> bool {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: PROBE_AFTER.as_nanos() as libc::c_long };
    // SAFETY:
    // - the word is a live, 4-aligned u32 (the low half of an 8-aligned u64 in the never-unmapped
    //   segment); the kernel only reads it;
    // - `ts` outlives the call; FUTEX_WAIT (shared: the segment is mapped by many processes)
    //   with a relative timeout reads only these.
    let r = unsafe { libc::syscall(libc::SYS_futex, low(lock), libc::FUTEX_WAIT, val, &ts as *const libc::timespec) };
    !(r != 0 && super::segment::errno() == libc::ETIMEDOUT)
}

/// Under loom: a sleep is a yield that "times out" (so the contender asks about the owner).
#[cfg(ufutex_loom)]
fn sleep(_lock: &AtomicU64, _val: u32) -> bool {
    loom::thread::yield_now();
    false
}

#[cfg(not(ufutex_loom))]
fn wake_one(lock: &AtomicU64) {
    // SAFETY: FUTEX_WAKE only hashes the address (a live word of the segment).
    unsafe { libc::syscall(libc::SYS_futex, low(lock), libc::FUTEX_WAKE, 1) };
}

#[cfg(ufutex_loom)]
fn wake_one(_lock: &AtomicU64) {}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    struct Table(Vec<Life>);
    impl Liveness for Table {
        fn life(&self, o: Owner) -> Life {
            self.0.get(o.slot as usize).copied().unwrap_or(Life::Corrupt)
        }
    }

    const A: Owner = Owner { slot: 0, gen: 5 };
    const B: Owner = Owner { slot: 1, gen: 9 };

    #[test]
    fn a_dead_owners_lock_is_taken_over_and_said_so() {
        let l = AtomicU64::new(0);
        assert_eq!(lock(&l, A, &Table(vec![Life::Alive, Life::Alive])), Ok(Taken::Clean));
        // A "dies" holding it.
        assert_eq!(lock(&l, B, &Table(vec![Life::Dead, Life::Alive])), Ok(Taken::FromDead));
        assert_eq!(Owner::of(l.load(Ordering::Relaxed)), B);
        unlock(&l);
        assert_eq!(l.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_lock_naming_no_slot_is_corruption() {
        let l = AtomicU64::new((3 << 32) | 77);
        assert_eq!(lock(&l, A, &Table(vec![Life::Alive])), Err(SharedError::NotRecoverable));
    }

    #[test]
    fn contenders_exclude_each_other() {
        let l = Arc::new(AtomicU64::new(0));
        let inside = Arc::new(AtomicU32::new(0));
        let ts: Vec<_> = (0..4)
            .map(|i| {
                let (l, inside) = (l.clone(), inside.clone());
                std::thread::spawn(move || {
                    let t = Table(vec![Life::Alive; 4]);
                    for _ in 0..2000 {
                        lock(&l, Owner { slot: i, gen: 1 }, &t).unwrap();
                        assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0);
                        inside.fetch_sub(1, Ordering::Relaxed);
                        unlock(&l);
                    }
                })
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
    }
}
