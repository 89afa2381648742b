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
use super::lock::{Life, Liveness, Owner};
use super::park;
use super::process::{proc, segment, Locked, Proc};
use super::segment::{Record, COUNTED, NONE, REC_IDLE, REC_QUEUED, REC_WOKEN};
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

fn has_key(rec: &Record, k: &SharedKey) -> bool {
    rec.class.load(Ordering::Relaxed) == k.class as u32
        && rec.off.load(Ordering::Relaxed) == k.off
        && rec.ino.load(Ordering::Relaxed) == k.ino
        && rec.dev.load(Ordering::Relaxed) == k.dev
}

fn set_key(rec: &Record, k: &SharedKey) {
    rec.class.store(k.class as u32, Ordering::Relaxed);
    rec.dev.store(k.dev, Ordering::Relaxed);
    rec.ino.store(k.ino, Ordering::Relaxed);
    rec.off.store(k.off, Ordering::Relaxed);
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
    let p = proc()?;
    let first = my_record(p)?;
    let mut recs = Vec::with_capacity(entries.len());
    recs.push(first);
    for _ in 1..entries.len() {
        match p.alloc() {
            Ok(r) => recs.push(r),
            Err(e) => {
                recs[1..].iter().for_each(|&r| p.free(r));
                return Err(e);
            }
        }
    }
    let r = wait_records(p, entries, &recs, first, timeout);
    recs[1..].iter().for_each(|&r| p.free(r));
    r
}

fn wait_records(
    p: &Proc,
    entries: &[Entry],
    recs: &[u32],
    first: u32,
    timeout: Option<&Timeout>,
) -> Result<usize, SharedError> {
    let seg = p.seg;
    for (e, &r) in entries.iter().zip(recs) {
        let off = e.word.addr() & 4095;
        seg.filter(off).fetch_add(1, Ordering::SeqCst); // (A)
        seg.record(r)?.counted.store(off as u32 | COUNTED, Ordering::Relaxed);
    }
    point(Point::Counted);
    fence(Ordering::SeqCst); // (A): pairs with the waker's (B) fence
    let mut queued = 0;
    let mut outcome = Ok(());
    for (i, (e, &r)) in entries.iter().zip(recs).enumerate() {
        match enqueue(p, e, r, first, i as u32) {
            Ok(()) => queued += 1,
            Err(err) => {
                outcome = Err(err);
                break;
            }
        }
    }
    if outcome.is_ok() {
        outcome = park::park(seg, first, recs, timeout).map(|_| ());
    }
    finish(p, &recs[..queued], recs, outcome)
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
    let rec = p.seg.record(r)?;
    g.begin();
    set_key(rec, &key);
    rec.mask.store(e.mask, Ordering::Relaxed);
    rec.park.store(park, Ordering::Relaxed);
    rec.index.store(index, Ordering::Relaxed);
    rec.gen.store(p.me.gen, Ordering::Relaxed);
    rec.ticket.store(g.ticket(), Ordering::Relaxed);
    rec.bucket.store(g.index, Ordering::Relaxed);
    rec.state.store(REC_QUEUED, Ordering::Release);
    g.push_back(r)?;
    point(Point::Enqueued);
    g.end();
    Ok(())
}

/// Take every still-queued record of ours out; if wakers took any, the highest woken index,
/// else `otherwise`'s error. Every record's filter count is dropped and its state made Idle.
fn finish(p: &Proc, queued: &[u32], all: &[u32], otherwise: Result<(), SharedError>) -> Result<usize, SharedError> {
    let mut best = None;
    let mut failed = None;
    for &r in queued {
        match dequeue_self(p, r) {
            Ok(true) => best = Some(p.seg.record(r)?.index.load(Ordering::Relaxed) as usize),
            Ok(false) => {}
            Err(e) => failed = Some(e),
        }
    }
    for &r in all {
        p.release_filter(r)?;
        p.seg.record(r)?.state.store(REC_IDLE, Ordering::Release);
    }
    match (best, failed, otherwise) {
        (Some(i), _, _) => Ok(i),
        (None, Some(e), _) => Err(e),
        (None, None, Err(e)) => Err(e),
        (None, None, Ok(())) => Err(SharedError::NotRecoverable),
    }
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
        if rec.state.load(Ordering::Relaxed) == REC_QUEUED {
            g.begin();
            g.unlink(r)?;
            point(Point::Cancelled);
            rec.state.store(REC_IDLE, Ordering::Release);
            g.end();
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

/// Visit the queue in order until `f` says stop; `f` may take the record it is given out.
fn walk(g: &Locked<'_>, mut f: impl FnMut(u32, &Record) -> Result<bool, SharedError>) -> Result<(), SharedError> {
    let mut r = g.head();
    let mut steps = 0u32;
    while r != NONE {
        steps += 1;
        if steps > g.p.seg.records() {
            return Err(SharedError::NotRecoverable); // a cycle: corrupt links
        }
        let rec = g.p.seg.record(r)?;
        let next = g.next(r)?;
        if !f(r, rec)? {
            break;
        }
        r = next;
    }
    Ok(())
}

/// Dequeue `r`, mark it Woken and kick its thread. `true` if it counts as a wake: a thread was
/// woken, or its process lives (it was about to sleep, or spinning). A dead process's waiter is
/// not counted and its record is given up.
fn wake_one(g: &Locked<'_>, r: u32) -> Result<bool, SharedError> {
    let seg = g.p.seg;
    let rec = seg.record(r)?;
    g.begin();
    g.bucket.pending.store(r, Ordering::Relaxed);
    g.unlink(r)?;
    point(Point::Unlinked);
    rec.state.store(REC_WOKEN, Ordering::Release);
    g.end();
    point(Point::Marked);
    let kicked = park::kick(seg, rec);
    g.bucket.pending.store(NONE, Ordering::Relaxed);
    if kicked > 0 {
        return Ok(true);
    }
    let owner = Owner { slot: seg.owner_of(r), gen: rec.gen.load(Ordering::Relaxed) };
    if g.p.life(owner) == Life::Alive {
        return Ok(true);
    }
    g.p.release_filter(r)?;
    rec.state.store(REC_IDLE, Ordering::Release);
    Ok(false)
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
        let rec = seg.record(r)?;
        moved += 1;
        if k1 == k2 {
            continue; // the kernel counts a requeue onto the same futex, and moves nothing
        }
        let off = to & 4095;
        seg.filter(off).fetch_add(1, Ordering::SeqCst); // before the old count goes
        g1.begin();
        g2.begin();
        g1.unlink(r)?;
        point(Point::Moving);
        set_key(rec, &k2);
        rec.ticket.store(g2.ticket(), Ordering::Relaxed);
        rec.bucket.store(g2.index, Ordering::Relaxed);
        g2.push_back(r)?;
        let old = rec.counted.swap(off as u32 | COUNTED, Ordering::AcqRel);
        g2.end();
        g1.end();
        if old & COUNTED != 0 {
            seg.filter((old & !COUNTED) as usize).fetch_sub(1, Ordering::Relaxed);
        }
    }
    Ok(woken + moved)
}
