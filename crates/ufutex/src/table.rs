//! Buckets and tables: hashing a key to a bucket, locking buckets (one or a pair), and moving
//! every queued waiter from one table to another (resize).
//!
//! A bucket's waiter count obeys one invariant that lets a waker skip the lock:
//! **count ≥ waiters queued in the bucket + waiters between their (A) increment and their
//! enqueue or exit, and count ≥ [`RETIRED`] whenever the bucket's table is not its domain's
//! current table.** A waker that reads 0 therefore knows the table was current and held no
//! waiter for the bucket at that moment. Tables are never freed while their domain lives (a
//! retired table is kept for reuse at the same size), so a thread holding a stale table pointer
//! touches valid memory, finds the count ≥ RETIRED or the bucket "not current" under its lock,
//! and retries — no reference count, hazard slot or grace period on the hot path.

use crate::key::Key;
use crate::lock::RawLock;
use crate::primitive::{AtomicU32, Ordering};
use crate::queue::{Node, Queue};
use std::cell::UnsafeCell;

/// Added to every count of a table while it is not current.
pub(crate) const RETIRED: u32 = 1 << 30;

/// One cache line: lock, waiter count, queue.
#[repr(C, align(64))]
pub(crate) struct Bucket {
    lock: RawLock,
    waiters: AtomicU32,
    queue: UnsafeCell<Queue>,
}

// SAFETY: the queue is only reached through a `BucketGuard`, i.e. with the lock held.
unsafe impl Sync for Bucket {}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64 || cfg!(ufutex_loom));

impl Bucket {
    fn new(waiters: u32) -> Bucket {
        Bucket { lock: RawLock::new(), waiters: AtomicU32::new(waiters), queue: UnsafeCell::new(Queue::new()) }
    }

    /// The waiter count; see the module invariant and the (A)/(B) protocol in `wait.rs`.
    #[inline]
    pub(crate) fn waiters(&self) -> &AtomicU32 {
        &self.waiters
    }

    #[inline]
    pub(crate) fn lock(&self) -> BucketGuard<'_> {
        self.lock.lock();
        BucketGuard { bucket: self }
    }
}

/// Proof that a bucket is locked; queue surgery takes it by `&mut`.
pub(crate) struct BucketGuard<'a> {
    bucket: &'a Bucket,
}

impl<'a> BucketGuard<'a> {
    pub(crate) fn bucket(&self) -> &'a Bucket {
        self.bucket
    }

    pub(crate) fn queue(&mut self) -> &mut Queue {
        // SAFETY: the guard holds the bucket's lock, and `&mut self` makes this the only path
        // to the queue for the borrow's duration.
        unsafe { &mut *self.bucket.queue.get() }
    }

    /// The waiter count; may change by RMW from other threads doing (A).
    pub(crate) fn waiters(&self) -> &AtomicU32 {
        &self.bucket.waiters
    }
}

impl Drop for BucketGuard<'_> {
    fn drop(&mut self) {
        self.bucket.lock.unlock();
    }
}

/// Two buckets locked in address order, or one if both keys hash to the same bucket.
pub(crate) enum PairGuard<'a> {
    One(BucketGuard<'a>),
    Two { first: BucketGuard<'a>, second: BucketGuard<'a> },
}

/// Lock `a` and `b` lowest address first (the order every path uses, so no two pairs deadlock).
/// `a`'s guard is `first` in the result regardless of the locking order.
pub(crate) fn lock_pair<'a>(a: &'a Bucket, b: &'a Bucket) -> PairGuard<'a> {
    if std::ptr::eq(a, b) {
        return PairGuard::One(a.lock());
    }
    if (a as *const Bucket) < (b as *const Bucket) {
        let first = a.lock();
        PairGuard::Two { first, second: b.lock() }
    } else {
        let second = b.lock();
        PairGuard::Two { first: a.lock(), second }
    }
}

/// A power-of-two array of buckets.
pub(crate) struct Table {
    buckets: Box<[Bucket]>,
    shift: u32,
}

impl Table {
    /// A table of `slots` buckets (a power of two ≥ 2), every count starting at `waiters`.
    pub(crate) fn new(slots: usize, waiters: u32) -> Table {
        assert!(slots.is_power_of_two() && slots >= 2, "table sizes are powers of two >= 2");
        Table { buckets: (0..slots).map(|_| Bucket::new(waiters)).collect(), shift: 64 - slots.trailing_zeros() }
    }

    pub(crate) fn slots(&self) -> usize {
        self.buckets.len()
    }

    #[inline]
    pub(crate) fn bucket(&self, key: &Key) -> &Bucket {
        &self.buckets[(key.hash() >> self.shift) as usize]
    }

    /// Bytes this table occupies.
    pub(crate) fn footprint(&self) -> usize {
        std::mem::size_of::<Table>() + std::mem::size_of_val(&*self.buckets)
    }

    /// Move every queued node of `self` (the current table) to `new` and make the caller's
    /// `publish` the switch: with every bucket of both tables locked, nodes move in FIFO order
    /// (so per-key order holds), counts move with them, `self` is marked retired and `new`
    /// un-retired, then `publish` runs, then all locks drop.
    ///
    /// `new` is either fresh (counts 0, unseen by anyone) or a retired table being reused
    /// (counts ≥ RETIRED plus stray (A) increments of threads about to notice and retry).
    /// `new_is_retired` says which.
    pub(crate) fn migrate_to(&self, new: &Table, new_is_retired: bool, publish: impl FnOnce()) {
        let mut old_guards: Vec<BucketGuard<'_>> = self.buckets.iter().map(Bucket::lock).collect();
        let mut new_guards: Vec<BucketGuard<'_>> = new.buckets.iter().map(Bucket::lock).collect();
        for og in old_guards.iter_mut() {
            let ob = og.bucket();
            let mut moved = 0u32;
            let requeue = |node: &Node, key: Key, mask: u64| {
                let ng = &mut new_guards[(key.hash() >> new.shift) as usize];
                let nb = ng.bucket();
                // Counts: new first, so a bucket never under-counts (module invariant).
                nb.waiters.fetch_add(1, Ordering::SeqCst);
                // SAFETY: `node` was just drained from a locked queue; `ng` locks `nb`.
                unsafe { ng.queue().push_back(node, key, mask, nb) };
                moved += 1;
            };
            // SAFETY: `og` holds the old bucket's lock; `requeue` re-queues every drained node
            // before any lock is released.
            unsafe { og.queue().drain(requeue) };
            // SeqCst: a waker whose (B) fence precedes this mark may have read the old count;
            // ordering the mark in S before any (A) of a waiter that then finds the new table
            // current makes that waiter see the waker's store (argued in wait.rs).
            ob.waiters.fetch_add(RETIRED.wrapping_sub(moved), Ordering::SeqCst);
        }
        if new_is_retired {
            for ng in &new_guards {
                ng.bucket().waiters.fetch_sub(RETIRED, Ordering::SeqCst);
            }
        }
        publish();
        drop(new_guards);
        drop(old_guards);
    }

    /// How many nodes are queued (for tests' "nothing left queued" checks).
    pub(crate) fn queued(&self) -> usize {
        self.buckets.iter().map(|b| b.lock().queue().len()).sum()
    }
}
