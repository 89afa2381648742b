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
//!
//! A domain has one *slot* per table it keeps current: its plain table, and with NUMA one per
//! node. Every table records its node ([`NO_NODE`] for the plain one) so that "is this table
//! current?" asks the right slot. Tables of different slots are independent: each is resized
//! on its own (by the one resizer of the domain, which holds the domain's state lock), and a
//! retired table is reused only for its own slot.
//!
//! # Lock order across tables (requeue between nodes)
//!
//! A requeue may lock one bucket in each of two tables. Locks are taken lowest *rank* first —
//! a bucket's rank is (its table's id, its address): table ids grow in creation order, and
//! within a table rank follows the bucket index — and after taking the *first* lock the
//! requeuer checks that the first bucket's table is still current, releasing it and retrying if
//! not ([`lock_pair_current`]). (Ranking by table id rather than by address alone makes the
//! order the same in every run, whatever the allocator does: loom needs that.) A resizer locks
//! every bucket of the current table `T` in index order (phase 1), then every bucket of the
//! table `T'` it migrates into (phase 2, which may rank below `T`). Why no cycle can form
//! (bucket ops other than requeue and resize hold one lock at a time, so they wait for nobody
//! while holding one; at most one resizer runs per domain; requeues never span domains):
//! - a requeuer waiting holds exactly one lock `l`, whose table was current when it checked,
//!   and waits for a lock above `l`: a chain of waiting requeuers climbs in rank and can
//!   only close into a cycle through the resizer `S`;
//! - `S` in phase 1 waits for a bucket `l0` of `T` held by a requeuer, and holds only buckets
//!   of `T` below `l0`: the chain starting at `l0` climbs above `l0` and never reaches them;
//! - `S` in phase 2 waits for a bucket `l0` of `T'`. A requeuer holding `l0` and waiting has
//!   found `T'` current under `l0`'s lock, and `T'` stays current while it holds `l0` (retiring
//!   a table takes all of its locks). But `S` migrates from the current table `T` of the same
//!   slot, and a slot has one current table: contradiction. A requeuer holding `l0` with `T'`
//!   not current drops it at its check instead of waiting.
//!
//! Without the first-lock check, a stale requeuer could hold a bucket of a retired `T'` that
//! `S` is about to reuse, wait for a bucket above it held by a requeuer waiting on `T` — held
//! by `S` — and `S` would wait for `T'`: a cycle when `T'` ranks below `T`.

use crate::key::{Key, NO_NODE};
use crate::lock::RawLock;
use crate::parker::Bell;
use crate::primitive::{AtomicU32, Ordering};
use crate::queue::{Detached, Home, Queue};
use std::cell::UnsafeCell;
use std::ptr::NonNull;

/// Added to every count of a table while it is not current.
pub(crate) const RETIRED: u32 = 1 << 30;

/// One cache line: lock, waiter count, queue, bell.
#[repr(C, align(64))]
pub(crate) struct Bucket {
    lock: RawLock,
    waiters: AtomicU32,
    queue: UnsafeCell<Queue<Bucket>>,
    bell: Bell,
    /// Who pays for the (A)/(B) order here when its words' waiters and wakers let the bucket
    /// choose (`Pays::Waiter`): `membarrier::Fence` (see there). Changed under the lock.
    fence: crate::membarrier::Fence,
}

// SAFETY: the queue is only reached through a `BucketGuard`, i.e. with the lock held.
unsafe impl Sync for Bucket {}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64 || cfg!(ufutex_loom));

/// A waiter node, queued in a bucket.
pub(crate) type Node = crate::queue::Node<Bucket>;
/// Nodes a waker took from a bucket, to unpark after unlocking.
pub(crate) type WakeList = crate::queue::WakeList<Bucket>;
/// Nodes a requeue took from a bucket, to append to another.
pub(crate) type MoveList = crate::queue::MoveList<Bucket>;

impl Home for Bucket {
    fn bell(&self) -> &Bell {
        &self.bell
    }
}

