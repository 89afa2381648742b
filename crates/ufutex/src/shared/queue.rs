//! A shared bucket's queue: a doubly linked FIFO of record indices, changed only under the
//! bucket lock and only between [`Locked::begin`] and [`Locked::end`].
//!
//! Crash consistency: the truth is in the records — a record is in bucket `b`'s queue exactly
//! when its `state` is Queued and its `bucket` is `b`, in `ticket` order. The links are derived
//! from that. A process that dies between `begin` and `end` leaves `dirty` set, and whoever takes
//! the lock next rebuilds the links from the records ([`Locked::recover`]); each record field is
//! one aligned store, and x86's stores reach memory in program order, so the records are
//! consistent at any instruction. (A record's key and bucket change together in a requeue: one
//! store of `Record::place` names both.) A waker marks a record Woken and then kicks its thread
//! (`pending` names it in between), or holds the kick back for the bucket's bell (`ringing`
//! says so until it rings: `park::Ring`); if it dies there, the recoverer kicks it, or rings.

use super::lock::{self, Liveness, Owner, Taken};
use super::segment::{Bucket, Record, Segment, COUNTED, NONE, REC_QUEUED};
use super::SharedError;
use crate::primitive::Ordering;

/// Whoever operates on the shared table: this process (`process.rs`), or a model thread
/// standing for one (the loom models).
pub(crate) trait Host: Liveness {
    fn seg(&self) -> &Segment;
    /// Who we are, as a lock owner.
    fn me(&self) -> Owner;
}

/// A locked bucket. Changes to its queue or to its records' queue fields happen between
/// [`Locked::begin`] and [`Locked::end`], so that a lock taken over from a dead owner knows to
/// rebuild the queue from the records.
pub(crate) struct Locked<'a> {
    pub(crate) h: &'a dyn Host,
    pub(crate) bucket: &'a Bucket,
    pub(crate) index: u32,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if !super::fault::dying() {
            lock::unlock(&self.bucket.lock);
        }
    }
}

/// Lock bucket `b` as `h`, repairing it first if its last owner died in it (or left it half
/// changed after finding corruption).
pub(crate) fn lock_bucket(h: &dyn Host, b: u32) -> Result<Locked<'_>, SharedError> {
    let bucket = h.seg().bucket(b)?;
    let taken = lock::lock(&bucket.lock, h.me(), h)?;
    let g = Locked { h, bucket, index: b };
    if taken == Taken::FromDead
        || bucket.dirty.load(Ordering::Relaxed) != 0
        || bucket.pending.load(Ordering::Relaxed) != NONE
        || bucket.ringing.load(Ordering::Relaxed) != 0
    {
        g.recover()?;
    }
    Ok(g)
}

