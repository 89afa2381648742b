//! The records a queue keeps its per-key groups in (`queue.rs`), and where they come from.
//!
//! A bucket's queue is a list of *groups*, one run of waiters of one key each, so that a
//! requeue can move every waiter of a key by moving its groups, without touching a node. A
//! group lives in a record, and records are never freed: a queued node's own thread reads the
//! record of the group its node is in without a lock (`private_table::lock_home`), and by then
//! the node may have left that group and the record may serve another group, in another
//! bucket or domain. A record that is read stale still holds a key and a bucket pointer, which
//! the reader checks under a lock before it trusts them.
//!
//! Every node owns one record while it is idle (its *spare*; `queue::Node`). A node that
//! starts a group gives its spare to the group; a node that leaves a group takes a record back
//! (the group's, if it was the last node, else another node's spare; `queue.rs` says whose):
//! records are conserved, and queueing never allocates. A node made in a fresh node pool slot
//! takes the record beside it (`node_pool.rs`); any other node takes one from here when it is
//! made, and every node gives its record back here when it is dropped. Given-back records are
//! kept on a free list, whose lock is only tried, a few times, as the node pool's is
//! (`brief_lock.rs`). A give that cannot have it leaves its records on a lock-free stack beside
//! the list (`spill.rs`), which the list's next holder that finds the list empty takes whole:
//! no record is lost. A take that cannot have the lock makes a page of new ones, so records
//! may outnumber the most nodes that lived at once where the lock stays busy (a signal handler
//! that interrupted its holder). A child forked while another thread held it starts a new list
//! ([`forget_holder`]); the stack it keeps.

use crate::primitive::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};

/// The fields of a group that only the holder of its bucket's lock touches (but its length).
pub(crate) struct GroupLocked {
    /// Neighbouring groups in the bucket's list (of any keys), oldest first.
    pub(crate) prev: *const Group,
    pub(crate) next: *const Group,
    /// The group's first and last node (`queue::Node<H>`, of the bucket type `H`).
    pub(crate) head: *const (),
    pub(crate) tail: *const (),
    /// The union of the masks its nodes joined with, since the group was made (never smaller
    /// than the union of its nodes' masks): a wake whose mask misses it skips the group.
    pub(crate) masks: u64,
}

/// One record: a group of waiters of one key in one bucket, or a spare. One cache line.
#[repr(C, align(64))]
pub(crate) struct Group {
    /// The key (`key::Key`: the word's address, and the node as a `u32`), read without a lock
    /// by a node's own thread to find the bucket; written under the lock of the bucket the
    /// group is in.
    word: AtomicU64,
    node: AtomicU32,
    /// Nodes in the group, under its bucket's lock; 0 for a record that is nobody's group.
    len: UnsafeCell<u32>,
    /// The bucket the group is in (`queue::Home`); the same rules as the key.
    bucket: AtomicPtr<()>,
    locked: UnsafeCell<GroupLocked>,
}

const _: () = assert!(std::mem::size_of::<Group>() == 64 || cfg!(ufutex_loom));

// SAFETY:
// - the atomics are shared as atomics;
// - `locked` is only touched under the lock of the bucket that holds the group, or by the one
//   owner of a spare record (a node's own thread while it is idle, or the pool under its lock).
unsafe impl Sync for Group {}
// SAFETY: as for `Sync`: plain data whose shared parts are guarded as above.
unsafe impl Send for Group {}

impl Group {
    pub(crate) fn new() -> Group {
        Group {
            word: AtomicU64::new(0),
            node: AtomicU32::new(0),
            len: UnsafeCell::new(0),
            bucket: AtomicPtr::new(ptr::null_mut()),
            locked: UnsafeCell::new(GroupLocked {
                prev: ptr::null(),
                next: ptr::null(),
                head: ptr::null(),
                tail: ptr::null(),
                masks: 0,
            }),
        }
    }