impl Bucket {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new(waiters: u32) -> Bucket {
            Bucket {
                lock: RawLock::new(),
                waiters: AtomicU32::new(waiters),
                queue: UnsafeCell::new(Queue::new()),
                bell: Bell::new(),
                fence: crate::membarrier::Fence::new(),
            }
        }
    }

    /// The waiter count; see the module invariant and the (A)/(B) protocol in `wait.rs`.
    #[inline]
    pub(crate) fn waiters(&self) -> &AtomicU32 {
        &self.waiters
    }

    /// Who pays for the (A)/(B) order here (`membarrier.rs`).
    #[inline]
    pub(crate) fn fence(&self) -> &crate::membarrier::Fence {
        &self.fence
    }

    /// In a forked child (`fork.rs`), whose one thread is in no call of ours: no waiter is
    /// queued (every one was a parent's thread that the child does not have), the count is
    /// its table's base (`RETIRED` if the table is not current, else 0: `base`, or if `None`
    /// the base the count shows), and the lock is free, whatever a parent's thread was doing
    /// here at the fork. The queue's groups and nodes stay where they are, unreferenced. What
    /// is already as new is not written (`primitive::reset_in_child`): most buckets of most
    /// tables are idle.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    fn forget(&self, base: Option<u32>) {
        // SAFETY: the child has one thread, which holds no bucket lock and is in no queue
        // operation: nothing else reaches the queue. A queue that is not empty is
        // overwritten, not dropped (it owns nothing), and never read again.
        unsafe {
            if !(*self.queue.get()).is_empty() {
                self.queue.get().write(Queue::new());
            }
        }
        // Relaxed: one thread. Unless a migration was left unfinished at the fork (whose
        // tables the caller names a base for: `gate.rs`), the count is its base plus in-flight
        // increments.
        let base = base.unwrap_or_else(|| self.waiters.load(Ordering::Relaxed) & RETIRED);
        crate::primitive::reset_in_child(&self.waiters, base);
        self.bell.forget();
        self.fence.forget();
        self.lock.forget();
    }

    /// Lock the bucket. The thread counts itself busy first, until the guard's drop
    /// (`reentry.rs`: a signal handler's call then does not take a lock).
    #[inline]
    pub(crate) fn lock(&self) -> BucketGuard<'_> {
        crate::reentry::locking();
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

    pub(crate) fn queue(&mut self) -> &mut Queue<Bucket> {
        // SAFETY: the guard holds the bucket's lock, and `&mut self` makes this the only path
        // to the queue for the borrow's duration.
        unsafe { &mut *self.bucket.queue.get() }
    }

    /// The waiter count; may change by RMW from other threads doing (A).
    pub(crate) fn waiters(&self) -> &AtomicU32 {
        &self.bucket.waiters
    }

    /// Unlock two different buckets: as dropping `a`, then `b`, with the two locks released
    /// together (`RawLock::unlock_two`), and the thread's count of held locks taken down by two
    /// at once after both, rather than by one after each. A signal handler that runs between
    /// the two unlocks finds the thread busy either way (the count is 2 rather than 1) and
    /// defers its wake alike (`reentry.rs`); the deferred wakes are made when the count reaches
    /// 0, as they would be.
    #[inline(always)]
    pub(crate) fn unlock_both(a: Self, b: Self) {
        let (a, b) = (std::mem::ManuallyDrop::new(a), std::mem::ManuallyDrop::new(b));
        debug_assert!(!std::ptr::eq(a.bucket, b.bucket));
        RawLock::unlock_two(&a.bucket.lock, &b.bucket.lock);
        crate::reentry::unlocked_two();
    }
}

impl Drop for BucketGuard<'_> {
    #[inline(always)] // an unlock: a swap and a test, in the caller
    fn drop(&mut self) {
        self.bucket.lock.unlock();
        crate::reentry::unlocked();
    }
}

/// Two buckets locked in rank order, or one if both keys hash to the same bucket.
pub(crate) enum PairGuard<'a> {
    One(BucketGuard<'a>),
    Two { first: BucketGuard<'a>, second: BucketGuard<'a> },
}

/// Lock `a` (a bucket of `ta`) and `b` (a bucket of `tb`) lowest rank first, checking with
/// `current` that each bucket's table is current right after taking its lock. `None` (nothing
/// held) when one is not: the caller reloads its tables and retries. `a`'s guard is `first`.
/// The check after the first lock is what keeps this deadlock-free against a resize (module
/// docs); the check after the second completes the usual "re-check under the lock".
#[inline(always)] // into `Tables::lock_pair`: the guards stay in registers
pub(crate) fn lock_pair_current<'a>(
    (ta, a): (&Table, &'a Bucket),
    (tb, b): (&Table, &'a Bucket),
    current: impl Fn(&Table) -> bool,
) -> Option<PairGuard<'a>> {
    if std::ptr::eq(a, b) {
        let g = a.lock();
        return current(ta).then_some(PairGuard::One(g));
    }
    let a_first = (ta.id, a as *const Bucket) < (tb.id, b as *const Bucket);
    let ((lt, lo), (ht, hi)) = if a_first { ((ta, a), (tb, b)) } else { ((tb, b), (ta, a)) };
    let low = lo.lock();
    if !current(lt) {
        return None;
    }
    let high = hi.lock();
    if !current(ht) {
        return None;
    }
    Some(if a_first {
        PairGuard::Two { first: low, second: high }
    } else {
        PairGuard::Two { first: high, second: low }
    })
}

/// A power-of-two array of buckets belonging to one slot of a domain (its plain table or one
/// node's table).
pub(crate) struct Table {
    /// `slots` initialised buckets, owned by the table (see [`Storage`]).
    buckets: NonNull<Bucket>,
    shift: u32,
    slots: usize,
    node: u32,
    /// Creation order, for the lock order across tables (module docs); 0 for the static table.
    id: u64,
    storage: Storage,
    /// The next table in the list a forked child forgets waiters in (`gate.rs`).
    listed_next: std::sync::atomic::AtomicPtr<Table>,
}

/// A table's link before it is listed.
const fn unlisted() -> std::sync::atomic::AtomicPtr<Table> {
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut())
}

