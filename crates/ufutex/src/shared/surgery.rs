//! Queue surgery on locked buckets: what the operations do between taking a bucket lock and
//! releasing it. Each step that changes a queue runs between `begin` and `end` (see
//! `queue.rs`), and each names its fault-injection point, so that a process killed anywhere in
//! here leaves records from which the next lock holder rebuilds the queue. Knows nothing of
//! processes or identities: the loom models run it on a model segment.

use super::fault::{point, Point};
use super::identity::SharedKey;
use super::lock::{Life, Owner};
use super::park::{Later, Ring};
use super::queue::Locked;
use super::segment::{KeyCell, Record, COUNTED, KEY_SLOT, NONE, REC_IDLE, REC_QUEUED};
use super::SharedError;
use crate::primitive::Ordering;

pub(crate) fn has_key(rec: &Record, k: &SharedKey) -> bool {
    let c = rec.key();
    c.class.load(Ordering::Relaxed) == k.class as u32
        && c.off.load(Ordering::Relaxed) == k.off
        && c.ino.load(Ordering::Relaxed) == k.ino
        && c.dev.load(Ordering::Relaxed) == k.dev
}

fn set_key(c: &KeyCell, k: &SharedKey) {
    c.class.store(k.class as u32, Ordering::Relaxed);
    c.dev.store(k.dev, Ordering::Relaxed);
    c.ino.store(k.ino, Ordering::Relaxed);
    c.off.store(k.off, Ordering::Relaxed);
}

/// Queue record `r` on `key` at the tail: `(park, index, gen)` are the record of the thread's
/// park word, the index a wake returns, the owner's generation.
pub(crate) fn enqueue_locked(
    g: &Locked<'_>,
    r: u32,
    key: &SharedKey,
    mask: u64,
    (park, index, gen): (u32, u32, u32),
) -> Result<(), SharedError> {
    let rec = g.h.seg().record(r)?;
    g.begin();
    set_key(&rec.keys[0], key);
    rec.mask.store(mask, Ordering::Relaxed);
    rec.park.store(park, Ordering::Relaxed);
    rec.index.store(index, Ordering::Relaxed);
    rec.gen.store(gen, Ordering::Relaxed);
    rec.ticket.store(g.ticket(), Ordering::Relaxed);
    rec.place.store(g.index, Ordering::Relaxed); // key slot 0
    rec.state.store(REC_QUEUED, Ordering::Release);
    g.push_back(r)?;
    point(Point::Enqueued);
    g.end();
    Ok(())
}

/// Take our own record `r` out of this bucket if it is still queued here: `true` if it was.
pub(crate) fn unlink_self(g: &Locked<'_>, r: u32) -> Result<bool, SharedError> {
    let rec = g.h.seg().record(r)?;
    if rec.state.load(Ordering::Relaxed) != REC_QUEUED || rec.bucket() != g.index {
        return Ok(false);
    }
    g.begin();
    g.unlink(r)?;
    point(Point::Cancelled);
    rec.state.store(REC_IDLE, Ordering::Release);
    g.end();
    Ok(true)
}

/// Visit the queue in order until `f` says stop; `f` may take the record it is given out.
/// Links found corrupt (a cycle, an index out of range) are an error, and mark the bucket for a
/// rebuild from its records by the next lock holder.
pub(crate) fn walk(
    g: &Locked<'_>,
    mut f: impl FnMut(u32, &Record) -> Result<bool, SharedError>,
) -> Result<(), SharedError> {
    let seg = g.h.seg();
    let mut r = g.head();
    let mut steps = 0u32;
    while r != NONE {
        steps += 1;
        let (Ok(rec), Ok(next), true) = (seg.record(r), g.next(r), steps <= seg.records()) else {
            g.begin(); // never ended: the next lock holder rebuilds the links
            return Err(SharedError::NotRecoverable);
        };
        if !f(r, rec)? {
            break;
        }
        r = next;
    }
    Ok(())
}

