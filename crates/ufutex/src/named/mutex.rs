//! A namespace's mutex: an owner (process and thread), a recursion count, and the abandoned
//! state of NT mutexes and robust pthread mutexes. A mutex is abandoned when its owner thread
//! ends holding it (returns from its start routine, or `pthread_exit`: NT's `WAIT_ABANDONED`)
//! or when its owner's process dies holding it; the next locker — any thread of any process —
//! takes it with [`Acquired::Abandoned`] (`EOWNERDEAD`), once.
//!
//! ```text
//!   owner  0                          free
//!          (gen << 32) | (slot + 1)   held by a thread of process (slot, gen) of the shared
//!                                     table ("mine" to that process): `tid` is the thread's
//!                                     kernel id, `aux` the depth
//!          that | PENDING (1 << 31)   being taken from a dead owner: `tid` not yet the taker's
//!          ABANDONED                  its owner thread ended holding it; `tid` 0. Its low half
//!                                     (a process's slot + 1) is 0: it names no process
//!   word   the release sequence, bumped by every release and abandonment; contenders sleep on it
//! ```
//!
//! Transitions (each CAS and store cites its number):
//!
//! 1. free → held: CAS `0 → mine`; then `tid`, `aux = 1`.
//! 2. held → held (recursion): the owner thread adds 1 to `aux`.
//! 3. held → free (the last unlock): `tid = 0`, then `owner = 0` (Release), bump, wake one.
//! 4. held by a dead process, or a word naming no process (corrupt) → pending → held, abandoned:
//!    CAS `cur → mine | PENDING`; `tid`, `aux = 1`; then `owner = mine` (Release).
//! 5. held → abandoned (the owner thread ended): CAS `tid → 0`, then CAS `mine → ABANDONED`
//!    (Release), bump, wake one.
//! 6. abandoned → held, abandoned: CAS `ABANDONED → mine`; then `tid`, `aux = 1`.
//!
//! # Removal
//!
//! Removing the object (the table's) marks `word` removed and wakes every waiter. A handle is
//! checked before each operation, but the object may be removed — and a new one made in its slot
//! — between that check and the CAS on `owner`, which carries no generation. Two rules keep an
//! operation from touching another object:
//! - A removed mutex's slot is reused only once its `owner` is 0 or `ABANDONED`: while a thread
//!   holds it, whatever that thread writes (`tid`, `aux`, `owner`) lands on the removed object.
//!   Its holder lets go at its unlock (which answers `Removed`), at its thread's end, or when its
//!   list of held mutexes makes room; once its process is dead, the slot is reused anyway.
//! - A take (1, 4, 6) looks at the handle again after its CAS: if the object is not the
//!   handle's any more, it puts the owner word it replaced back — no one else changes a word
//!   that names us — wakes the contenders of whatever lives there, and answers `Removed`.
//!
//! A contender reads the sequence, tries to take `owner` with a CAS, and if it is held sleeps
//! on the sequence (so a release or an abandonment between its CAS and its sleep makes the sleep
//! return at once) for at most [`PROBE`]; each try asks whether a holding process lives (the
//! shared table's liveness lock: safe against PID reuse and namespaces) and takes a dead owner's
//! mutex over with a CAS from that exact owner word (4).
//!
//! # Recursion and the thread id
//!
//! A thread holds the mutex when `owner` is its process's word and `tid` its kernel thread id.
//! Only the owner thread writes its id there, and it is the second step of a take, after the
//! CAS: in between, another thread of the same process must not read its own id there. It
//! cannot: a release (3) and an abandonment (5) clear `tid` before the owner word leaves the
//! thread, and a taker's Acquire CAS extends that release's sequence, so a thread that reads the
//! taker's word reads `tid` 0 or the taker's id (1, 6). A dead owner never cleared its `tid`,
//! and a thread of ours may have that id (the kernel reuses ids; other PID namespaces number
//! theirs apart), so 4 goes through `PENDING`, which is nobody's word, and publishes `mine` with
//! a Release store only after `tid`.
//!
//! # Thread exit
//!
//! Each thread keeps the list of the mutexes it holds (slot and generation: added at the first
//! lock, dropped at the last unlock; no allocation once the list has grown to the most the
//! thread holds) and arms a pthread key whose destructor runs as the thread ends — after the
//! thread-local destructors of Rust and C++ (glibc runs those first), so that one of those may
//! still release a mutex; a mutex locked by another key's destructor arms it again for one more
//! round. The destructor abandons each mutex still held (5), which wakes a sleeping contender
//! at once — or, if it was removed, lets go of it (see "Removal"). A forked child inherits
//! the forking thread's list, which names its parent's mutexes: the child's first mutex
//! operation drops it (the process identity changed), and the destructor ignores it (the pid
//! changed). The main thread ending the process, and a thread that ends without destructors (a
//! raw `exit` system call), leave the mutexes to the process's death. Not async-signal-safe.