/// The next table's id (a std atomic even under loom: only its order matters, and tables are
/// created in the same order in every run of a model).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Where a table's buckets live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Storage {
    /// A boxed slice from the global allocator.
    Heap,
    /// A static array (the process default domain's first table: [`Table::initial`]).
    #[cfg(not(ufutex_loom))]
    Static,
    /// Pages of their own (`bytes` long), mapped for a NUMA node and bound to it.
    #[cfg(not(ufutex_loom))]
    Mapped { bytes: usize },
}

// SAFETY:
// - the table owns its buckets (like a `Box<[Bucket]>`), and `Bucket` is `Sync` and `Send`;
// - the raw pointer is only read after construction.
unsafe impl Send for Table {}
// SAFETY: as for `Send`: shared access only reaches `&Bucket`, which is `Sync`.
unsafe impl Sync for Table {}

impl Table {
    /// A plain table of `slots` buckets (a power of two ≥ 2), every count starting at `waiters`.
    #[cfg_attr(any(not(test), ufutex_loom), allow(dead_code))]
    pub(crate) fn new(slots: usize, waiters: u32) -> Option<Table> {
        Table::new_on(slots, waiters, NO_NODE, false)
    }

    /// A table for `node` ([`NO_NODE`]: the plain table). With `place`, its memory is bound to
    /// that (real) node before it is first touched; if that fails it lives on the heap. `None`
    /// when the memory cannot be had (the callers report `ENOMEM`; nothing aborts).
    pub(crate) fn new_on(slots: usize, waiters: u32, node: u32, place: bool) -> Option<Table> {
        assert!(slots.is_power_of_two() && slots >= 2, "table sizes are powers of two >= 2");
        let (buckets, storage) = match place.then(|| placement::map_on_node(slots, waiters, node)).flatten() {
            Some(placed) => placed,
            None => {
                let mut v: Vec<Bucket> = Vec::new();
                v.try_reserve_exact(slots).ok()?;
                v.extend((0..slots).map(|_| Bucket::new(waiters)));
                // No reallocation: the capacity is exactly `slots`.
                let b: Box<[Bucket]> = v.into_boxed_slice();
                // SAFETY: a Box's pointer is never null.
                (unsafe { NonNull::new_unchecked(Box::into_raw(b).cast::<Bucket>()) }, Storage::Heap)
            }
        };
        // Relaxed: a unique, increasing number; nothing is published through it.
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(Table { buckets, shift: 64 - slots.trailing_zeros(), slots, node, id, storage, listed_next: unlisted() })
    }

    /// The plain table over a static array of buckets (counts 0): the process default domain
    /// starts with one, so its first wait never depends on an allocation.
    #[cfg(not(ufutex_loom))]
    pub(crate) const fn initial<const N: usize>(buckets: &'static [Bucket; N]) -> Table {
        assert!(N.is_power_of_two() && N >= 2, "table sizes are powers of two >= 2");
        // A shared reference to buckets that are only ever reached as `&Bucket` (the table
        // never forms a `&mut` to them), so the `*mut` is never written through.
        let first = std::ptr::from_ref(buckets).cast::<Bucket>().cast_mut();
        // SAFETY: a reference is never null.
        let buckets = unsafe { NonNull::new_unchecked(first) };
        Table {
            buckets,
            shift: 64 - N.trailing_zeros(),
            slots: N,
            node: NO_NODE,
            id: 0,
            storage: Storage::Static,
            listed_next: unlisted(),
        }
    }

    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The node this table serves ([`NO_NODE`] for the plain table).
    pub(crate) fn node(&self) -> u32 {
        self.node
    }

    /// The link to the next listed table (`gate.rs`).
    pub(crate) fn listed_next(&self) -> &std::sync::atomic::AtomicPtr<Table> {
        &self.listed_next
    }

    fn buckets(&self) -> &[Bucket] {
        // SAFETY: `buckets` points to `slots` initialised buckets owned by `self`.
        unsafe { std::slice::from_raw_parts(self.buckets.as_ptr(), self.slots) }
    }

    #[inline]
    pub(crate) fn bucket(&self, key: &Key) -> &Bucket {
        let i = (key.hash() >> self.shift) as usize;
        debug_assert!(i < self.slots);
        // SAFETY:
        // - `shift` is 64 - log2(slots), so `i` < slots;
        // - the `slots` buckets are initialised and live as long as `self`.
        unsafe { &*self.buckets.as_ptr().add(i) }
    }

    /// Bytes this table occupies.
    pub(crate) fn footprint(&self) -> usize {
        let buckets = match self.storage {
            Storage::Heap => std::mem::size_of_val(self.buckets()),
            #[cfg(not(ufutex_loom))]
            Storage::Static => std::mem::size_of_val(self.buckets()),
            #[cfg(not(ufutex_loom))]
            Storage::Mapped { bytes } => bytes,
        };
        std::mem::size_of::<Table>() + buckets
    }

    /// The address of the first bucket (tests check where the memory was placed).
    #[cfg_attr(any(not(test), ufutex_loom), allow(dead_code))]
    pub(crate) fn base_addr(&self) -> usize {
        self.buckets.as_ptr() as usize
    }

