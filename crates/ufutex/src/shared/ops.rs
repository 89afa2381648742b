//! The operations on ufutex's own shared table: wait (any of many words), wake, requeue, the C
//! ABI's wake-op — the engine's (`waiter.rs`, `wake.rs`, `requeue.rs`, `wake_op.rs`) on
//! [`SharedTable`] (`engine.rs` here), with the records a wait needs.
//!
//! # The protocol
//!
//! The private engine's (A)/(B) argument (`wait.rs`), with the *filter* in the place of the
//! bucket's waiter count: `filter[addr & 4095]` counts the user's shared waiters whose word sits
//! at that offset in its page. The offset within the page is the same in every mapping of an
//! object (mappings are page-aligned), so the count needs no identity, and a wake that reads 0
//! skips everything — the mapping query, the bucket, the kernel — soundly, whatever the mapping
//! history:
//!
//! ```text
//!   waiter                                    waker
//!   spin: *word != expected? -> EAGAIN        *word = new                (caller's store)
//!   (A) filter[off] += 1; fence(SeqCst)
//!       key = query(addr); lock bucket(key)   (B) fence(SeqCst)
//!       *word == expected?                        filter[off] == 0?  -> return 0
//!         no  -> unlock, filter -= 1, EAGAIN      key = query(addr); lock bucket(key)
//!         yes -> queue the record, unlock, park   dequeue up to n; mark Woken; kick
//! ```
//!
//! If the waker reads 0, the waiter's (A) fence comes after the waker's (B) fence in the single
//! order S, so the waiter's load sees the new value. Otherwise the waker locks the bucket of the
//! same key (both asked the kernel what backs the address *now*), and the bucket lock, held by
//! the waiter from its load to its enqueue, makes the waker find it queued. Keys are never
//! cached: each operation that queues or dequeues asks afresh — except for a word in a mapping
//! promised to stay (the library's own, a namespace's, which it never unmaps, or one the user
//! registered: `known.rs`), whose identity was asked once, by the same rule, when it was
//! noted: what backs it cannot change while the promise holds.
//!
//! The spin comes before any of it (`park::spin_before_queueing`): a waiter that has not
//! queued may look at its words later, linearisable at the load that saw the change, and a
//! partner answering within the spin then costs neither side a mapping query.
//!
//! A record holds one filter count, on the offset in `counted`; the waiter (or whoever reaps
//! it) drops it exactly once, after the record left its queue; a requeue adds the new offset's
//! count before it drops the old one. A process that dies leaves counts too high, never too
//! low: that costs a wake its fast path, never a wakeup.

use super::engine::{Operator, Rec, SharedTable};
use super::identity::{self, SharedKey};
use super::known;
use super::park::{self, Parked};
use super::process::{claimed, proc, segment, Proc};
use super::queue::Host;
use super::segment::{REC_IDLE, REC_WOKEN};
use super::SharedError;
use crate::deadline::Timeout;
use crate::engine::Want;
use crate::membarrier::Pays;
use crate::parker::Watch;
use crate::requeue::Refused;
use crate::waiter::{enqueue_all, take_back, try_collect, Unqueued, Why};
use crate::wake::Report;
use crate::wake_op::Failed;
use crate::word::WordRef;
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// This process operating on the shared table: its slot claimed the first time it locks,
/// identities asked of the kernel.
pub(crate) struct Here;

impl Operator for Here {
    fn host(&self) -> Result<&dyn Host, SharedError> {
        Ok(proc()?)
    }

    fn key_of(&self, h: &dyn Host, addr: usize) -> Result<SharedKey, SharedError> {
        Ok(asked(h, addr)?.0)
    }