use super::table::{live_gen, owner_of, pack, Slot, LIVE, REMOVED};
pub(super) use super::table::{ABANDONED, PENDING};
use super::{NamedError, Namespace};
use crate::deadline::Deadline;
use crate::once::RacyWord;
use crate::shared::lock::{Life, Liveness, Owner};
use crate::shared::{self, SharedError};
use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How long a contender sleeps before it asks whether the owner is alive: the latency of
/// noticing a mutex whose owner process died.
pub(super) const PROBE: Duration = Duration::from_millis(20);

/// The sooner of `deadline` and [`PROBE`] from now: how long a contender sleeps.
pub(super) fn probe(deadline: Option<Deadline>) -> Deadline {
    let probe: Deadline = PROBE.into();
    match deadline {
        Some(d) if earlier(d, probe) => d,
        _ => probe,
    }
}

/// How a lock was taken. Either way the caller owns the mutex.
///
/// # Examples
/// ```
/// use ufutex::named::{Acquired, Namespace, Open};
/// let name = format!("doc-acquired-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_2800 + std::process::id() as u64;
/// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
/// match m.lock(None).unwrap() {
///     Acquired::Acquired => {}
///     Acquired::Abandoned => { /* repair what it protects first */ }
/// }
/// m.unlock().unwrap();
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// Normally (or once more by its owner thread: recursion).
    Acquired,
    /// From an owner thread that ended holding it, or a process that died holding it
    /// (`EOWNERDEAD`): the caller owns it now (once, whatever the depth it was held at), and
    /// what it protects may be inconsistent.
    Abandoned,
}