    /// Move every queued node of `self` (the current table) to `new` and make the caller's
    /// `publish` the switch: with every bucket of both tables locked, nodes move a group at a
    /// time, groups in queue order (so per-key order holds), counts move with them, `self` is
    /// marked retired and `new` un-retired, then `publish` runs, then all locks drop.
    ///
    /// `new` is a retired table: fresh ones are allocated retired (counts RETIRED, unseen by
    /// anyone), reused ones have counts ≥ RETIRED plus stray (A) increments of threads about to
    /// notice and retry.
    pub(crate) fn migrate_to(&self, new: &Table, publish: impl FnOnce()) {
        debug_assert_eq!(self.node, new.node, "a table is only replaced by one of its own slot");
        let mut old_guards: Vec<BucketGuard<'_>> = self.buckets().iter().map(Bucket::lock).collect();
        let mut new_guards: Vec<BucketGuard<'_>> = new.buckets().iter().map(Bucket::lock).collect();
        for og in old_guards.iter_mut() {
            let ob = og.bucket();
            let mut moved = 0u32;
            let adopt = |group: Detached, key: Key| {
                let ng = &mut new_guards[(key.hash() >> new.shift) as usize];
                let nb = ng.bucket();
                let n = group.len() as u32;
                // Counts: new first, so a bucket never under-counts (module invariant).
                nb.waiters.fetch_add(n, Ordering::SeqCst);
                // SAFETY: `group` was just drained from a locked queue; `ng` locks `nb`.
                unsafe { ng.queue().adopt(group, key, nb) };
                moved += n;
            };
            // SAFETY: `og` holds the old bucket's lock; `adopt` gives every drained group to a
            // new bucket before any lock is released.
            unsafe { og.queue().drain(adopt) };
            // SeqCst: a waker whose (B) fence precedes this mark may have read the old count;
            // ordering the mark in S before any (A) of a waiter that then finds the new table
            // current makes that waiter see the waker's store (argued in wait.rs).
            ob.waiters.fetch_add(RETIRED.wrapping_sub(moved), Ordering::SeqCst);
        }
        for ng in &new_guards {
            ng.bucket().waiters.fetch_sub(RETIRED, Ordering::SeqCst);
        }
        publish();
        drop(new_guards);
        drop(old_guards);
    }

    /// The child after the fork: every bucket forgets its waiters and is unlocked, its count
    /// at `base` or, if `None`, at the base it shows (see `Bucket::forget`).
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn forget_every_waiter(&self, base: Option<u32>) {
        for b in self.buckets() {
            b.forget(base);
        }
    }

    /// The buckets' waiter counts, summed (for tests: see `Domain::counted_waiters`).
    pub(crate) fn counted(&self) -> usize {
        self.buckets().iter().map(|b| b.waiters.load(Ordering::Relaxed) as usize).sum()
    }

    /// How many nodes are queued (for tests' "nothing left queued" checks).
    pub(crate) fn queued(&self) -> usize {
        self.buckets().iter().map(|b| b.lock().queue().len()).sum()
    }

    /// Queued nodes whose home is a bucket of this table (`Bell::homed`), wherever they are.
    pub(crate) fn homed(&self) -> usize {
        self.buckets().iter().map(|b| b.bell().homed() as usize).sum()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        match self.storage {
            Storage::Heap => {
                let slice = std::ptr::slice_from_raw_parts_mut(self.buckets.as_ptr(), self.slots);
                // SAFETY: `buckets` came from `Box::into_raw` of a boxed slice of `slots` buckets.
                drop(unsafe { Box::from_raw(slice) });
            }
            #[cfg(not(ufutex_loom))]
            Storage::Static => {} // statics are never dropped; nothing to free
            #[cfg(not(ufutex_loom))]
            Storage::Mapped { bytes } => {
                // SAFETY:
                // - `buckets` is the start of a `bytes`-long mapping made by `map_on_node`, holding
                //   `slots` buckets that nobody references any more (we are being dropped);
                // - buckets need no destructor beyond their fields' (plain atomics and pointers).
                unsafe { placement::unmap(self.buckets.as_ptr(), self.slots, bytes) };
            }
        }
    }
}

/// Placing a node's table on that node: fresh pages, bound with `mbind(MPOL_PREFERRED)` before
/// the buckets are first written, so the kernel allocates them on the node.
#[cfg(not(ufutex_loom))]
mod placement {
    use super::{Bucket, Storage};
    use std::ptr::NonNull;

    const MPOL_PREFERRED: libc::c_ulong = 1;