/// Dequeue `r`, mark it Woken and kick its thread, or hold the kick back for `ring` (which
/// the caller finishes before it lets the lock go), or, for a thread of our own process, leave
/// the kick to `later` (which the caller wakes after it lets the lock go: `park::Later`). `true`
/// if it counts as a wake: a thread was woken, or its process lives (it was about to sleep, or
/// spinning, or is held back or left; asked of `lives`, once per owner in the operation). A dead
/// process's waiter is not counted and its record is given up.
pub(crate) fn wake_one<'a>(
    g: &Locked<'a>,
    r: u32,
    lives: &mut Lives,
    ring: &mut Ring<'a>,
    later: &mut Later<'a>,
) -> Result<bool, SharedError> {
    let seg = g.h.seg();
    let rec = seg.record(r)?;
    let me = g.h.me();
    let ours = seg.owner_of(r) == me.slot && rec.gen.load(Ordering::Relaxed) == me.gen;
    g.begin();
    g.bucket.pending.store(r, Ordering::Relaxed);
    g.unlink(r)?;
    point(Point::Unlinked);
    rec.state.store(super::segment::REC_WOKEN, Ordering::Release);
    g.end();
    point(Point::Marked);
    let kicked = ring.kick(seg, rec, ours.then_some(later));
    // (`ring` says `ringing` before `pending` lets the record go.)
    g.bucket.pending.store(NONE, Ordering::Relaxed);
    if ring.holds() {
        point(Point::Held);
    }
    if kicked > 0 || lives.alive(g, r, rec) {
        return Ok(true);
    }
    seg.release_filter(r)?;
    rec.state.store(REC_IDLE, Ordering::Release);
    Ok(false)
}

/// Take a dead process's waiter `r` out of the queue, its record given up and its filter count
/// dropped: what a requeue does with it (it neither moves nor counts it).
pub(crate) fn drop_dead(g: &Locked<'_>, r: u32) -> Result<(), SharedError> {
    let seg = g.h.seg();
    let rec = seg.record(r)?;
    g.begin();
    g.unlink(r)?;
    rec.state.store(REC_IDLE, Ordering::Release);
    g.end();
    seg.release_filter(r)
}

/// Whether the owners of records live, asked once per owner in one operation: a look at
/// another process's liveness is a system call (`process.rs`).
#[derive(Default)]
pub(crate) struct Lives {
    /// (slot, generation, alive), the first few owners asked about.
    known: [(u32, u32, bool); 4],
    n: usize,
}

impl Lives {
    /// Whether record `r`'s owner lives.
    pub(crate) fn alive(&mut self, g: &Locked<'_>, r: u32, rec: &Record) -> bool {
        let owner = Owner { slot: g.h.seg().owner_of(r), gen: rec.gen.load(Ordering::Relaxed) };
        if let Some(&(_, _, alive)) = self.known[..self.n].iter().find(|k| (k.0, k.1) == (owner.slot, owner.gen)) {
            return alive;
        }
        let alive = g.h.life(owner) == Life::Alive;
        if self.n < self.known.len() {
            self.known[self.n] = (owner.slot, owner.gen, alive);
            self.n += 1;
        }
        alive
    }
}

/// Move `r` from `g1`'s queue to the tail of `g2`'s (which may be the same bucket), keyed
/// `key`, its filter count moved to in-page offset `off` (the new count first: a count is never
/// too low).
pub(crate) fn move_one(
    g1: &Locked<'_>,
    g2: &Locked<'_>,
    r: u32,
    key: &SharedKey,
    off: usize,
) -> Result<(), SharedError> {
    let seg = g1.h.seg();
    let rec = seg.record(r)?;
    seg.filter(off).fetch_add(1, Ordering::SeqCst); // before the old count goes
    g1.begin();
    g2.begin();
    // The new key into the slot the record does not use; then key and bucket change in one
    // store, the commit: a death before it leaves the record in `g1` under its old key (the
    // requeue did not happen), after it in `g2` under the new one (it did). Either bucket's
    // repair links it where it then is.
    let place = rec.place.load(Ordering::Relaxed);
    let other = !place & KEY_SLOT;
    set_key(&rec.keys[usize::from(other != 0)], key);
    g1.unlink(r)?;
    point(Point::Moving);
    rec.place.store(g2.index | other, Ordering::Relaxed);
    point(Point::Rekeyed);
    // (After the commit: a repair before this store orders the record in `g2` by its old
    // ticket, a FIFO place only.)
    rec.ticket.store(g2.ticket(), Ordering::Relaxed);
    g2.push_back(r)?;
    let old = rec.counted.swap(off as u32 | COUNTED, Ordering::AcqRel);
    g2.end();
    g1.end();
    if old & COUNTED != 0 {
        seg.filter((old & !COUNTED) as usize).fetch_sub(1, Ordering::Relaxed);
    }
    Ok(())
}