/// A mutex of a namespace: owned by one thread of one process, recursive, and abandoned
/// (not released) when its owner thread or process ends holding it. Not fair: contenders are
/// not served in order.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
/// use ufutex::named::{Namespace, Open};
/// let name = format!("doc-mutex-type-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_2900 + std::process::id() as u64;
/// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
/// let n = AtomicU32::new(0);
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             for _ in 0..100 {
///                 m.lock(None).unwrap();
///                 n.store(n.load(Relaxed) + 1, Relaxed); // not atomic: the mutex excludes
///                 m.unlock().unwrap();
///             }
///         });
///     }
/// });
/// assert_eq!(n.into_inner(), 200);
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Mutex<'ns> {
    pub(crate) ns: &'ns Namespace,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

fn word_of(o: Owner) -> u64 {
    (u64::from(o.gen) << 32) | u64::from(o.slot + 1)
}

/// Whether the object in `s` is still the live one of generation `gen` (the table's check).
fn live(s: &Slot, gen: u32) -> bool {
    s.state.load(Ordering::Acquire) == pack(gen, LIVE)
}

impl Mutex<'_> {
    fn slot(&self) -> Result<&'static Slot, NamedError> {
        // (A namespace's slots are a mapping that is never unmapped: `live` gives them 'static.)
        self.ns.live(self.slot, self.gen)
    }

    /// Take the mutex without sleeping: `None` if another thread holds it. Takes it again if
    /// this thread holds it, and takes it over (as [`Acquired::Abandoned`]) if its owner died.
    ///
    /// # Errors
    /// As [`Mutex::lock`] (never `Shared(TimedOut)` or `Shared(Interrupted)`).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Acquired, Namespace, Open};
    /// let name = format!("doc-mutex-try-lock-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2a00 + std::process::id() as u64;
    /// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
    /// assert_eq!(m.try_lock(), Ok(Some(Acquired::Acquired)));
    /// std::thread::scope(|s| {
    ///     assert_eq!(s.spawn(|| m.try_lock()).join().unwrap(), Ok(None)); // held by another
    /// });
    /// m.unlock().unwrap();
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn try_lock(&self) -> Result<Option<Acquired>, NamedError> {
        let s = self.slot()?;
        let p = shared::process::proc()?;
        self.attempt(s, p.me, p)
    }

    /// Take the mutex, sleeping while another holds it, until `deadline`. Recursive: its owner
    /// thread takes it again (release it as many times). If its owner thread ends holding it,
    /// or its owner's process dies, the next locker gets [`Acquired::Abandoned`].
    ///
    /// # Errors
    /// [`NamedError::Removed`]; `Shared(TimedOut)`, `Shared(Interrupted)`; `Shared(NoSpace)` or
    /// `Shared(NoMemory)` if this thread's exit hook cannot be set up (no pthread key left, no
    /// memory for the list of what it holds); [`NamedError::Range`] if its owner thread would
    /// hold it more than `u32::MAX` times; another `Shared(_)` if the shared table cannot be
    /// used.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Acquired, Namespace, Open};
    /// let name = format!("doc-mutex-{}", std::process::id()); // its own, in a parallel run too
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1000 + std::process::id() as u64;
    /// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
    /// // A thread ends holding it: the next locker is told, once.
    /// std::thread::scope(|s| s.spawn(|| m.lock(None).unwrap()).join().unwrap());
    /// assert_eq!(m.lock(None), Ok(Acquired::Abandoned));
    /// m.unlock().unwrap();
    /// assert_eq!(m.lock(None), Ok(Acquired::Acquired));
    /// m.unlock().unwrap();
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
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
            match shared::wait(&s.word, seq, Some(probe(deadline))) {
                Ok(()) | Err(SharedError::WouldBlock) => {}
                Err(SharedError::TimedOut) if deadline.is_some_and(expired) => {
                    return Err(NamedError::Shared(SharedError::TimedOut))
                }
                Err(SharedError::TimedOut) => {} // probe: the next attempt asks about the owner
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// One try: take it free (1), again (2), from a dead owner (4) or abandoned (6); `None` if
    /// held.
    fn attempt(&self, s: &'static Slot, me: Owner, live: &impl Liveness) -> Result<Option<Acquired>, NamedError> {
        let mine = word_of(me);
        with_holder(me, |h| {
            h.ready()?;
            let cur = s.owner.load(Ordering::Acquire);
            if cur == mine && s.tid.load(Ordering::Relaxed) == h.tid {
                // 2: only this thread changes the depth while it holds it.
                let n = s.aux.load(Ordering::Relaxed);
                s.aux.store(n.checked_add(1).ok_or(NamedError::Range)?, Ordering::Relaxed);
                return Ok(Some(Acquired::Acquired));
            }
            let (how, via) = match cur {
                0 => (Acquired::Acquired, mine),          // 1
                ABANDONED => (Acquired::Abandoned, mine), // 6
                // (`mine` held by another thread of ours, or pending: our process lives.)
                _ => match live.life(owner_of(cur)) {
                    Life::Alive => return Ok(None),
                    Life::Dead | Life::Corrupt => (Acquired::Abandoned, mine | PENDING), // 4
                },
            };
            // Acquire: we see what the previous owner did while holding it. From that exact
            // word: two takers cannot both win.
            if s.owner.compare_exchange(cur, via, Ordering::Acquire, Ordering::Relaxed).is_err() {
                return Ok(None);
            }
            if !self::live(s, self.gen) {
                return Err(give_back(s, cur));
            }
            s.tid.store(h.tid, Ordering::Relaxed);
            s.aux.store(1, Ordering::Relaxed);
            if via != mine {
                // 4: Release: a thread of ours that reads `mine` reads our id in `tid`.
                s.owner.store(mine, Ordering::Release);
            }
            h.held.push(Owned { slot: s, gen: self.gen }); // room made by `ready`
            Ok(Some(how))
        })
    }

    /// Release it once (the owner thread only); the last release wakes one contender.
    ///
    /// # Errors
    /// [`NamedError::NotOwner`] (`EPERM`) if this thread does not hold it (also in a pthread
    /// key's destructor that runs after this thread's exit hook abandoned it);
    /// [`NamedError::Removed`]; `Shared(_)` if the shared table cannot be used (to find this
    /// process, or for the wake after the last release, which stands).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-mutex-unlock-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_2b00 + std::process::id() as u64;
    /// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
    /// assert_eq!(m.unlock(), Err(NamedError::NotOwner));
    /// m.lock(None).unwrap();
    /// m.lock(None).unwrap(); // recursion
    /// m.unlock().unwrap();
    /// std::thread::scope(|s| {
    ///     assert_eq!(s.spawn(|| m.try_lock()).join().unwrap(), Ok(None)); // still held once
    /// });
    /// m.unlock().unwrap();
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn unlock(&self) -> Result<(), NamedError> {
        let s = match self.slot() {
            Ok(s) => s,
            Err(e) => return self.unlock_removed(e),
        };
        let p = shared::process::proc()?;
        let mine = word_of(p.me);
        let last = with_holder(p.me, |h| {
            if s.owner.load(Ordering::Relaxed) != mine || s.tid.load(Ordering::Relaxed) != h.tid {
                return Err(NamedError::NotOwner);
            }
            let n = s.aux.load(Ordering::Relaxed);
            if n > 1 {
                s.aux.store(n - 1, Ordering::Relaxed); // 2, backwards
                return Ok(false);
            }
            h.release(Owned { slot: s, gen: self.gen });
            Ok(true)
        })?;
        if last {
            // 3: `tid` first (see "Recursion and the thread id").
            s.tid.store(0, Ordering::Relaxed);
            // Release: the next owner sees what we did while holding it.
            s.owner.store(0, Ordering::Release);
            released(s, self.gen)?;
        }
        Ok(())
    }

    /// [`Mutex::unlock`] of a removed mutex (`removed`: the error): if this thread holds it, it
    /// lets go, so that its slot can be reused (see "Removal").
    #[cold]
    fn unlock_removed(&self, removed: NamedError) -> Result<(), NamedError> {
        let Some(s) = self.ns.table().slot(self.slot) else { return Err(removed) };
        let p = shared::process::proc()?;
        with_holder(p.me, |h| {
            let m = Owned { slot: s, gen: self.gen };
            if h.held.iter().any(|o| o.is(&m)) {
                h.release(m);
                let_go(m, word_of(p.me), h.tid);
            }
        });
        Err(removed)
    }
}

