//! The operations on ufutex's own shared table: wait (any of many words), wake, requeue.
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
//!   (A) filter[off] += 1; fence(SeqCst)       *word = new                (caller's store)
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
//! cached: each operation that queues or dequeues asks afresh.
//!
//! A record holds one filter count, on the offset in `counted`; the waiter (or whoever reaps
//! it) drops it exactly once, after the record left its queue; a requeue adds the new offset's
//! count before it drops the old one. A process that dies leaves counts too high, never too
//! low: that costs a wake its fast path, never a wakeup.

use super::fault::{point, Point};
use super::identity::{self, SharedKey};
use super::park;
use super::process::{proc, segment, Proc};
use super::segment::{COUNTED, REC_IDLE, REC_QUEUED, REC_WOKEN};
use super::surgery::{enqueue_locked, has_key, move_one, unlink_self, wake_one, walk};
use super::SharedError;
use crate::deadline::Timeout;
use crate::word::WordRef;
use std::cell::Cell;
use std::sync::atomic::{fence, Ordering};

/// One word of a shared wait: the word, the value it must hold, the wake mask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) word: WordRef,
    pub(crate) expected: u64,
    pub(crate) mask: u64,
}

/// The key of the word at `addr`, asked of the kernel now.
fn key_of(p: &Proc, addr: usize) -> Result<SharedKey, SharedError> {
    let vma = identity::query(p.maps_fd, addr)?;
    identity::classify(addr, &vma, (p.me.slot, p.me.gen))
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
            // Only to the process that gave it (a forked child's copy belongs to its parent).
            if proc().is_ok_and(|now| std::ptr::eq(now, p)) {
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
/// entry (the highest, if several were), or why not.
pub(crate) fn wait(entries: &[Entry], timeout: Option<&Timeout>) -> Result<usize, SharedError> {
    // Early exit without the table: linearisable at the load that saw the mismatch.
    if entries.iter().any(|e| e.word.load() != e.expected) {
        return Err(SharedError::WouldBlock);
    }
    let mut w = Waiting::new(entries)?;
    w.count()?;
    let mut outcome = w.queue();
    if outcome.is_ok() {
        outcome = park::park(w.p.seg, w.first, &w.recs, timeout).map(|_| ());
    }
    w.finish(outcome.err())
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

    /// (A): count every entry in the filter, then one fence.
    pub(crate) fn count(&mut self) -> Result<(), SharedError> {
        let seg = self.p.seg;
        for (e, &r) in self.entries.iter().zip(&self.recs) {
            let off = e.word.addr() & 4095;
            seg.filter(off).fetch_add(1, Ordering::SeqCst); // (A)
            seg.record(r)?.counted.store(off as u32 | COUNTED, Ordering::Relaxed);
        }
        point(Point::Counted);
        fence(Ordering::SeqCst); // (A): pairs with the waker's (B) fence
        Ok(())
    }

    /// Queue every entry whose word still holds its value; stop at the first that does not
    /// (`WouldBlock`) or at an error.
    pub(crate) fn queue(&mut self) -> Result<(), SharedError> {
        for (i, (e, &r)) in self.entries.iter().zip(&self.recs).enumerate() {
            let index = self.indices.map_or(i, |ix| ix[i]);
            enqueue(self.p, e, r, self.first, index as u32)?;
            self.queued += 1;
        }
        Ok(())
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
    /// count is dropped and its state made Idle.
    pub(crate) fn finish(mut self, otherwise: Option<SharedError>) -> Result<usize, SharedError> {
        let mut best = None;
        let mut failed = None;
        for &r in &self.recs[..self.queued] {
            match dequeue_self(self.p, r) {
                Ok(true) => {
                    let i = self.p.seg.record(r)?.index.load(Ordering::Relaxed) as usize;
                    // Ours, written at queueing; read back from the segment, so checked.
                    let expected = self.indices.map_or(self.recs.len(), |ix| ix.iter().max().map_or(0, |m| m + 1));
                    if i >= expected {
                        failed = Some(SharedError::NotRecoverable);
                        continue;
                    }
                    best = best.max(Some(i));
                }
                Ok(false) => {}
                Err(e) => failed = Some(e),
            }
        }
        self.queued = 0;
        match (best, failed.or(otherwise)) {
            (Some(i), _) => Ok(i),
            (None, Some(e)) => Err(e),
            (None, None) => Err(SharedError::NotRecoverable),
        }
    }
}

impl Drop for Waiting<'_> {
    /// Whatever happened: no record left queued, every filter count dropped, the records given
    /// back (the first one stays the thread's).
    fn drop(&mut self) {
        for &r in &self.recs[..self.queued] {
            let _ = dequeue_self(self.p, r);
        }
        for &r in &self.recs {
            let _ = self.p.release_filter(r);
            if let Ok(rec) = self.p.seg.record(r) {
                rec.state.store(REC_IDLE, Ordering::Release);
            }
        }
        self.recs[1..].iter().for_each(|&r| self.p.free(r));
    }
}

/// Queue record `r` for `e` if the word still holds the expected value.
fn enqueue(p: &Proc, e: &Entry, r: u32, park: u32, index: u32) -> Result<(), SharedError> {
    let key = key_of(p, e.word.addr())?;
    let g = p.lock_bucket(key.bucket(p.seg.layout.buckets))?;
    point(Point::Locked);
    if e.word.load() != e.expected {
        // (A): this load follows the (A) fence, which pairs with the waker's (B) fence.
        return Err(SharedError::WouldBlock);
    }
    enqueue_locked(&g, r, &key, e.mask, (park, index, p.me.gen))
}

/// Take our own record `r` out of whatever bucket it is in now: `true` if a waker had already
/// taken it (Woken).
fn dequeue_self(p: &Proc, r: u32) -> Result<bool, SharedError> {
    let rec = p.seg.record(r)?;
    loop {
        match rec.state.load(Ordering::Acquire) {
            REC_WOKEN => return Ok(true),
            REC_QUEUED => {}
            _ => return Ok(false),
        }
        let b = rec.bucket.load(Ordering::Relaxed);
        let g = p.lock_bucket(b)?;
        if rec.bucket.load(Ordering::Relaxed) != b {
            continue; // moved by a requeue after we read it
        }
        if unlink_self(&g, r)? {
            return Ok(false);
        }
    }
}

/// Wake up to `n` waiters on the word at `addr` whose mask shares a bit with `mask`.
#[inline]
pub(crate) fn wake(addr: usize, n: usize, mask: u64) -> Result<usize, SharedError> {
    let seg = segment()?;
    fence(Ordering::SeqCst); // (B): pairs with the waiter's (A) fence
    if seg.filter(addr).load(Ordering::Relaxed) == 0 {
        return Ok(0);
    }
    wake_slow(addr, n, mask)
}

#[inline(never)]
fn wake_slow(addr: usize, n: usize, mask: u64) -> Result<usize, SharedError> {
    let p = proc()?;
    let key = key_of(p, addr)?;
    let g = p.lock_bucket(key.bucket(p.seg.layout.buckets))?;
    let mut woken = 0;
    walk(&g, |r, rec| {
        if woken < n && has_key(rec, &key) && rec.mask.load(Ordering::Relaxed) & mask != 0 && wake_one(&g, r)? {
            woken += 1;
        }
        Ok(woken < n)
    })?;
    Ok(woken)
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
    if expected.is_some_and(|v| from.load() != v) {
        return Err(SharedError::WouldBlock);
    }
    let seg = segment()?;
    fence(Ordering::SeqCst); // (B)
    if seg.filter(from.addr()).load(Ordering::Relaxed) == 0 {
        return Ok(0);
    }
    let p = proc()?;
    let (k1, k2) = (key_of(p, from.addr())?, key_of(p, to)?);
    let (b1, b2) = (k1.bucket(seg.layout.buckets), k2.bucket(seg.layout.buckets));
    // Two buckets in index order (every process takes pairs this way): no deadlock.
    let (first, second) = (p.lock_bucket(b1.min(b2))?, if b1 != b2 { Some(p.lock_bucket(b1.max(b2))?) } else { None });
    let (g1, g2) = match &second {
        None => (&first, &first),
        Some(s) if b1 < b2 => (&first, s),
        Some(s) => (s, &first),
    };
    if expected.is_some_and(|v| from.load() != v) {
        return Err(SharedError::WouldBlock);
    }
    let (mut woken, mut moved) = (0, 0);
    let mut to_move = Vec::new();
    walk(g1, |r, rec| {
        if !has_key(rec, &k1) {
            return Ok(true);
        }
        if woken < nr_wake {
            if wake_one(g1, r)? {
                woken += 1;
            }
        } else if to_move.len() < nr_requeue {
            to_move.push(r);
        }
        Ok(woken < nr_wake || to_move.len() < nr_requeue)
    })?;
    for r in to_move {
        moved += 1;
        if k1 == k2 {
            continue; // the kernel counts a requeue onto the same futex, and moves nothing
        }
        move_one(g1, g2, r, &k2, to & 4095)?;
    }
    Ok(woken + moved)
}