    /// `slots` buckets in pages of their own, bound to `node`; `None` if the mapping fails.
    pub(super) fn map_on_node(slots: usize, waiters: u32, node: u32) -> Option<(NonNull<Bucket>, Storage)> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let bytes = slots.checked_mul(std::mem::size_of::<Bucket>())?.checked_next_multiple_of(page)?;
        let p = crate::pages::map(bytes)?.as_ptr().cast::<libc::c_void>();
        bind(p, bytes, node);
        let first = p.cast::<Bucket>();
        for i in 0..slots {
            // SAFETY:
            // - the mapping is `bytes` ≥ slots × 64 long, page-aligned (so 64-aligned), and ours;
            // - each bucket is written once, before anyone can see the table.
            unsafe { first.add(i).write(Bucket::new(waiters)) };
        }
        NonNull::new(first).map(|b| (b, Storage::Mapped { bytes }))
    }

    /// Ask the kernel to allocate `[p, p + bytes)` on `node`. Errors are ignored: placement is
    /// a performance hint (a kernel without NUMA support, or a node without memory, still works).
    fn bind(p: *mut libc::c_void, bytes: usize, node: u32) {
        let node = node as usize;
        let mut mask = vec![0 as libc::c_ulong; node / 64 + 1];
        mask[node / 64] |= 1 << (node % 64);
        // The kernel reads `maxnode - 1` bits.
        let maxnode = mask.len() * 64 + 1;
        // SAFETY:
        // - `p..p + bytes` is a mapping we own; `mask` is `maxnode - 1` bits long and outlives
        //   the call; mbind changes only the placement policy of that range.
        unsafe { libc::syscall(libc::SYS_mbind, p, bytes, MPOL_PREFERRED, mask.as_ptr(), maxnode, 0u32) };
    }

    /// # Safety
    /// `first` starts a `bytes`-long mapping made by [`map_on_node`] holding `slots` buckets that
    /// are no longer referenced.
    pub(super) unsafe fn unmap(first: *mut Bucket, slots: usize, bytes: usize) {
        // SAFETY: forwarded contract: the buckets are initialised and unreferenced.
        unsafe { std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(first, slots)) };
        // SAFETY: forwarded contract: the whole mapping is ours to unmap.
        unsafe { libc::munmap(first.cast(), bytes) };
    }
}

/// Under loom there is no placement: every table is on the heap.
#[cfg(ufutex_loom)]
mod placement {
    use super::{Bucket, Storage};
    use std::ptr::NonNull;

    pub(super) fn map_on_node(_: usize, _: u32, _: u32) -> Option<(NonNull<Bucket>, Storage)> {
        None
    }
}

