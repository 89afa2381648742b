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
use crate::queue::{Home, Queue};
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
            }
        }
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

    pub(crate) fn queue(&mut self) -> &mut Queue<Bucket> {
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
        Some(Table { buckets, shift: 64 - slots.trailing_zeros(), slots, node, id, storage })
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
        Table { buckets, shift: 64 - N.trailing_zeros(), slots: N, node: NO_NODE, id: 0, storage: Storage::Static }
    }

    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The node this table serves ([`NO_NODE`] for the plain table).
    pub(crate) fn node(&self) -> u32 {
        self.node
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
    /// `publish` the switch: with every bucket of both tables locked, nodes move in FIFO order
    /// (so per-key order holds), counts move with them, `self` is marked retired and `new`
    /// un-retired, then `publish` runs, then all locks drop.
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
        for ng in &new_guards {
            ng.bucket().waiters.fetch_sub(RETIRED, Ordering::SeqCst);
        }
        publish();
        drop(new_guards);
        drop(old_guards);
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
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
        // existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
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