    /// # Safety
    /// The caller holds the lock of the bucket that holds the group, or owns the spare record.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn locked(&self) -> &mut GroupLocked {
        // SAFETY: exclusive access is the caller's contract.
        unsafe { &mut *self.locked.get() }
    }

    /// Nodes in the group.
    ///
    /// # Safety
    /// As [`Group::locked`].
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    pub(crate) unsafe fn len(&self) -> &mut u32 {
        // SAFETY: exclusive access is the caller's contract.
        unsafe { &mut *self.len.get() }
    }

    /// The key and bucket the group was last given. Without the lock they may be stale or torn:
    /// a reader checks under the lock of the bucket it derives from them.
    #[inline]
    pub(crate) fn key_words(&self) -> (u64, u64) {
        // Relaxed: a hint, checked under a lock (`private_table::lock_home`).
        (self.word.load(Ordering::Relaxed), u64::from(self.node.load(Ordering::Relaxed)))
    }

    #[inline]
    pub(crate) fn bucket(&self) -> *const () {
        // Relaxed: read under the lock of the bucket it is compared with, which orders it.
        self.bucket.load(Ordering::Relaxed)
    }

    /// Give the group its key and bucket. Call with the lock of that bucket held (and the old
    /// one's, when it moves).
    #[inline]
    pub(crate) fn place(&self, (word, node): (u64, u64), bucket: *const ()) {
        // Relaxed: readers without the lock only take them as hints; readers under the lock are
        // ordered by it.
        self.word.store(word, Ordering::Relaxed);
        // A key's node is a `u32` (`Key::node`), kept whole in the key's second word.
        self.node.store(node as u32, Ordering::Relaxed);
        self.bucket.store(bucket.cast_mut(), Ordering::Relaxed);
    }
}

#[cfg(not(ufutex_loom))]
pub(crate) use pool::forget_holder;
#[cfg(all(test, not(ufutex_loom)))]
pub(crate) use pool::hold;

/// A record's memory.
pub(crate) const LAYOUT: std::alloc::Layout = std::alloc::Layout::new::<Group>();

/// A record for a new node: from the free list, or new. `None` if memory cannot be had.
pub(crate) fn take() -> Option<NonNull<Group>> {
    #[cfg(not(ufutex_loom))]
    return pool::FREE.take();
    #[cfg(ufutex_loom)]
    {
        // SAFETY: `Group` is not zero-sized.
        let g = NonNull::new(unsafe { std::alloc::alloc(LAYOUT) }.cast::<Group>())?;
        // SAFETY: fresh memory of `Group`'s layout, which nobody else knows of yet.
        unsafe { g.as_ptr().write(Group::new()) };
        Some(g)
    }
}

/// Give back the record of a node that goes (never freed: see the module docs).
///
/// # Safety
/// The caller owns the record (a spare), and drops every pointer to it it holds.
pub(crate) unsafe fn give(g: NonNull<Group>) {
    #[cfg(not(ufutex_loom))]
    // SAFETY: forwarded contract.
    unsafe {
        pool::FREE.give(g)
    };
    // Under loom a model's atomics must not outlive its execution: left unused (a leak of a
    // few records per model run).
    #[cfg(ufutex_loom)]
    let _ = g;
}

#[cfg(not(ufutex_loom))]
mod pool {
    use super::Group;
    use crate::brief_lock::BriefLock;
    use crate::spill::{Linked, Spill};
    use std::ptr::{self, NonNull};
    #[cfg(test)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Records given back, chained through their `next` field.
    struct Free(*const Group);

    // SAFETY: the chain is only followed under the lock; free records are nobody else's.
    unsafe impl Send for Free {}

    impl Linked for Group {
        unsafe fn next(&self) -> *const Group {
            // SAFETY: the caller owns the record or holds the list it is on (the contract): a
            // spare record's `locked` is its owner's (`Group::locked`).
            unsafe { self.locked().next }
        }

        unsafe fn set_next(&self, next: *const Group) {
            // SAFETY: the caller owns the record (the contract), so it owns its `locked`.
            unsafe { self.locked().next = next };
        }
    }

    /// A free list of records: the process's ([`FREE`]), or a test's own.
    pub(super) struct Pool {
        free: BriefLock<Free>,
        /// Records given back while the list's lock stayed busy (module docs).
        spill: Spill<Group>,
        /// What became of each take and give (for the tests).
        #[cfg(test)]
        pub(super) tally: Tally,
    }

    /// The process's free list.
    pub(super) static FREE: Pool = Pool::new();

    /// In a forked child's fresh start: a free list that a thread the child does not have held
    /// at the fork is given up (its records, unused, stay where they are), and a new one starts
    /// empty (`brief_lock.rs`). The spilled records stay on their stack, whole (`spill.rs`).
    pub(crate) fn forget_holder() {
        FREE.free.forget_holder(|| Free(ptr::null()));
    }