impl Segment {
    /// Drop the filter count record `r` holds, if any (exactly once: a swap).
    pub(crate) fn release_filter(&self, r: u32) -> Result<(), SharedError> {
        let c = self.record(r)?.counted.swap(0, Ordering::AcqRel);
        if c & COUNTED != 0 {
            // Relaxed: a count only ever over-estimates (the waiter's side increments before it
            // checks the value, and this runs after the record left its queue).
            self.filter((c & !COUNTED) as usize).fetch_sub(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Locked<'_> {
    /// About to change the queue or a record's queue fields.
    pub(crate) fn begin(&self) {
        // SeqCst: before the changes in the order other processes (and a recoverer) see.
        self.bucket.dirty.store(1, Ordering::SeqCst);
    }

    /// The queue and its records agree again.
    pub(crate) fn end(&self) {
        self.bucket.dirty.store(0, Ordering::Release);
    }

    fn rec(&self, r: u32) -> Result<&Record, SharedError> {
        self.h.seg().record(r)
    }

    /// The first record of the queue, or [`NONE`].
    pub(crate) fn head(&self) -> u32 {
        self.bucket.head.load(Ordering::Relaxed)
    }

    /// The record after `r` in the queue, or [`NONE`].
    pub(crate) fn next(&self, r: u32) -> Result<u32, SharedError> {
        Ok(self.rec(r)?.next.load(Ordering::Relaxed))
    }

    /// Append `r` (its fields set, state Queued in this bucket).
    pub(crate) fn push_back(&self, r: u32) -> Result<(), SharedError> {
        let tail = self.bucket.tail.load(Ordering::Relaxed);
        let rec = self.rec(r)?;
        rec.prev.store(tail, Ordering::Relaxed);
        rec.next.store(NONE, Ordering::Relaxed);
        if tail == NONE {
            self.bucket.head.store(r, Ordering::Relaxed);
        } else {
            self.rec(tail)?.next.store(r, Ordering::Relaxed);
        }
        self.bucket.tail.store(r, Ordering::Relaxed);
        Ok(())
    }

    /// Take `r` out of the queue.
    pub(crate) fn unlink(&self, r: u32) -> Result<(), SharedError> {
        let rec = self.rec(r)?;
        let (prev, next) = (rec.prev.load(Ordering::Relaxed), rec.next.load(Ordering::Relaxed));
        match prev {
            NONE => self.bucket.head.store(next, Ordering::Relaxed),
            p => self.rec(p)?.next.store(next, Ordering::Relaxed),
        }
        match next {
            NONE => self.bucket.tail.store(prev, Ordering::Relaxed),
            n => self.rec(n)?.prev.store(prev, Ordering::Relaxed),
        }
        rec.prev.store(NONE, Ordering::Relaxed);
        rec.next.store(NONE, Ordering::Relaxed);
        Ok(())
    }

    /// The next FIFO ticket of this bucket.
    pub(crate) fn ticket(&self) -> u64 {
        self.bucket.ticket.fetch_add(1, Ordering::Relaxed)
    }

    /// Repair the bucket after a dead (or failed) owner: kick a pending wake, ring a bell
    /// owed, rebuild the links from the records if they may disagree.
    #[cold]
    pub(crate) fn recover(&self) -> Result<(), SharedError> {
        let pending = self.bucket.pending.load(Ordering::Relaxed);
        if pending != NONE {
            if let Ok(rec) = self.rec(pending) {
                super::park::kick(self.h.seg(), rec);
            }
            self.bucket.pending.store(NONE, Ordering::Relaxed);
        }
        let ringing = self.bucket.ringing.load(Ordering::Relaxed);
        if ringing != 0 {
            super::park::ringing_owed(self.h.seg(), self.bucket, ringing);
            self.bucket.ringing.store(0, Ordering::Relaxed);
        }
        if self.bucket.dirty.load(Ordering::Acquire) != 0 {
            self.rebuild()?;
            self.end();
        }
        Ok(())
    }

    /// Relink the queue from the records: every record Queued in this bucket, in ticket order.
    /// Scans each slot's used records only.
    fn rebuild(&self) -> Result<(), SharedError> {
        let seg = self.h.seg();
        let mut queued = Vec::new();
        for s in 0..seg.layout.procs {
            let used = seg.slot(s)?.used.load(Ordering::Relaxed).min(seg.layout.records);
            let base = s * seg.layout.records;
            for r in base..base + used {
                let rec = seg.record(r)?;
                if rec.state.load(Ordering::Acquire) == REC_QUEUED && rec.bucket() == self.index {
                    queued.push((rec.ticket.load(Ordering::Relaxed), r));
                }
            }
        }
        queued.sort_unstable();
        self.bucket.head.store(NONE, Ordering::Relaxed);
        self.bucket.tail.store(NONE, Ordering::Relaxed);
        let next_ticket = queued.last().map_or(0, |&(t, _)| t + 1);
        for (_, r) in queued {
            self.push_back(r)?;
        }
        self.bucket.ticket.fetch_max(next_ticket, Ordering::Relaxed);
        Ok(())
    }
}
