//! The shared table as a [`WaitTable`] (`engine.rs`): buckets and records in the segment,
//! queues linked by record index (`queue.rs`), the robust bucket lock (`lock.rs`), a thread's
//! park word in its first record (`park.rs`). (A)/(B) is the filter: one count per in-page
//! offset, the same in every mapping (the protocol comment of `ops.rs`). A key is the word's
//! address; the bucket and the identity waiters match on are asked afresh by every operation
//! that locks ([`Operator::key_of`]). A segment found corrupt is an error.
//!
//! Who operates is a parameter ([`Operator`]): this process (`ops.rs`: its slot claimed on
//! first need, identities asked of the kernel), or a model process of the loom models
//! (`loom_tests.rs`), which so check the engine's own operations on the shared table.

use super::fault::{point, Point};
use super::identity::SharedKey;
use super::park::{Later, Ring};
use super::queue::{lock_bucket, Host, Locked as Guard};
use super::segment::{Segment, COUNTED, REC_QUEUED, REC_WOKEN};
use super::surgery::{drop_dead, enqueue_locked, has_key, move_one, unlink_self, wake_one, walk, Lives};
use super::SharedError;
use crate::engine::{Fate, Locked, Look, Pair, Pick, Placed, WaitTable, Want, Woken};
use crate::membarrier::Pays;
use crate::primitive::{fence, Ordering};

/// Who operates on the shared table.
pub(crate) trait Operator {
    /// The process, taking its part in the table the first time (a slot of its own).
    fn host(&self) -> Result<&dyn Host, SharedError>;
    /// The identity of the word at `addr` now.
    fn key_of(&self, h: &dyn Host, addr: usize) -> Result<SharedKey, SharedError>;
    /// The identities of a requeue's two words now, `a`'s asked first. Two questions by
    /// default; an operator may answer both from the one mapping that covers them.
    fn key_pair(&self, h: &dyn Host, a: usize, b: usize) -> Result<(SharedKey, SharedKey), SharedError> {
        Ok((self.key_of(h, a)?, self.key_of(h, b)?))
    }
    /// [`WaitTable::defer_wake`] for the word at `addr`: an operator whose words can be found
    /// again by address alone may defer. No by default.
    fn defer_wake(&self, addr: usize, n: usize, mask: u64) -> bool {
        let _ = (addr, n, mask);
        false
    }
}

/// The shared table, for one operation by `op`.
pub(crate) struct SharedTable<'s, O: Operator> {
    pub(crate) seg: &'s Segment,
    pub(crate) op: O,
}

/// A shared waiter: its record, the record whose park word its thread sleeps on, and the index
/// a wake of it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rec {
    pub(crate) r: u32,
    pub(crate) park: u32,
    pub(crate) index: u32,
}

/// A locked shared bucket, with the identity an operation takes waiters of (`key`) and the one
/// and in-page offset it gives moved waiters (`target`).
pub(crate) struct SharedLocked<'t> {
    g: Guard<'t>,
    key: SharedKey,
    target: (SharedKey, usize),
}

/// Wakes a shared waker made: `n` counted. Another process's threads are kicked under the
/// bucket lock, as a crash can be recovered from there (`queue.rs`: a pending wake is kicked by
/// whoever takes the lock over); our own process's are kicked after the unlock (`later`:
/// `park::Later`, which says why no crash strands them).
pub(crate) struct Kicked<'t> {
    n: usize,
    later: Later<'t>,
}

impl Woken for Kicked<'_> {
    fn new() -> Self {
        Kicked { n: 0, later: Later::new() }
    }
    fn len(&self) -> usize {
        self.n
    }
    fn wake_all(self) -> usize {
        self.later.wake();
        self.n
    }
}

impl<'t> Locked for SharedLocked<'t> {
    type Error = SharedError;
    type Woken = Kicked<'t>;
    type Moved = Vec<u32>;

    fn take(&mut self, pick: &mut impl Pick, woken: &mut Kicked<'t>, moved: &mut Vec<u32>) -> Result<(), SharedError> {
        let g = &self.g;
        let mut lives = Lives::default();
        let mut ring = Ring::new(g.bucket, g.index);
        let walked = walk(g, |r, rec| {
            let fate = pick.pick(has_key(rec, &self.key), rec.mask.load(Ordering::Relaxed));
            match fate {
                Fate::Stop => return Ok(false),
                Fate::Skip => {}
                Fate::Stay if lives.alive(g, r, rec) => {}
                Fate::Wake if wake_one(g, r, &mut lives, &mut ring, &mut woken.later)? => woken.n += 1,
                Fate::Move if lives.alive(g, r, rec) => {
                    moved.try_reserve(1).map_err(|_| SharedError::NoMemory)?;
                    moved.push(r);
                }
                // A dead process's waiter, which a wake does not count either.
                Fate::Move | Fate::Stay => {
                    drop_dead(g, r)?;
                    pick.not_taken(fate);
                }
                Fate::Wake => pick.not_taken(fate),
            }
            Ok(true)
        });
        ring.finish();
        walked
    }