/// Tables on their own: sizes and hashing, pair locking, and migration with real nodes. A
/// `Waiters<'t>` owns the nodes and their parkers and borrows the tables its nodes queue in
/// for `'t`, so the compiler keeps every table alive until the nodes are out of it again.
#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use crate::parker::{Park, Parker};
    use crate::queue::NodeState;
    use std::cell::{Cell, RefCell};
    use std::marker::PhantomData;

    /// The index of `b` in `t` (and a check that it is one of `t`'s buckets).
    fn index_of(t: &Table, b: &Bucket) -> usize {
        let offset = (b as *const Bucket as usize).wrapping_sub(t.base_addr());
        let size = std::mem::size_of::<Bucket>();
        assert!(offset.is_multiple_of(size) && offset / size < t.slots(), "a bucket of the table");
        offset / size
    }

    /// The `nth` private key (of 8-byte words from 0x10_0000 up) that `t` puts in bucket `want`.
    fn key_in(t: &Table, want: usize, nth: usize) -> Key {
        (0..)
            .map(|i| Key::private(0x10_0000 + 8 * i))
            .filter(|k| index_of(t, t.bucket(k)) == want)
            .nth(nth)
            .expect("the hash reaches every bucket")
    }

    /// What a bucket's queue holds, `(key, mask)` in queue order (masks name the nodes here).
    fn contents(b: &Bucket) -> Vec<(Key, u64)> {
        b.lock().queue().entries()
    }

    /// The masks of `key`'s nodes in its bucket of `t`, head to tail.
    fn fifo(t: &Table, key: Key) -> Vec<u64> {
        contents(t.bucket(&key)).into_iter().filter(|(k, _)| *k == key).map(|(_, m)| m).collect()
    }

    fn counts(t: &Table) -> Vec<u32> {
        t.buckets().iter().map(|b| b.waiters().load(Ordering::Relaxed)).collect()
    }

    /// Nodes of simulated waiters; node `i` queues with the mask `mask(i)`, so that a queue's
    /// `(key, mask)` list names its nodes.
    struct Waiters<'t> {
        nodes: Box<[Node]>,
        /// Node `i` is queued (set by `enqueue`, cleared by `dequeue`).
        queued: Box<[Cell<bool>]>,
        _parkers: Box<[Parker]>,
        /// Invariant in `'t`, so that `enqueue` cannot shorten it to a table that dies first.
        tables: PhantomData<Cell<&'t Table>>,
    }

    fn mask(i: usize) -> u64 {
        0x100 + i as u64
    }

    impl<'t> Waiters<'t> {
        fn new(n: usize) -> Waiters<'t> {
            let parkers: Box<[Parker]> = (0..n).map(|_| Parker::new()).collect();
            // The box never moves its contents, so the nodes' parker pointers stay valid.
            let nodes = (0..n).map(|i| Node::new(&parkers[i]).expect("a record")).collect();
            let queued = (0..n).map(|_| Cell::new(false)).collect();
            Waiters { nodes, queued, _parkers: parkers, tables: PhantomData }
        }

        /// Queue node `i` on `key` in `t` as a waiter does: (A) increment, lock, enqueue.
        fn enqueue(&self, t: &'t Table, i: usize, key: Key) {
            assert!(!self.queued[i].get(), "node {i} is queued already");
            let b = t.bucket(&key);
            b.waiters().fetch_add(1, Ordering::SeqCst);
            let mut g = b.lock();
            // SAFETY:
            // - node `i` is Idle (not queued, never woken here) and owned by this thread;
            // - `g` locks `b`, which owns the queue;
            // - the node stays alive while queued: `Drop` dequeues it, and `t` outlives `self`.
            unsafe { g.queue().push_back(&self.nodes[i], key, mask(i), b) };
            self.queued[i].set(true);
        }

        /// Take node `i` out of the bucket it is in now, as a waiter leaving on a timeout does.
        fn dequeue(&self, i: usize) {
            assert!(self.queued[i].get(), "node {i} is not queued");
            let node = &self.nodes[i];
            // SAFETY: the node is queued, so its group is in a bucket of a table borrowed for
            // `'t`, alive while `self` is.
            let b: &Bucket = unsafe { &*node.bucket_now() };
            let mut g = b.lock();
            // SAFETY: `g` locks the bucket the hint names, which holds the node: this thread is
            // the only one, so nothing moved it since the hint was read.
            let state = unsafe { g.queue().state_of(node) };
            assert_eq!(state, NodeState::Queued);
            // SAFETY: as above; the node is Queued in this bucket.
            unsafe { g.queue().cancel(node) };
            g.waiters().fetch_sub(1, Ordering::Relaxed);
            self.queued[i].set(false);
        }

        /// The bucket node `i` is in now.
        fn bucket_of(&self, i: usize) -> *const Bucket {
            self.nodes[i].bucket_now()
        }
    }

    impl Drop for Waiters<'_> {
        fn drop(&mut self) {
            // The lifetime rule: no node goes while queued.
            for i in 0..self.nodes.len() {
                if self.queued[i].get() {
                    self.dequeue(i);
                }
            }
        }
    }

    #[test]
    fn new_makes_power_of_two_tables_whose_buckets_cover_every_key() {
        for shift in 1..=10 {
            let slots = 1usize << shift;
            let t = Table::new(slots, 7).expect("a small table");
            assert_eq!((t.slots(), t.node()), (slots, NO_NODE));
            assert!(counts(&t).iter().all(|&c| c == 7), "every count starts at the given value");
            let mut hit = vec![0u32; slots];
            let words = (0..4096).map(|i| Key::private(0x7f00_0000_1000 + 4 * i));
            let strided = (0..1024).map(|i| Key::private(i << 12));
            let lines = (0..1024).map(|i| Key::private(64 * i));
            for k in words.chain(strided).chain(lines) {
                let i = index_of(&t, t.bucket(&k));
                hit[i] += 1;
                assert!(std::ptr::eq(t.bucket(&k), t.bucket(&k)), "same key, same bucket");
                assert!(std::ptr::eq(t.bucket(&k), t.bucket(&k.on_node(3))), "the node does not hash");
            }
            if slots <= 64 {
                assert!(hit.iter().all(|&h| h > 0), "{slots} buckets: every bucket used: {hit:?}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "powers of two")]
    fn new_rejects_a_size_that_is_not_a_power_of_two() {
        let _ = Table::new(12, 0);
    }

    #[test]
    #[should_panic(expected = "powers of two >= 2")]
    fn new_rejects_a_single_bucket() {
        let _ = Table::new(1, 0);
    }

    #[test]
    fn tables_are_ranked_in_creation_order() {
        let (a, b) = (Table::new(2, 0).expect("2 buckets"), Table::new(2, 0).expect("2 buckets"));
        assert!(0 < a.id && a.id < b.id);
    }

    #[test]
    fn footprint_is_the_table_and_its_buckets() {
        let table = std::mem::size_of::<Table>();
        for slots in [2, 64, 1024] {
            let t = Table::new(slots, 0).expect("a small table");
            assert_eq!(t.footprint(), table + slots * 64);
        }
        static BUCKETS: [Bucket; 8] = [const { Bucket::new(0) }; 8];
        assert_eq!(Table::initial(&BUCKETS).footprint(), table + 8 * 64);
        // A placed table occupies whole pages of its own.
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let placed = Table::new_on(2, 0, 0, true).expect("2 buckets");
        assert_eq!(placed.footprint(), table + page);
        assert!(placed.base_addr().is_multiple_of(page));
    }

    #[test]
    fn lock_pair_of_one_bucket_is_one_guard() {
        let t = Table::new(4, 0).expect("4 buckets");
        let b = t.bucket(&key_in(&t, 2, 0));
        let asked = RefCell::new(Vec::new());
        let current = |x: &Table| {
            asked.borrow_mut().push(x.id);
            true
        };
        match lock_pair_current((&t, b), (&t, b), current) {
            Some(PairGuard::One(g)) => assert!(std::ptr::eq(g.bucket(), b)),
            _ => panic!("one bucket, one guard"),
        }
        assert_eq!(*asked.borrow(), [t.id], "checked once, after the lock");
        drop(b.lock()); // released
    }

    #[test]
    fn lock_pair_of_two_buckets_gives_a_first() {
        let t = Table::new(4, 0).expect("4 buckets");
        let (lo, hi) = (t.bucket(&key_in(&t, 0, 0)), t.bucket(&key_in(&t, 3, 0)));
        for (a, b) in [(lo, hi), (hi, lo)] {
            match lock_pair_current((&t, a), (&t, b), |_| true) {
                Some(PairGuard::Two { first, second }) => {
                    assert!(std::ptr::eq(first.bucket(), a) && std::ptr::eq(second.bucket(), b));
                }
                _ => panic!("two buckets, two guards"),
            }
            drop((a.lock(), b.lock())); // both released
        }
    }

    #[test]
    fn lock_pair_across_tables_locks_the_older_table_first() {
        let (old, young) = (Table::new(4, 0).expect("4 buckets"), Table::new(4, 0).expect("4 buckets"));
        let (o, y) = (old.bucket(&key_in(&old, 1, 0)), young.bucket(&key_in(&young, 1, 0)));
        for young_is_a in [true, false] {
            let asked = RefCell::new(Vec::new());
            let current = |x: &Table| {
                asked.borrow_mut().push(x.id);
                true
            };
            let (pa, pb) = if young_is_a { ((&young, y), (&old, o)) } else { ((&old, o), (&young, y)) };
            match lock_pair_current(pa, pb, current) {
                Some(PairGuard::Two { first, second }) => {
                    assert!(std::ptr::eq(first.bucket(), pa.1) && std::ptr::eq(second.bucket(), pb.1));
                }
                _ => panic!("two buckets, two guards"),
            }
            // Each table is checked right after its bucket's lock: the older table's first.
            assert_eq!(*asked.borrow(), [old.id, young.id]);
        }
        drop((o.lock(), y.lock()));
    }

    #[test]
    fn lock_pair_gives_none_and_holds_nothing_when_a_table_is_not_current() {
        let (old, young) = (Table::new(4, 0).expect("4 buckets"), Table::new(4, 0).expect("4 buckets"));
        let (o, y) = (old.bucket(&key_in(&old, 0, 0)), young.bucket(&key_in(&young, 3, 0)));
        // One bucket, not current.
        assert!(lock_pair_current((&old, o), (&old, o), |_| false).is_none());
        drop(o.lock());
        // The first table locked (the older one) is not current: the check right after its lock
        // gives up before the second lock is taken.
        let asked = Cell::new(0);
        let first_stale = |x: &Table| {
            asked.set(asked.get() + 1);
            x.id != old.id
        };
        assert!(lock_pair_current((&young, y), (&old, o), first_stale).is_none());
        assert_eq!(asked.get(), 1, "no second lock after a failed first check");
        drop((o.lock(), y.lock()));
        // The second table is not current: both locks are released.
        let second_stale = |x: &Table| x.id != young.id;
        assert!(lock_pair_current((&young, y), (&old, o), second_stale).is_none());
        drop((o.lock(), y.lock()));
        // Two buckets of one table that is not current.
        let o2 = old.bucket(&key_in(&old, 3, 0));
        assert!(lock_pair_current((&old, o), (&old, o2), |_| false).is_none());
        drop((o.lock(), o2.lock()));
    }

    /// Five keys, three of them sharing bucket 1 of `t` (four with a 2-bucket table), and a
    /// queueing order that interleaves them.
    fn keys_for(t: &Table) -> ([Key; 5], [usize; 12]) {
        let keys = [key_in(t, 1, 0), key_in(t, 1, 1), key_in(t, 1, 2), key_in(t, 0, 0), key_in(t, t.slots() - 1, 3)];
        assert!((0..5).all(|i| (0..i).all(|j| keys[i] != keys[j])), "distinct keys");
        (keys, [0, 1, 0, 2, 3, 1, 0, 4, 2, 0, 3, 1])
    }

    /// Queued nodes per bucket of `t`, read from the queues.
    fn queued_per_bucket(t: &Table) -> Vec<u32> {
        t.buckets().iter().map(|b| contents(b).len() as u32).collect()
    }

    #[test]
    fn migrate_moves_every_node_in_fifo_order_per_key_with_its_count() {
        for (from, to) in [(4, 16), (16, 2), (2, 2)] {
            let old = Table::new(from, 0).expect("a small table");
            let new = Table::new(to, RETIRED).expect("a small table");
            let w = Waiters::new(12);
            let (keys, order) = keys_for(&old);
            for (i, &k) in order.iter().enumerate() {
                w.enqueue(&old, i, keys[k]);
            }
            let before: Vec<Vec<u64>> = keys.iter().map(|&k| fifo(&old, k)).collect();
            assert_eq!(before[0], [mask(0), mask(2), mask(6), mask(9)]);
            assert_eq!((old.queued(), old.homed(), new.queued()), (12, 12, 0));
            assert_eq!(counts(&old), queued_per_bucket(&old));
            // Where each node will land, counted from the keys.
            let mut expect = vec![0u32; to];
            for &k in &order {
                expect[index_of(&new, new.bucket(&keys[k]))] += 1;
            }
            let published = Cell::new(0);
            old.migrate_to(&new, || {
                // The switch happens with the counts already moved (no lock may be taken here).
                published.set(published.get() + 1);
                assert_eq!(counts(&new), expect);
                assert!(counts(&old).iter().all(|&c| c == RETIRED));
            });
            assert_eq!(published.get(), 1);
            assert_eq!((old.queued(), new.queued()), (0, 12));
            assert!(counts(&old).iter().all(|&c| c == RETIRED), "{from} → {to}: old table retired");
            assert_eq!(counts(&new), expect);
            assert_eq!(queued_per_bucket(&new), expect);
            for (k, key) in keys.iter().enumerate() {
                assert_eq!(fifo(&new, *key), before[k], "{from} → {to}: key {k} keeps its order");
            }
            for (i, &k) in order.iter().enumerate() {
                assert!(std::ptr::eq(w.bucket_of(i), new.bucket(&keys[k])), "node {i} knows its new bucket");
            }
            // A node keeps the bell of the bucket it first queued in.
            assert_eq!((old.homed(), new.homed()), (12, 0));
            drop(w);
            assert_eq!((new.queued(), old.homed()), (0, 0));
            assert!(counts(&new).iter().all(|&c| c == 0));
        }
    }

    #[test]
    fn migrate_leaves_in_flight_counts_with_the_old_bucket() {
        let old = Table::new(4, 0).expect("4 buckets");
        let new = Table::new(8, RETIRED).expect("8 buckets");
        let w = Waiters::new(2);
        let k = key_in(&old, 2, 0);
        w.enqueue(&old, 0, k);
        w.enqueue(&old, 1, k);
        // A waiter between its (A) increment and its enqueue (it will find the table retired).
        old.bucket(&k).waiters().fetch_add(1, Ordering::SeqCst);
        old.migrate_to(&new, || {});
        assert_eq!(old.bucket(&k).waiters().load(Ordering::Relaxed), RETIRED + 1);
        assert_eq!(new.bucket(&k).waiters().load(Ordering::Relaxed), 2);
        assert_eq!(fifo(&new, k), [mask(0), mask(1)]);
        old.bucket(&k).waiters().fetch_sub(1, Ordering::Relaxed); // it noticed and left
        assert!(counts(&old).iter().all(|&c| c == RETIRED));
    }

    #[test]
    fn migrate_from_a_table_with_empty_buckets() {
        let old = Table::new(8, 0).expect("8 buckets");
        let new = Table::new(4, RETIRED).expect("4 buckets");
        let w = Waiters::new(3);
        let (k1, k2) = (key_in(&old, 5, 0), key_in(&old, 5, 1));
        w.enqueue(&old, 0, k1);
        w.enqueue(&old, 1, k2);
        w.enqueue(&old, 2, k1);
        old.migrate_to(&new, || {});
        assert!(counts(&old).iter().all(|&c| c == RETIRED));
        assert_eq!(counts(&new), queued_per_bucket(&new));
        assert_eq!(new.queued(), 3);
        assert_eq!((fifo(&new, k1), fifo(&new, k2)), (vec![mask(0), mask(2)], vec![mask(1)]));
    }

    #[test]
    fn migrate_an_empty_table() {
        let old = Table::new(4, 0).expect("4 buckets");
        let new = Table::new(2, RETIRED).expect("2 buckets");
        let published = Cell::new(false);
        old.migrate_to(&new, || published.set(true));
        assert!(published.get());
        assert!(counts(&old).iter().all(|&c| c == RETIRED));
        assert!(counts(&new).iter().all(|&c| c == 0));
        assert_eq!((old.queued(), new.queued()), (0, 0));
    }

    #[test]
    fn migrate_back_and_forth_reuses_retired_tables() {
        let a = Table::new(4, 0).expect("4 buckets");
        let b = Table::new(8, RETIRED).expect("8 buckets");
        let w = Waiters::new(12);
        let (keys, order) = keys_for(&a);
        let mut expected: Vec<Vec<u64>> = vec![Vec::new(); keys.len()];
        let (mut current, mut spare) = (&a, &b);
        for round in 0..4 {
            // New waiters arrive on the current table, after the ones moved before.
            for (i, &k) in order.iter().enumerate().skip(3 * round).take(3) {
                w.enqueue(current, i, keys[k]);
                expected[k].push(mask(i));
            }
            // A stray (A) increment on the spare's bucket of key 0 (a thread holding a stale
            // pointer to it, about to retry), which the migration must leave in place.
            let stray = spare.bucket(&keys[0]);
            stray.waiters().fetch_add(1, Ordering::SeqCst);
            current.migrate_to(spare, || {});
            let queued = 3 * (round as u32 + 1);
            assert_eq!((current.queued(), spare.queued()), (0, queued as usize), "round {round}");
            assert!(counts(current).iter().all(|&c| c == RETIRED), "round {round}: retired");
            let mut want = queued_per_bucket(spare);
            want[index_of(spare, stray)] += 1;
            assert_eq!(counts(spare), want, "round {round}: counts follow the nodes");
            stray.waiters().fetch_sub(1, Ordering::Relaxed);
            for (k, key) in keys.iter().enumerate() {
                assert_eq!(fifo(spare, *key), expected[k], "round {round}: key {k} in order");
            }
            (current, spare) = (spare, current);
        }
        assert_eq!(current.queued(), 12);
        assert_eq!(a.homed() + b.homed(), 12);
    }
}