/// After a take's CAS on `s`, whose object turned out not to be the handle's: put back the
/// owner word `cur` that the CAS replaced, and wake the contenders of the object there now.
#[cold]
fn give_back(s: &Slot, cur: u64) -> NamedError {
    // Release: as an unlock's. (A word naming us is changed by no one else: see "Removal".)
    s.owner.store(cur, Ordering::Release);
    if let Some(gen) = live_gen(s) {
        let _ = released(s, gen); // a failed wake leaves them to their probe
    }
    NamedError::Removed
}

/// This thread (kernel id `tid` of process word `mine`) lets go of the removed mutex `m` it
/// holds (its slot is still `m`'s: see "Removal"), from our words only.
fn let_go(m: Owned, mine: u64, tid: u32) {
    let s = m.slot;
    if s.tid.compare_exchange(tid, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        let _ = s.owner.compare_exchange(mine, 0, Ordering::Release, Ordering::Relaxed);
    }
}

/// After 3 and 5: bump the release sequence (after the owner word: a contender that read the
/// old one and saw the mutex held fails its sleep's compare, or is woken) and wake one.
///
/// Never into the removed mark, and not once the object is gone (its waiters were woken): the
/// bump is made only while the word's generation is the mutex's (`Slot::update_word`), so it
/// never lands on a new object made in the slot.
fn released(s: &Slot, gen: u32) -> Result<(), SharedError> {
    let bump = |v: u32| {
        Some(match v.wrapping_add(1) {
            REMOVED => 0,
            n => n,
        })
    };
    if s.update_word(gen, Ordering::Release, Ordering::Acquire, bump).is_ok() {
        shared::wake(&s.word, 1)?;
    }
    Ok(())
}