    /// One question for both words when the mapping that covers `a` covers `b` too (a word
    /// never crosses a page, so never a mapping's end): a requeue between two words of one
    /// shared structure, or of a word onto itself, pays one query instead of two (~1 µs).
    fn key_pair(&self, h: &dyn Host, a: usize, b: usize) -> Result<(SharedKey, SharedKey), SharedError> {
        let (ka, mapping) = asked(h, a)?;
        match mapping {
            Some((vma, p)) if (vma.start..vma.end).contains(&(b as u64)) && known::key_of(b).is_none() => {
                Ok((ka, identity::classify(b, &vma, (p.me.slot, p.me.gen))?))
            }
            _ => Ok((ka, self.key_of(h, b)?)),
        }
    }

    /// A signal handler's wake that interrupted its thread inside a critical section
    /// (`reentry.rs`): the word is found again by its address when the wake is made.
    fn defer_wake(&self, addr: usize, n: usize, mask: u64) -> bool {
        let busy = crate::reentry::busy();
        if busy {
            crate::reentry::defer(run_deferred, std::ptr::null(), crate::key::Key::private(addr), n, mask);
        }
        busy
    }
}

/// A mapping as the kernel reported it, and the process that asked.
type Asked = (identity::Vma, &'static Proc);

/// The key of the word at `addr` now, and the mapping the kernel reported for it (none for a
/// mapping promised to stay: the library's own or registered, `known.rs`, which the kernel is
/// not asked about).
fn asked(h: &dyn Host, addr: usize) -> Result<(SharedKey, Option<Asked>), SharedError> {
    if let Some(key) = known::key_of(addr) {
        return Ok((key, None));
    }
    let p = proc()?;
    debug_assert!(std::ptr::addr_eq(p, h), "one process operates here");
    let vma = identity::query(p.maps_fd, addr)?;
    Ok((identity::classify(addr, &vma, (p.me.slot, p.me.gen))?, Some((vma, p))))
}

/// The shared table as this process sees it (the segment opened the first time).
fn here() -> Result<SharedTable<'static, Here>, SharedError> {
    Ok(SharedTable { seg: segment()?, op: Here })
}

/// One word of a shared wait: the word, the value it must hold, the wake mask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) word: WordRef,
    pub(crate) expected: u64,
    pub(crate) mask: u64,
}

impl Entry {
    /// Its word for the kernel to watch, if 32-bit: a shared futex (see [`wait_watching`]).
    pub(crate) fn watch(&self) -> Option<Watch<'_>> {
        Some(Watch { word: self.word.as_u32()?, val: self.expected as u32, shared: true })
    }
}

thread_local! {
    /// This thread's first record (its park word) and the process it belongs to.
    static MINE: Mine = const { Mine { rec: Cell::new(None) } };
}

