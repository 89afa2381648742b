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
//! kept on a free list (whose lock is only tried, a few times, as the node pool's is:
//! `brief_lock.rs`; a record that cannot be given back is left unused, valid memory all the
//! same), so records hardly ever outnumber the most nodes that lived at once; they may where
//! the lock stays busy (a signal handler that interrupted its holder). A child forked while
//! another thread held it starts a new list ([`forget_holder`]).

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
    return pool::pop().or_else(pool::refill);
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
        pool::push(g)
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
    use std::ptr::{self, NonNull};

    /// Records given back, chained through their `next` field.
    struct Free(*const Group);

    // SAFETY: the chain is only followed under the lock; free records are nobody else's.
    unsafe impl Send for Free {}

    static FREE: BriefLock<Free> = BriefLock::new(Free(ptr::null()));

    /// In a forked child's fresh start: a free list that a thread the child does not have held
    /// at the fork is given up (its records, unused, stay where they are), and a new one starts
    /// empty (`brief_lock.rs`).
    pub(crate) fn forget_holder() {
        FREE.forget_holder(|| Free(ptr::null()));
    }

    /// The free list's lock, held as by a thread in the middle of a take (for the tests).
    #[cfg(test)]
    pub(crate) fn hold() -> crate::brief_lock::BriefGuard<'static, impl Sized> {
        FREE.lock_briefly().expect("the free list")
    }

    pub(super) fn pop() -> Option<NonNull<Group>> {
        let mut free = FREE.lock_briefly()?;
        let g = NonNull::new(free.0.cast_mut())?;
        // SAFETY: a record on the free list is owned by the list, whose lock we hold.
        free.0 = unsafe { g.as_ref().locked().next };
        Some(g)
    }

    /// Records made at once when the free list is empty: a page of them (4 KiB), so that the
    /// records of nodes made together share a page (a requeue after a sleep pays a page walk
    /// for each page it meets). Most nodes bring a record of their own, beside them in the
    /// node pool (`node_pool.rs`); these serve the others (waitv nodes, nodes kept outside the
    /// pool).
    const BATCH: usize = 4096 / std::mem::size_of::<Group>();

    #[cfg(test)]
    std::thread_local! {
        /// Pages of records this thread made ([`refill`]), for the tests.
        pub(super) static REFILLS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A page of new records: one for the caller, the rest on the free list.
    pub(super) fn refill() -> Option<NonNull<Group>> {
        #[cfg(test)]
        REFILLS.with(|r| r.set(r.get() + 1));
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
        unsafe { push_chain(NonNull::new_unchecked(first.as_ptr().add(1)), &*first.as_ptr().add(BATCH - 1)) };
        Some(first)
    }

    /// # Safety
    /// As `super::give`.
    pub(super) unsafe fn push(g: NonNull<Group>) {
        // SAFETY: forwarded contract; one record is a chain of one.
        unsafe { push_chain(g, g.as_ref()) };
    }

    /// Put the chain `first ..= last` (linked by `next`) on the free list.
    ///
    /// # Safety
    /// The caller gives up every record of the chain, and holds no pointer to them.
    unsafe fn push_chain(first: NonNull<Group>, last: &Group) {
        // A lock that stays busy (a signal handler that interrupted its holder, a thread
        // preempted inside it for 64 yields): the records stay unused. They are valid memory
        // all the same.
        let Some(mut free) = FREE.lock_briefly() else { return };
        // SAFETY: the caller gives up the chain: the list owns it now.
        unsafe { last.locked().next = free.0 };
        free.0 = first.as_ptr();
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    /// Two threads take records and give them back as fast as they can (threads that start and
    /// exit at once, each making and dropping a node): the records given back serve the takes
    /// that follow, so hardly a page of new records is made. (With the free list's lock tried
    /// only once, each race lost made one: 691-856 pages for these 400,000 rounds of a take and
    /// a give in a release build, 4,460-5,426 in a debug one. Only the racers' own pages count;
    /// the bound leaves room for the other tests of this process, which may empty the list.)
    #[test]
    fn racing_takes_and_gives_reuse_the_records() {
        const ROUNDS: usize = 200_000;
        let made: usize = std::thread::scope(|s| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        for _ in 0..ROUNDS {
                            let g = super::take().expect("a record");
                            // SAFETY: the record just taken, given back with no pointer kept.
                            unsafe { super::give(g) };
                        }
                        super::pool::REFILLS.with(std::cell::Cell::get)
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().expect("a racer")).sum()
        });
        assert!(made <= 16, "{made} pages of records made for {} rounds of a take and a give", 2 * ROUNDS);
    }
}