/// A mutex this thread holds (its depth is in the slot).
#[derive(Clone, Copy)]
struct Owned {
    slot: &'static Slot,
    gen: u32,
}

impl Owned {
    fn is(&self, other: &Owned) -> bool {
        std::ptr::eq(self.slot, other.slot) && self.gen == other.gen
    }

    /// Whether its object still lives (not removed; its slot not reused).
    fn live(&self) -> bool {
        live(self.slot, self.gen)
    }
}

/// This thread as a mutex owner: its kernel id and the mutexes it holds, for the process they
/// belong to.
struct Holder {
    /// The process identity `tid`, `pid` and `held` belong to; `None` before the first use.
    proc: Option<Owner>,
    /// That process's id: the exit hook tells a forked child by it (without claiming a slot).
    pid: libc::pid_t,
    tid: u32,
    /// This thread's value of the exit hook's key is set.
    armed: bool,
    held: Vec<Owned>,
}

std::thread_local! {
    /// Without drop glue, so that it stays usable while the thread's destructors run: the exit
    /// hook runs after them, and frees the list.
    static HOLDER: ManuallyDrop<RefCell<Holder>> = const {
        ManuallyDrop::new(RefCell::new(Holder { proc: None, pid: 0, tid: 0, armed: false, held: Vec::new() }))
    };
}

/// Run `f` on this thread's holder, as a thread of process `me`.
fn with_holder<R>(me: Owner, f: impl FnOnce(&mut Holder) -> R) -> R {
    HOLDER.with(|h| {
        let mut h = h.borrow_mut();
        if h.proc != Some(me) {
            h.become_of(me);
        }
        f(&mut h)
    })
}

impl Holder {
    /// The first use in this thread, or the first in a forked child (where the list is the
    /// forking thread's: its parent's mutexes, not ours).
    #[cold]
    fn become_of(&mut self, me: Owner) {
        self.held.clear();
        self.proc = Some(me);
        // SAFETY: getpid and gettid have no arguments and cannot fail.
        (self.pid, self.tid) = unsafe { (libc::getpid(), libc::gettid() as u32) };
    }

    /// Ready to hold one more mutex without allocating: the exit hook armed, room in the list.
    #[inline]
    fn ready(&mut self) -> Result<(), NamedError> {
        if !self.armed {
            self.arm()?;
        }
        if self.held.len() == self.held.capacity() {
            self.grow()?;
        }
        Ok(())
    }

    #[cold]
    fn arm(&mut self) -> Result<(), NamedError> {
        let key = exit_key().ok_or(NamedError::Shared(SharedError::NoSpace))?;
        // SAFETY: `key` is a live key of ours (never deleted); the value is a non-null marker
        // that nothing dereferences.
        if unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) } != 0 {
            return Err(NamedError::Shared(SharedError::NoMemory));
        }
        self.armed = true;
        Ok(())
    }

    /// Make room: let go of removed mutexes first (an unlock of one fails), then grow.
    #[cold]
    fn grow(&mut self) -> Result<(), NamedError> {
        if let Some(me) = self.proc {
            for m in self.held.iter().filter(|m| !m.live()) {
                let_go(*m, word_of(me), self.tid);
            }
        }
        self.held.retain(Owned::live);
        self.held.try_reserve(1).map_err(|_| NamedError::Shared(SharedError::NoMemory))
    }

    /// The last release of `m`.
    fn release(&mut self, m: Owned) {
        if let Some(i) = self.held.iter().rposition(|h| h.is(&m)) {
            self.held.swap_remove(i);
        }
    }
}