/// A thread's first record, given back when the thread exits.
struct Mine {
    rec: Cell<Option<(&'static Proc, u32)>>,
}

impl Drop for Mine {
    fn drop(&mut self) {
        if let Some((p, r)) = self.rec.get() {
            // Only to the process that gave it (a forked child's copy belongs to its parent;
            // a child that never claimed a slot has nothing of its own to give back to).
            if claimed().is_some_and(|now| std::ptr::eq(now, p)) {
                p.free(r);
            }
        }
    }
}

/// This thread's first record in `p`, allocated the first time.
fn my_record(p: &'static Proc) -> Result<u32, SharedError> {
    MINE.with(|m| match m.rec.get() {
        Some((q, r)) if std::ptr::eq(q, p) => Ok(r),
        _ => {
            let r = p.alloc()?;
            m.rec.set(Some((p, r)));
            Ok(r)
        }
    })
}

/// Wait until a waker dequeues one of `entries` (all process-shared): the index of a woken
/// entry (the highest, if several were), or why not. With `also_kernel`, the entries' 32-bit
/// words are also woken by the kernel's own wakes of them, as shared futexes: such a wake, or a
/// change of the word's value while the thread sleeps, ends the wait with that entry's index
/// although no waker of ours took a record — the legacy futex semantics, which allow spurious
/// wakeups (the preload library's waits: a raw-syscall waker, a process that is not preloaded,
/// the kernel's wake of a thread-id word must still reach them; `wait::Wakers::AlsoKernel`).
pub(crate) fn wait_watching(
    entries: &[Entry],
    timeout: Option<&Timeout>,
    also_kernel: bool,
) -> Result<usize, SharedError> {
    // Early exit without the table: linearisable at the load that saw the mismatch.
    if changed(entries) {
        return Err(SharedError::WouldBlock);
    }
    // A deadline already passed: no spin (below: no queue and no sleep either).
    let expired = timeout.is_some_and(|t| t.expired());
    if !expired && park::spin_before_queueing(|| changed(entries)) {
        return Err(SharedError::WouldBlock);
    }
    // Not from a signal handler that interrupted a wait (whose record is queued) or a
    // critical section (`reentry.rs`).
    let Some(_episode) = crate::reentry::episode() else {
        return Err(SharedError::Interrupted);
    };
    // The 32-bit words the kernel may wake, and their entries' indices.
    let (mut watch, mut index) = (Vec::new(), Vec::new());
    if also_kernel {
        let n = entries.len();
        watch.try_reserve_exact(n).and(index.try_reserve_exact(n)).map_err(|_| SharedError::NoMemory)?;
        for (i, w) in entries.iter().enumerate().filter_map(|(i, e)| Some((i, e.watch()?))) {
            watch.push(w);
            index.push(i);
        }
    }
    let mut w = Waiting::new(entries)?;
    // A deadline already passed: timed out now, before the queue and the sleep, as a private
    // wait (`wait.rs`), once what the kernel does before its timer is done: its allocations
    // (here also the records: `NoMemory`, `NoSpace`) and the lookup of every word's key
    // (`Fault`). The records go back as `w` drops.
    if expired {
        let keys = entries.iter().try_for_each(|e| Here.key_of(w.p, e.word.addr()).map(drop));
        return Err(keys.err().unwrap_or(SharedError::TimedOut));
    }
    match w.queue().and_then(|()| park::park(w.p.seg, w.first, &w.recs, timeout, &watch)) {
        // Ended by a watched word: unless a waker of ours took a record meanwhile (then its
        // index), a spurious wakeup of that word's entry.
        Ok(Parked::Watched(j)) => w.finish_with(Ok(index[j])),
        Ok(Parked::Woken(_)) => w.finish(None),
        Err(e) => w.finish(Some(e)),
    }
}

/// Whether a word of `entries` no longer holds its value.
pub(crate) fn changed(entries: &[Entry]) -> bool {
    entries.iter().any(|e| e.word.load() != e.expected)
}

/// One thread's shared entries of a wait: their records, queued and taken out again. `index`
/// of each entry is what a wake of it returns (its position in the caller's vector).
pub(crate) struct Waiting<'e> {
    p: &'static Proc,
    entries: &'e [Entry],
    indices: Option<&'e [usize]>,
    /// One record per entry; the first is the thread's own (its park word).
    recs: Vec<u32>,
    first: u32,
    queued: usize,
}

impl<'e> Waiting<'e> {
    /// Records for `entries` (positions 0.. as indices).
    pub(crate) fn new(entries: &'e [Entry]) -> Result<Waiting<'e>, SharedError> {
        let p = proc()?;
        let first = my_record(p)?;
        let mut recs = Vec::new();
        recs.try_reserve_exact(entries.len()).map_err(|_| SharedError::NoMemory)?;
        recs.push(first);
        let mut w = Waiting { p, entries, indices: None, recs, first, queued: 0 };
        for _ in 1..entries.len() {
            let r = w.p.alloc()?; // on error, Drop gives back what we took
            w.recs.push(r);
        }
        Ok(w)
    }

    /// The same, the i-th entry reporting `indices[i]` when woken.
    pub(crate) fn with_indices(mut self, indices: &'e [usize]) -> Waiting<'e> {
        self.indices = Some(indices);
        self
    }

    fn table(&self) -> SharedTable<'static, Here> {
        SharedTable { seg: self.p.seg, op: Here }
    }

    /// The waiter of each entry.
    fn waiters(&self) -> impl ExactSizeIterator<Item = Rec> + '_ {
        self.recs.iter().enumerate().map(|(i, &r)| {
            let index = self.indices.map_or(i, |ix| ix[i]) as u32;
            Rec { r, park: self.first, index }
        })
    }