    /// The free list's lock, held as by a thread in the middle of a take (for the tests).
    #[cfg(test)]
    pub(crate) fn hold() -> crate::brief_lock::BriefGuard<'static, impl Sized> {
        FREE.free.lock_briefly().expect("the free list")
    }

    /// Records made at once when the free list is empty: a page of them (4 KiB), so that the
    /// records of nodes made together share a page (a requeue after a sleep pays a page walk
    /// for each page it meets). Most nodes bring a record of their own, beside them in the
    /// node pool (`node_pool.rs`); these serve the others (waitv nodes, nodes kept outside the
    /// pool).
    pub(super) const BATCH: usize = 4096 / std::mem::size_of::<Group>();

    /// Counts of a pool's outcomes, kept by the tests' builds.
    #[cfg(test)]
    pub(super) struct Tally {
        /// Takes that found the list and the stack empty, and takes that could not have the
        /// list's lock.
        pub(super) empty: AtomicUsize,
        pub(super) lost_takes: AtomicUsize,
        /// Gives (of one record, or of a new page's others) that could not have the lock, and
        /// the records they left on the stack.
        pub(super) spilled_gives: AtomicUsize,
        pub(super) spilled: AtomicUsize,
        /// Stacks taken whole by a holder that found the list empty.
        pub(super) drained: AtomicUsize,
    }

    #[cfg(test)]
    fn count(c: &AtomicUsize, n: usize) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    impl Pool {
        pub(super) const fn new() -> Pool {
            Pool {
                free: BriefLock::new(Free(ptr::null())),
                spill: Spill::new(),
                #[cfg(test)]
                tally: Tally {
                    empty: AtomicUsize::new(0),
                    lost_takes: AtomicUsize::new(0),
                    spilled_gives: AtomicUsize::new(0),
                    spilled: AtomicUsize::new(0),
                    drained: AtomicUsize::new(0),
                },
            }
        }

        /// A record from the list (or, where it is empty, from the records spilled beside it),
        /// or from a new page when both are empty or the list's lock stays busy.
        pub(super) fn take(&self) -> Option<NonNull<Group>> {
            self.pop().or_else(|| self.refill())
        }

        fn pop(&self) -> Option<NonNull<Group>> {
            let Some(mut free) = self.free.lock_briefly() else {
                #[cfg(test)]
                count(&self.tally.lost_takes, 1);
                return None;
            };
            if free.0.is_null() {
                // The list is empty: the records that gives left beside it become the list.
                free.0 = self.spill.take_all();
                #[cfg(test)]
                if !free.0.is_null() {
                    count(&self.tally.drained, 1);
                }
            }
            let Some(g) = NonNull::new(free.0.cast_mut()) else {
                #[cfg(test)]
                count(&self.tally.empty, 1);
                return None;
            };
            // SAFETY: a record on the free list is owned by the list, whose lock we hold.
            free.0 = unsafe { g.as_ref().next() };
            Some(g)
        }

        /// A page of new records: one for the caller, the rest on the free list.
        fn refill(&self) -> Option<NonNull<Group>> {
            // A page from the kernel, not the allocator (`pages.rs`): a wait may grow this list.
            let first = crate::pages::map(super::LAYOUT.size() * BATCH)?.cast::<Group>();
            for i in 0..BATCH {
                // SAFETY: fresh memory for `BATCH` records, which nobody else knows of yet.
                unsafe { first.as_ptr().add(i).write(Group::new()) };
            }
            // The others, chained, go to the free list at once.
            for i in 1..BATCH - 1 {
                // SAFETY: as above; nobody else knows of them yet.
                unsafe { (*first.as_ptr().add(i)).locked().next = first.as_ptr().add(i + 1) };
            }
            // SAFETY: `first + 1 ..= first + BATCH - 1` are chained above and ours to give.
            unsafe {
                self.push_chain(
                    NonNull::new_unchecked(first.as_ptr().add(1)),
                    &*first.as_ptr().add(BATCH - 1),
                    BATCH - 1,
                )
            };
            Some(first)
        }

        /// # Safety
        /// As `super::give`.
        pub(super) unsafe fn give(&self, g: NonNull<Group>) {
            // SAFETY: forwarded contract; one record is a chain of one.
            unsafe { self.push_chain(g, g.as_ref(), 1) };
        }

        /// Put the chain `first ..= last` (linked by `next`, `_len` records) on the free list.
        ///
        /// # Safety
        /// The caller gives up every record of the chain, and holds no pointer to them.
        unsafe fn push_chain(&self, first: NonNull<Group>, last: &Group, _len: usize) {
            // A lock that stays busy (a signal handler that interrupted its holder, a thread
            // preempted inside it for 64 yields): the records go on the stack beside the list,
            // which does not wait.
            let Some(mut free) = self.free.lock_briefly() else {
                #[cfg(test)]
                {
                    count(&self.tally.spilled_gives, 1);
                    count(&self.tally.spilled, _len);
                }
                // SAFETY: forwarded contract; records are never freed.
                unsafe { self.spill.push(first, last) };
                return;
            };
            // SAFETY: the caller gives up the chain: the list owns it now.
            unsafe { last.set_next(free.0) };
            free.0 = first.as_ptr();
        }

        /// The list's lock, held as by a thread in the middle of a take (for the tests).
        #[cfg(test)]
        pub(super) fn held(&self) -> crate::brief_lock::BriefGuard<'_, impl Sized> {
            self.free.lock_briefly().expect("the free list")
        }

        /// Records on the list, counted under its lock, and on the stack (for the tests: no take
        /// or give may run meanwhile).
        #[cfg(test)]
        pub(super) fn len(&self) -> usize {
            let free = self.free.lock_briefly().expect("the free list");
            let mut n = 0;
            let mut g = free.0;
            while !g.is_null() {
                n += 1;
                // SAFETY: records on the list are the list's, whose lock we hold.
                g = unsafe { (*g).next() };
            }
            n + self.spill.len_quiet()
        }
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::pool::{Pool, BATCH};
    use std::sync::atomic::Ordering::Relaxed;

    /// Records given back while the list's lock is held (by this thread: a signal handler that
    /// interrupted the holder) wait on the stack beside the list, and serve the takes that find
    /// the list empty, before any new page is made.
    #[test]
    fn records_given_back_while_the_lock_is_held_come_back() {
        let pool = Pool::new();
        let first: Vec<_> = (0..3).map(|_| pool.take().expect("a record")).collect();
        let t = &pool.tally;
        assert_eq!(t.empty.load(Relaxed), 1, "one page made");
        let held = pool.held();
        for &g in &first {
            // SAFETY: records taken above, given back with no pointer kept (only compared below).
            unsafe { pool.give(g) };
        }
        drop(held);
        assert_eq!((t.spilled_gives.load(Relaxed), t.spilled.load(Relaxed)), (3, 3));
        // The page's other records from the list, then the three from the stack.
        let again: Vec<_> = (0..BATCH).map(|_| pool.take().expect("a record")).collect();
        assert_eq!(t.empty.load(Relaxed), 1, "no page made for them");
        assert_eq!(t.drained.load(Relaxed), 1, "the stack taken once, whole");
        assert!(first.iter().all(|g| again.contains(g)), "the records given back came back");
        let mut distinct = again.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), BATCH, "no record handed out twice");
        pool.take().expect("a record");
        assert_eq!(t.empty.load(Relaxed), 2, "a second page once all were taken");
    }

    /// Two threads take records from a pool of their own and give them back as fast as they
    /// can (as threads that start and exit at once make and drop nodes). Whatever the
    /// scheduler does, no record is lost: the list and the stack beside it end with every
    /// record of every page made. And a page is made only for a racer's first take, or for a
    /// take that could not have the lock: a record given back serves the takes that follow,
    /// from the list or, once the list is empty, from the stack.
    ///
    /// Why two pages at most for takes that found nothing: such a take holds no record itself
    /// (its own last give put it on the list or the stack), and the other racer holds one at
    /// most, or carries a page it just made, holding one of its records and putting the other
    /// 63 on the list (or the stack). So nothing is left only while no page was made yet, or while the first
    /// one is carried: at each racer's first take.
    ///
    /// How often the lock is not had is the scheduler's, so the test prints it: natively, hardly
    /// ever; under qemu 1-27 takes and up to 49 gives in these 400,000 rounds (BENCHMARKS.md,
    /// eighty-first session). With the lock tried once, 430 takes in a release build and
    /// 5,300-6,200 in a debug one; the assertions held there too.
    #[test]
    fn racing_takes_and_gives_reuse_the_records() {
        const ROUNDS: usize = 200_000;
        let pool = Pool::new();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..ROUNDS {
                        let g = pool.take().expect("a record");
                        // SAFETY: the record just taken, given back with no pointer kept.
                        unsafe { pool.give(g) };
                    }
                });
            }
        });
        let t = &pool.tally;
        let (empty, lost_takes) = (t.empty.load(Relaxed), t.lost_takes.load(Relaxed));
        let (spilled_gives, spilled) = (t.spilled_gives.load(Relaxed), t.spilled.load(Relaxed));
        let pages = empty + lost_takes;
        eprintln!(
            "{pages} pages for {} rounds: {empty} on an empty list, {lost_takes} for takes that \
             did not have the lock; {spilled_gives} gives (of {spilled} records) left theirs on \
             the stack, taken back {} times",
            2 * ROUNDS,
            t.drained.load(Relaxed)
        );
        assert_eq!(pool.len(), pages * BATCH, "records lost");
        assert!(empty <= 2, "{empty} takes found nothing to take");
    }
}