/// The pthread key whose destructor is the exit hook (made once per process; a thread that
/// loses the race to make it deletes its own, and nothing waits: `once.rs`); `None` if the
/// process has no key left.
fn exit_key() -> Option<libc::pthread_key_t> {
    static KEY: RacyWord = RacyWord::new();
    let kept = KEY.get_or_make_option(
        || {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is a valid out-pointer; `thread_exit` is a destructor that ignores
            // its argument and never unwinds.
            let made = unsafe { libc::pthread_key_create(&mut key, Some(thread_exit)) } == 0;
            made.then_some(u64::from(key))
        },
        |mine| {
            // SAFETY: a key this thread made and never published: no thread set a value of it.
            unsafe { libc::pthread_key_delete(mine as libc::pthread_key_t) };
        },
    );
    kept.map(|k| k as libc::pthread_key_t)
}

/// The exit hook: the C library calls it as a thread whose value of our key is set ends (after
/// the thread-local destructors; again in the next round if another key's destructor locked a
/// mutex after it, which armed it again). It abandons what the thread still holds (5).
extern "C" fn thread_exit(_marker: *mut libc::c_void) {
    HOLDER.with(|h| {
        let Ok(mut h) = h.try_borrow_mut() else { return };
        h.armed = false; // the C library cleared our value before calling us
        let held = std::mem::take(&mut h.held);
        let (Some(me), tid, pid) = (h.proc, h.tid, h.pid) else { return };
        drop(h);
        // SAFETY: getpid has no arguments and cannot fail.
        if held.is_empty() || pid != unsafe { libc::getpid() } {
            return; // nothing held, or a forked child's copy of its parent's list
        }
        for m in held {
            abandon(m, word_of(me), tid);
        }
    });
}

/// 5: this thread (kernel id `tid` of process word `mine`) ends holding `m`.
fn abandon(m: Owned, mine: u64, tid: u32) {
    let s = m.slot;
    if !m.live() {
        return let_go(m, mine, tid); // removed: its slot waits for us (see "Removal")
    }
    if s.owner.load(Ordering::Relaxed) != mine {
        return;
    }
    // `tid` first (see "Recursion and the thread id"); from our id only, so as not to erase
    // another owner's if the object was removed and its slot reused since the check.
    if s.tid.compare_exchange(tid, 0, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return;
    }
    // (`aux` is left as it is: the next owner sets it.)
    // Release: the next owner sees what this thread did while holding it.
    if s.owner.compare_exchange(mine, ABANDONED, Ordering::Release, Ordering::Relaxed).is_ok() {
        // A failed wake leaves the contenders to their probe: they find it abandoned then.
        let _ = released(s, m.gen);
    }
}

/// Whether deadline `a` comes before `b` (both from this process's clocks).
fn earlier(a: Deadline, b: Deadline) -> bool {
    let t = |d: Deadline| crate::deadline::Timeout::from(d).remaining();
    t(a) < t(b)
}

pub(super) fn expired(d: Deadline) -> bool {
    crate::deadline::Timeout::from(d).expired()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_process_word_is_abandoned_or_pending() {
        for o in [Owner { slot: 0, gen: 0 }, Owner { slot: 0, gen: u32::MAX }, Owner { slot: (1 << 15) - 1, gen: 7 }] {
            let w = word_of(o);
            assert_ne!(w, 0);
            assert_ne!(w, ABANDONED);
            assert_eq!(w & PENDING, 0);
            assert_eq!(owner_of(w), o);
            assert_eq!(owner_of(w | PENDING), o, "a pending take names its taker");
        }
        assert_eq!(ABANDONED as u32, 0, "names no process slot");
    }
}