    /// Queue every entry whose word still holds its value (the engine's waiter core); stop at
    /// the first that does not (`WouldBlock`) or at an error.
    pub(crate) fn queue(&mut self) -> Result<(), SharedError> {
        let wants = self.entries.iter().zip(self.waiters()).map(|(e, waiter)| Want::<SharedTable<'_, Here>> {
            waiter,
            word: e.word,
            expected: e.expected,
            key: e.word.addr(),
            mask: e.mask,
        });
        let wants = try_collect(wants).ok_or(SharedError::NoMemory)?;
        // The filter's (A) fence is paid by every waiter (`Pays` does not apply).
        match enqueue_all(&self.table(), &wants, Pays::Waker) {
            Ok(()) => {
                self.queued = wants.len();
                Ok(())
            }
            Err(Unqueued { queued, why }) => {
                self.queued = queued;
                Err(match why {
                    Why::Changed => SharedError::WouldBlock,
                    Why::NoMemory => SharedError::NoMemory,
                    Why::Table(e) => e,
                })
            }
        }
    }

    /// The record whose park word a waker of any of these entries bumps and wakes.
    pub(crate) fn park_record(&self) -> Result<&'static super::segment::Record, SharedError> {
        self.p.seg.record(self.first)
    }

    /// Whether a waker took one of the entries.
    pub(crate) fn woken(&self) -> Result<bool, SharedError> {
        for &r in &self.recs[..self.queued] {
            if self.p.seg.record(r)?.state.load(Ordering::Acquire) == REC_WOKEN {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Take every still-queued record out; if wakers took any, the highest woken index, else
    /// `otherwise` (or `NotRecoverable` if there is no reason at all). Every record's filter
    /// count is dropped and its state made Idle (`Drop`).
    pub(crate) fn finish(self, otherwise: Option<SharedError>) -> Result<usize, SharedError> {
        self.finish_with(Err(otherwise.unwrap_or(SharedError::NotRecoverable)))
    }

    /// [`Waiting::finish`] with the answer for "no record Woken" given whole: `otherwise`, unless
    /// taking a record back failed (that error).
    pub(crate) fn finish_with(mut self, otherwise: Result<usize, SharedError>) -> Result<usize, SharedError> {
        let s = take_back(&self.table(), self.waiters().take(self.queued));
        self.queued = 0;
        match (s.best, s.failed) {
            (Some(i), _) => Ok(i),
            (None, Some(e)) => Err(e),
            (None, None) => otherwise,
        }
    }
}

impl Drop for Waiting<'_> {
    /// Whatever happened: no record left queued, every filter count dropped, the records given
    /// back (the first one stays the thread's).
    fn drop(&mut self) {
        let _ = take_back(&self.table(), self.waiters().take(self.queued));
        for &r in &self.recs {
            let _ = self.p.release_filter(r);
            if let Ok(rec) = self.p.seg.record(r) {
                rec.state.store(REC_IDLE, Ordering::Release);
            }
        }
        self.recs[1..].iter().for_each(|&r| self.p.free(r));
    }
}

/// A wake that a signal handler deferred (`reentry.rs`), made by its thread: if the word's
/// memory is no longer shared (unmapped, unregistered), there is nobody to wake.
fn run_deferred(_: *const (), key: crate::key::Key, n: usize, mask: u64) {
    if let Ok(t) = here() {
        let _ = crate::wake::wake_deferred(&t, key.word as usize, n, mask);
    }
}

/// A signal handler's wake that interrupted its thread while it opens the segment or claims
/// the process's slot (`reentry::setup`): it cannot wait for that, so the wake is left for the
/// thread, made when the set-up ends (`run_deferred`). Whether it was.
#[inline]
fn deferred_in_setup(addr: usize, n: usize, mask: u64) -> bool {
    // The thread counts busy in its set-up: the deferral of a wake that would lock.
    crate::reentry::in_setup() && Here.defer_wake(addr, n, mask)
}

/// Wake up to `n` waiters on the word at `addr` whose mask shares a bit with `mask`.
#[inline]
pub(crate) fn wake(addr: usize, n: usize, mask: u64) -> Result<usize, SharedError> {
    if deferred_in_setup(addr, n, mask) {
        return Ok(0);
    }
    Ok(crate::wake::wake(&here()?, addr, n, mask, Report::Count, Pays::Waker)?.count)
}

/// `FUTEX_WAKE_OP` on two shared words (`wake_op.rs`): `op` applied to the word at `b` with
/// both buckets locked (which is what a waiter compares under, so it sees the word before or
/// after the operation, never between); up to `nr1` waiters of `a` woken, and up to `nr2` of
/// `b` if `op` said so. While the filter says nobody waits on either word, without the locks
/// or the mapping queries that keying them takes (`wake_op::wake_op_looking`; which also
/// defers the wakes of a signal handler's call, made in a critical section or the set-up).
pub(crate) fn wake_op<E: From<SharedError>>(
    a: usize,
    b: usize,
    nr1: usize,
    nr2: usize,
    op: impl FnOnce() -> Result<bool, E>,
) -> Result<usize, E> {
    crate::wake_op::wake_op_looking(&here()?, a, b, (nr1, nr2), Pays::Waker, op).map_err(|e| match e {
        Failed::Table(e) => E::from(e),
        Failed::Op(e) => e,
    })
}

/// Wake up to `nr_wake` waiters on `from` and move up to `nr_requeue` more to `to`, if `from`
/// holds `expected` (when given): woken + moved.
pub(crate) fn requeue(
    from: WordRef,
    expected: Option<u64>,
    to: usize,
    nr_wake: usize,
    nr_requeue: usize,
) -> Result<usize, SharedError> {
    let holds = expected.map(|v| move || from.load() == v);
    if holds.as_ref().is_some_and(|h| !h()) {
        return Err(SharedError::WouldBlock); // before the segment is opened
    }
    // As a requeue deferred under a lock: the waiters it would move are woken instead.
    if deferred_in_setup(from.addr(), nr_wake.saturating_add(nr_requeue), crate::MATCH_ANY) {
        return Ok(0);
    }
    crate::requeue::requeue(&here()?, from.addr(), to, holds, nr_wake, nr_requeue, Pays::Waker).map_err(|e| match e {
        Refused::WouldBlock => SharedError::WouldBlock,
        Refused::Table(e) => e,
    })
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use crate::test_child::Child;

    /// A forked child's copy of a thread's record is its parent's: the thread's exit there gives
    /// nothing back, and does not claim a slot to find that out. The child only loads (no lock,
    /// no allocation), so a lock another test thread held at the fork cannot stop it.
    #[test]
    fn a_childs_exit_claims_no_slot() {
        let p = proc().expect("the shared table");
        let r = my_record(p).expect("a record");
        // SAFETY: the child runs only `drop` of a `Mine` (loads of `HERE`, the mark and `PROC`,
        // nothing else for a record that is not its own) and `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // As this thread's exit in the child would run it.
            drop(Mine { rec: Cell::new(Some((p, r))) });
            let code = if claimed().is_none() { 0 } else { 1 };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        assert_eq!(Child(pid).join(), 0, "the child claimed a slot on dropping its parent's record");
        assert!(claimed().is_some_and(|now| std::ptr::eq(now, p)), "the parent's slot is still its own");
    }
}