    fn accept(&mut self, moved: Vec<u32>, from: Option<&mut Self>) -> Result<(), SharedError> {
        let (key, off) = self.target;
        let src = from.map_or(&self.g, |f| &f.g);
        for r in moved {
            move_one(src, &self.g, r, &key, off)?;
        }
        Ok(())
    }

    fn retarget(&mut self) {
        self.key = self.target.0;
    }

    fn decay(&mut self) {}
}

/// The locked bucket of `key` as `h`, taking waiters of `key` and giving moved ones `target`.
fn locked(h: &dyn Host, key: SharedKey, target: (SharedKey, usize)) -> Result<SharedLocked<'_>, SharedError> {
    let g = lock_bucket(h, key.bucket(h.seg().layout.buckets))?;
    Ok(SharedLocked { g, key, target })
}

impl<O: Operator> WaitTable for SharedTable<'_, O> {
    type Key = usize;
    type Waiter<'w> = Rec;
    type Announced<'t>
        = ()
    where
        Self: 't;
    type Locked<'t>
        = SharedLocked<'t>
    where
        Self: 't;
    type Error = SharedError;

    type At = ();

    /// (B): a fence, whoever pays (the waiters always fence too), then the filter.
    #[inline]
    fn look(&self, addr: &usize, _pays: Pays) -> Look<()> {
        fence(Ordering::SeqCst); // (B): pairs with the waiter's (A) fence
        if self.seg.filter(*addr).load(Ordering::Relaxed) == 0 {
            return Look::Nobody;
        }
        Look::Lock { decay: false, at: () }
    }

    #[inline]
    fn defer_wake(&self, addr: &usize, n: usize, mask: u64) -> bool {
        self.op.defer_wake(*addr, n, mask)
    }

    fn lock(&self, addr: &usize) -> Result<SharedLocked<'_>, SharedError> {
        let h = self.op.host()?;
        let key = self.op.key_of(h, *addr)?;
        locked(h, key, (key, addr & 4095))
    }

    fn lock_pair(&self, from: &usize, to: &usize) -> Result<Pair<SharedLocked<'_>>, SharedError> {
        let h = self.op.host()?;
        let (k1, k2) = self.op.key_pair(h, *from, *to)?;
        let target = (k2, to & 4095);
        let buckets = h.seg().layout.buckets;
        let (b1, b2) = (k1.bucket(buckets), k2.bucket(buckets));
        if b1 == b2 {
            return Ok(Pair::One(locked(h, k1, target)?));
        }
        // Two buckets in index order (every process takes pairs this way): no deadlock.
        let (first, second) = if b1 < b2 { (k1, k2) } else { (k2, k1) };
        let low = locked(h, first, target)?;
        let high = locked(h, second, target)?;
        Ok(if b1 < b2 { Pair::Two { from: low, to: high } } else { Pair::Two { from: high, to: low } })
    }

    /// (A), first half: the entry's count in the filter, held by its record.
    fn announce(&self, w: &Want<'_, Self>) -> Result<(), SharedError> {
        let off = w.word.addr() & 4095;
        let rec = self.seg.record(w.waiter.r)?;
        self.seg.filter(off).fetch_add(1, Ordering::SeqCst); // (A)
        rec.counted.store(off as u32 | COUNTED, Ordering::Relaxed);
        Ok(())
    }

    fn order(&self, _pays: Pays) {
        point(Point::Counted);
        fence(Ordering::SeqCst); // (A): pairs with the waker's (B) fence
    }

    fn order_one(&self, _: (), _: &Want<'_, Self>, pays: Pays) -> bool {
        self.order(pays);
        true
    }

    /// Queue the record if the word still holds the expected value (compared under the bucket
    /// lock, after the (A) fence).
    fn place(&self, _: (), w: &Want<'_, Self>) -> Result<Placed, SharedError> {
        let h = self.op.host()?;
        let key = self.op.key_of(h, w.word.addr())?;
        let g = lock_bucket(h, key.bucket(h.seg().layout.buckets))?;
        point(Point::Locked);
        if w.word.load() != w.expected {
            // (A): this load follows the (A) fence, which pairs with the waker's (B) fence.
            drop(g);
            self.withdraw((), w);
            return Ok(Placed::Changed);
        }
        let Rec { r, park, index } = w.waiter;
        enqueue_locked(&g, r, &key, w.mask, (park, index, h.me().gen))?;
        Ok(Placed::Queued)
    }

    fn withdraw(&self, _: (), w: &Want<'_, Self>) {
        // A record whose count cannot be dropped leaves it too high: a wake's fast path lost,
        // never a wakeup.
        let _ = self.seg.release_filter(w.waiter.r);
    }

    fn dequeue_self(&self, w: Rec) -> Result<bool, SharedError> {
        let h = self.op.host()?;
        let rec = h.seg().record(w.r)?;
        loop {
            match rec.state.load(Ordering::Acquire) {
                REC_WOKEN => return Ok(true),
                REC_QUEUED => {}
                _ => return Ok(false),
            }
            let b = rec.bucket();
            let g = lock_bucket(h, b)?;
            if rec.bucket() != b {
                continue; // moved by a requeue after we read it
            }
            if unlink_self(&g, w.r)? {
                return Ok(false);
            }
        }
    }

    fn index(w: Rec, _: usize) -> usize {
        w.index as usize
    }
}
