//! The one intrusive wait queue. Every operation that moves waiters goes through here:
//! push, remove, take matching nodes (for wakes and requeues), and the wake list that carries
//! taken nodes past the bucket unlock.
//!
//! A bucket's queue is a list of *groups* (`group.rs`), oldest first; a group is a FIFO of
//! nodes of one key. A key may have several groups in one bucket (a requeue appends the
//! groups it moves whole, behind the target key's own); its waiters, in order, are its groups'
//! nodes in list order, and a new waiter joins the key's last group. A node points to its
//! group, and the group holds the key and the bucket, so a requeue of every waiter of a key
//! moves its groups and touches no node: O(groups), not O(waiters).
//!
//! Records: every node owns one record (its spare) except each group's tail, the group's
//! *debtor*: a node that starts a group gives its record to it, and a node that joins gives
//! its record to the old tail, whose line the join writes anyway. A node leaving a group takes
//! the group's record if it was the last node; if it was the tail, the record of the new tail.
//! A wake or a requeue takes nodes from the head, so it settles nothing but a group's last
//! node. Each group has exactly one debtor, records are conserved, and nothing here allocates.
//!
//! A waiter node's states and their legal transitions (all made under the lock of the bucket
//! that holds the node):
//! - `Idle → Queued`: its own thread enqueues it (wait, waitv setup);
//! - `Queued → Queued`: requeue or resize moves it to another key or bucket;
//! - `Queued → Woken`: a waker (wake, requeue) dequeues it; it then owes the thread one unpark;
//! - `Queued → Idle`: its own thread dequeues it (timeout, interruption, waitv clean-up);
//! - `Woken → Idle`: its own thread, once the waker's unpark has arrived (`Node::reclaim`),
//!   before the node is reused (waitv nodes live as long as their thread).
//!
//! Lifetime rule: a node is alive while `Queued`, and after `Woken` until its waker has
//! unparked its thread — the thread waits for that unpark before it reuses or frees the node.

use crate::group::{self, Group};
use crate::key::Key;
use crate::parker::{Bell, Park, Parker, UnparkHandle, WakeBatch};
use crate::primitive::{prefetch, AtomicPtr, Ordering};
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// What holds a queue: the place a node records as where it is now (a table's bucket), whose
/// bell is the node's home bell when the node is first queued there. The queue never looks
/// inside it otherwise; it is a type parameter so that this module does not depend on the
/// table (imports point down).
pub(crate) trait Home {
    /// The bell of this place (`parker::Bell`).
    fn bell(&self) -> &Bell;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeState {
    Idle,
    Queued,
    Woken,
}

/// Fields behind the bucket lock. (In this order: see [`Node`].)
#[repr(C)]
struct Locked<H> {
    /// The node before it in its group; stale while the node heads its group (which says
    /// whether it does): taking a group's head, as every wake and requeue does, then writes
    /// nothing into the next node, whose line is most likely in another thread's cache.
    prev: *const Node<H>,
    /// The next node in its group; after a requeue took the node, the next in its `MoveList`;
    /// after a waker took it (`Queued → Woken`), the next in the waker's `WakeList`.
    next: *const Node<H>,
    mask: u64,
    /// The record the node owns (`group.rs`); null while the node is its group's debtor.
    spare: *const Group,
    /// The bell of the bucket the node was first queued in (`Idle → Queued`), which a plain
    /// wait sleeps on too (`parker::Bell`); a requeue or resize that moves the node keeps it.
    bell: *const Bell,
    state: NodeState,
}

/// One thread waiting on one word: one cache line, all of which a wake or a requeue may touch
/// (a walk of a queue meets nodes that sit in other threads' caches, one miss after another),
/// and which leaves the other half of a node pool slot to a group record (`node_pool.rs`).
#[repr(C, align(64))]
pub(crate) struct Node<H> {
    /// The group the node is in; null while it is in none (idle, or taken by a waker).
    /// Changed only with the lock of the bucket holding the group; read without a lock only by
    /// the node's own thread, which then confirms it under that lock ([`Node::still_in`]).
    group: AtomicPtr<Group>,
    locked: UnsafeCell<Locked<H>>,
    parker: *const Parker,
}

const _: () = assert!(std::mem::size_of::<Node<()>>() == 64);

// SAFETY:
// - the `UnsafeCell` fields are only touched under the lock of the bucket holding the node, or
//   by its own thread while it is `Idle` (not reachable from any queue);
// - `parker` points to the owning thread's parker, which outlives every unpark owed to it.
unsafe impl<H> Sync for Node<H> {}
// SAFETY: as for `Sync`: a node is plain data whose shared parts are guarded as above.
unsafe impl<H> Send for Node<H> {}

impl<H> Node<H> {
    /// An idle node with a record of its own; `None` if memory for the record cannot be had.
    pub(crate) fn new(parker: &Parker) -> Option<Node<H>> {
        Some(Node::with_spare(parker, group::take()?))
    }

    /// An idle node owning `spare`: a record nobody else owns, never freed (`group.rs`).
    pub(crate) fn with_spare(parker: &Parker, spare: NonNull<Group>) -> Node<H> {
        Node {
            locked: UnsafeCell::new(Locked {
                prev: ptr::null(),
                next: ptr::null(),
                mask: 0,
                spare: spare.as_ptr(),
                bell: ptr::null(),
                state: NodeState::Idle,
            }),
            group: AtomicPtr::new(ptr::null_mut()),
            parker,
        }
    }

    /// `Woken → Idle`, by the node's own thread, once the waker's unpark has arrived: from
    /// then on no other thread references the node, so it can be queued again.
    ///
    /// # Safety
    /// The node is not queued, and every unpark owed for it has been received.
    pub(crate) unsafe fn reclaim(&self) {
        // SAFETY: per the contract no other thread can reach the node any more.
        let l = unsafe { self.locked() };
        debug_assert!(l.state != NodeState::Queued, "a queued node cannot be reclaimed");
        l.state = NodeState::Idle;
    }

    /// Where the node's own thread looks for it: its group and that group's key, read without
    /// a lock (stale or torn at worst: confirm with [`Node::still_in`] under the lock of the
    /// key's bucket). `None` when the node is in no group: a waker has taken it.
    pub(crate) fn whereabouts(&self) -> Option<(*const Group, Key)> {
        // Acquire: pairs with the Release of the waker that emptied it, so `None` comes after
        // the node was marked Woken.
        let g = self.group.load(Ordering::Acquire);
        // SAFETY: records are never freed (`group.rs`); a stale one is valid memory whose
        // atomics we read.
        let words = unsafe { g.as_ref() }?.key_words();
        Some((g, Key::from_words(words)))
    }

    /// Whether the node is in group `g` and `g` in `bucket`: call with `bucket`'s lock held.
    /// (Moving a group out of or into a bucket takes its lock, and so does moving a node out
    /// of a group of that bucket; a record's stale bucket is never the node's group.)
    pub(crate) fn still_in(&self, g: *const Group, bucket: &H) -> bool {
        // Relaxed: the lock held orders every write that makes these true.
        ptr::eq(self.group.load(Ordering::Relaxed), g)
            // SAFETY: as in `whereabouts`: a record is always valid memory.
            && ptr::eq(unsafe { (*g).bucket() }, ptr::from_ref(bucket).cast())
    }

    /// The bucket of the group the node is in (tests: one thread, nothing moves).
    #[cfg(all(test, not(ufutex_loom)))]
    pub(crate) fn bucket_now(&self) -> *const H {
        let g = self.group.load(Ordering::Relaxed);
        // SAFETY: records are never freed.
        unsafe { g.as_ref() }.map_or(ptr::null(), |g| g.bucket().cast())
    }

    /// # Safety
    /// The caller holds the lock of the bucket that holds the node, or the node is `Idle` and
    /// owned by the calling thread.
    #[allow(clippy::mut_from_ref)]
    unsafe fn locked(&self) -> &mut Locked<H> {
        // SAFETY: exclusive access is the caller's contract (bucket lock or Idle ownership).
        unsafe { &mut *self.locked.get() }
    }
}

impl<H> Drop for Node<H> {
    fn drop(&mut self) {
        let l = self.locked.get_mut();
        debug_assert!(l.state != NodeState::Queued || std::thread::panicking(), "a queued node cannot go");
        if let Some(spare) = NonNull::new(l.spare.cast_mut()) {
            // SAFETY: the node owns its spare, and goes: no pointer to the record remains here.
            unsafe { group::give(spare) };
        }
    }
}

/// A group taken out of a queue whole, to be given to another ([`Queue::drain`],
/// [`Queue::adopt`]): its nodes stay linked to it.
pub(crate) struct Detached {
    group: NonNull<Group>,
}

impl Detached {
    /// Nodes in the group.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: a detached group is reachable only through this handle, held by the caller
        // of `drain`, which holds the locks of both buckets.
        unsafe { *self.group.as_ref().len() as usize }
    }
}

/// A list of groups, oldest first; lives inside a bucket and is reachable only through its
/// lock guard.
pub(crate) struct Queue<H> {
    head: *const Group,
    tail: *const Group,
    _nodes: PhantomData<*const Node<H>>,
}

// SAFETY: the raw pointers are only followed under the bucket lock (see `Node`).
unsafe impl<H> Send for Queue<H> {}

/// What `Queue::take` does with a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Skip,
    /// Unlink it and hand it to the sink (a wake).
    Take,
    /// Unlink it into the move list, still `Queued` (a requeue).
    Move,
    Stop,
}

/// Link group `g` at the end of the chain `head ..= tail` (a queue's groups, or a move list's).
///
/// # Safety
/// The caller owns `g`, out of every chain, and the chain (its lock held, or its list's).
#[inline(always)]
unsafe fn chain_group(head: &mut *const Group, tail: &mut *const Group, g: &Group) {
    // SAFETY: per the contract; the old tail is a group of the chain.
    unsafe {
        let gl = g.locked();
        gl.prev = *tail;
        gl.next = ptr::null();
        if tail.is_null() {
            *head = g;
        } else {
            (**tail).locked().next = g;
        }
    }
    *tail = g;
}

/// What `Queue::take` asks its pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The next node, whose mask this is: [`Step::Skip`], `Take`, `Move` or `Stop`?
    Node(u64),
    /// A group of `len` nodes, none looked at yet: [`Step::Move`] to move it whole,
    /// [`Step::Stop`] to end the walk without a look at its first node (whose line may be
    /// cold), [`Step::Skip`] to pass over every node of it, [`Step::Take`] to walk its nodes.
    Group { len: usize },
}

/// The key a group was given (read under its bucket's lock).
#[inline(always)]
fn key_of(g: &Group) -> Key {
    Key::from_words(g.key_words())
}

impl<H: Home> Queue<H> {
    pub(crate) const fn new() -> Queue<H> {
        Queue { head: ptr::null(), tail: ptr::null(), _nodes: PhantomData }
    }

    /// Whether no group is queued (a look at the two ends, no walk).
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null() && self.tail.is_null()
    }

    /// Nodes in the queue (for tests and debug checks).
    pub(crate) fn len(&self) -> usize {
        let (mut n, mut g) = (0, self.head);
        while !g.is_null() {
            // SAFETY: the caller reached this queue through its bucket guard: its groups are
            // its, guarded by that lock.
            let gl = unsafe { (*g).locked() };
            // SAFETY: as above.
            n += unsafe { *(*g).len() } as usize;
            g = gl.next;
        }
        n
    }

    /// `(key, mask)` of every node in queue order (tests).
    #[cfg(all(test, not(ufutex_loom)))]
    pub(crate) fn entries(&self) -> Vec<(Key, u64)> {
        let (mut out, mut g) = (Vec::new(), self.head);
        while !g.is_null() {
            // SAFETY: the caller reached this queue through its bucket guard: its groups and
            // nodes are alive and guarded by that lock.
            unsafe {
                let mut cur: *const Node<H> = (*g).locked().head.cast();
                while !cur.is_null() {
                    out.push((key_of(&*g), (*cur).locked().mask));
                    cur = (*cur).locked().next;
                }
                g = (*g).locked().next;
            }
        }
        out
    }

    /// Append `node` with `key` and `mask`, recording `bucket` as its home: to `key`'s last
    /// group, or to a new group made of the node's spare record.
    ///
    /// # Safety
    /// - `node` is `Idle` and owned by the calling thread, or was just taken from another queue
    ///   by the caller (which holds both bucket locks);
    /// - `bucket` is the bucket that owns `self`, locked by the caller;
    /// - the node stays alive while queued (the lifetime rule above).
    pub(crate) unsafe fn push_back(&mut self, node: &Node<H>, key: Key, mask: u64, bucket: &H) {
        // SAFETY: exclusive access to the node per this function's contract.
        let l = unsafe { node.locked() };
        debug_assert!(l.state != NodeState::Woken, "a woken node is never re-queued");
        if l.state == NodeState::Idle {
            l.bell = bucket.bell();
            bucket.bell().homed_arrived();
        }
        l.mask = mask;
        l.state = NodeState::Queued;
        let g = match self.last_of(&key) {
            Some(g) => g,
            None => {
                let g = std::mem::replace(&mut l.spare, ptr::null());
                debug_assert!(!g.is_null(), "a node out of every group owns a record");
                // SAFETY: the node owned the record (its spare), which it now gives to the group;
                // we hold the lock of the bucket the group goes into.
                unsafe {
                    let g = &*g;
                    g.place(key.words(), ptr::from_ref(bucket).cast());
                    let gl = g.locked();
                    // A spare is a new record or an emptied group: no nodes, but the masks of
                    // its last life.
                    debug_assert!(gl.head.is_null() && gl.tail.is_null() && *g.len() == 0);
                    gl.masks = 0;
                    self.link(g);
                    g
                }
            }
        };
        // SAFETY: `g` is a group of this locked queue; its tail node is queued here, alive.
        unsafe {
            let gl = g.locked();
            l.prev = gl.tail.cast();
            l.next = ptr::null();
            if gl.tail.is_null() {
                gl.head = ptr::from_ref(node).cast();
            } else {
                // The new tail takes on the group's debt: the old tail, whose line this writes
                // anyway, gets our record.
                let old = (*gl.tail.cast::<Node<H>>()).locked();
                old.next = node;
                debug_assert!(old.spare.is_null(), "a group's tail is its debtor");
                old.spare = std::mem::replace(&mut l.spare, ptr::null());
            }
            gl.tail = ptr::from_ref(node).cast();
            gl.masks |= mask;
            *g.len() += 1;
        }
        // Release: the node's group is published before the lock is dropped; its own thread
        // reads it with Acquire (`whereabouts`).
        node.group.store(ptr::from_ref(g).cast_mut(), Ordering::Release);
    }

    /// The last group of `key`, if any.
    #[inline(always)]
    fn last_of(&self, key: &Key) -> Option<&Group> {
        let mut g = self.tail;
        while !g.is_null() {
            // SAFETY: a group of this locked queue.
            let gr = unsafe { &*g };
            if key_of(gr) == *key {
                return Some(gr);
            }
            // SAFETY: as above.
            g = unsafe { gr.locked().prev };
        }
        None
    }

    /// Link group `g` (out of every queue) at the tail.
    ///
    /// # Safety
    /// The caller holds this queue's lock and owns `g` (a detached group or a fresh record).
    unsafe fn link(&mut self, g: &Group) {
        // SAFETY: per the contract; the queue's groups are guarded by its lock.
        unsafe { chain_group(&mut self.head, &mut self.tail, g) };
    }

    /// Unlink group `g` from this queue (its nodes stay with it).
    ///
    /// # Safety
    /// `g` is in this queue; the caller holds its lock.
    unsafe fn unlink_group(&mut self, g: &Group) {
        // SAFETY: groups of this locked queue and their neighbours are guarded by the lock.
        unsafe {
            let gl = g.locked();
            if gl.prev.is_null() {
                self.head = gl.next;
            } else {
                (*gl.prev).locked().next = gl.next;
            }
            if gl.next.is_null() {
                self.tail = gl.prev;
            } else {
                (*gl.next).locked().prev = gl.prev;
            }
            gl.prev = ptr::null();
            gl.next = ptr::null();
        }
    }

    /// Take `node` out of its group (and the group out of the queue if it empties), settling
    /// the records: the node leaves owning one. It still points to the group it left
    /// ([`Queue::leave`] clears that).
    ///
    /// # Safety
    /// `node` is in a group of this queue and the caller holds the bucket lock.
    #[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
    unsafe fn unlink(&mut self, node: &Node<H>) {
        // SAFETY: queued nodes, their neighbours and their group are alive and guarded by the
        // held lock.
        unsafe {
            let l = node.locked();
            debug_assert_eq!(l.state, NodeState::Queued);
            let g = &*node.group.load(Ordering::Relaxed);
            let gl = g.locked();
            let was_tail = l.next.is_null();
            // A head's back link is stale (see `Locked::prev`): it is told by the group.
            let prev = if ptr::eq(gl.head, ptr::from_ref(node).cast()) {
                gl.head = l.next.cast();
                ptr::null()
            } else {
                (*l.prev).locked().next = l.next;
                l.prev
            };
            if l.next.is_null() {
                gl.tail = prev.cast();
            } else if !prev.is_null() {
                (*l.next).locked().prev = prev;
            }
            let len = g.len();
            *len -= 1;
            if *len == 0 {
                self.unlink_group(g);
                debug_assert!(l.spare.is_null(), "the last node of a group is its debtor");
                l.spare = g;
            } else if was_tail {
                // The debtor leaves (not in FIFO order, or a wake would pay for it): the new
                // tail, whose line the unlink just wrote, takes on the debt and gives its record.
                debug_assert!(l.spare.is_null(), "a group's tail is its debtor");
                l.spare = std::mem::replace(&mut (*prev).locked().spare, ptr::null());
            }
            l.prev = ptr::null();
            l.next = ptr::null();
        }
        // The node keeps pointing to the group it left: a requeue moving it gives it its new
        // one before it unlocks, and its own thread must not take it for woken meanwhile.
    }

    /// [`Queue::unlink`], for good: the node is in no group from now on.
    ///
    /// # Safety
    /// As `unlink`.
    unsafe fn leave(&mut self, node: &Node<H>) {
        // SAFETY: forwarded contract.
        unsafe { self.unlink(node) };
        // Release: see `push_back`; a null group tells the node's own thread a waker took it
        // (or, to itself, that it left).
        node.group.store(ptr::null_mut(), Ordering::Release);
    }

    /// Whether `node` is still queued (in this queue, whose lock the caller holds).
    ///
    /// # Safety
    /// The caller holds this queue's bucket lock and has confirmed `node` lives in this bucket
    /// ([`Node::still_in`]), or the node is `Woken` and awaits its unpark.
    pub(crate) unsafe fn state_of(&self, node: &Node<H>) -> NodeState {
        // SAFETY: per the contract, the lock held orders every write of the state.
        unsafe { node.locked().state }
    }

    /// The node's own thread takes it out (timeout, interruption, waitv clean-up).
    ///
    /// # Safety
    /// As `state_of`, and the node is `Queued` here.
    pub(crate) unsafe fn cancel(&mut self, node: &Node<H>) {
        // SAFETY: forwarded contract; a queued node's home bell is set and lives in a bucket
        // of the domain (never freed while it lives).
        unsafe {
            self.leave(node);
            let l = node.locked();
            l.state = NodeState::Idle;
            (*l.bell).homed_left();
        }
    }

    /// Walk `key`'s waiters oldest first; `f` sees each node's mask and decides
    /// ([`Ask::Node`]). Taken nodes are unlinked and handed to `sink` in queue order; moved
    /// ones go to `moved`, in order. Before each node that heads its group, `f` is asked about
    /// the group ([`Ask::Group`]): it may move whole (to `moved`, its nodes untouched), end the
    /// walk, or be passed over. A group whose masks share no bit with `within` is passed over
    /// before its key is even compared: `f` is to skip every node whose mask misses `within`.
    /// Returns how many were taken (not moved).
    ///
    /// # Safety
    /// The caller holds this queue's bucket lock, and appends `moved` somewhere before it
    /// drops it.
    #[inline(always)] // into the locked take of each table: no frame
    pub(crate) unsafe fn take(
        &mut self,
        key: &Key,
        within: u64,
        mut f: impl FnMut(Ask) -> Step,
        mut sink: impl FnMut(&Node<H>),
        moved: &mut MoveList<H>,
    ) -> usize {
        let mut taken = 0;
        let mut g = self.head;
        'groups: while !g.is_null() {
            // SAFETY: a group of this locked queue.
            let gr = unsafe { &*g };
            // SAFETY: as above. (Read first: the walk may take the group out of the queue.)
            let gl = unsafe { gr.locked() };
            g = gl.next;
            // The masks first: a wake whose mask misses (the common skip of a bucket's other
            // sleepers) then needs no more of the record.
            if gl.masks & within == 0 || key_of(gr) != *key {
                continue;
            }
            // A queued group has a node; the first is its head.
            let mut cur: *const Node<H> = gl.head.cast();
            let mut heads = true;
            loop {
                if heads {
                    // SAFETY: as above.
                    let len = unsafe { *gr.len() } as usize;
                    match f(Ask::Group { len }) {
                        Step::Move => {
                            // SAFETY: `gr` is in this locked queue; `moved` keeps it until
                            // appended.
                            unsafe {
                                self.unlink_group(gr);
                                moved.push_group(gr);
                            }
                            break;
                        }
                        Step::Stop => break 'groups,
                        Step::Skip => break,
                        Step::Take => {}
                    }
                }
                // SAFETY: `cur` is a queued node of this locked queue.
                let node = unsafe { &*cur };
                // SAFETY: as above; the lock guards the node's fields.
                let l = unsafe { node.locked() };
                let next = l.next;
                match f(Ask::Node(l.mask)) {
                    Step::Stop => break 'groups,
                    // The head stays where it was: `next` does not head the group.
                    Step::Skip => heads = false,
                    Step::Take => {
                        prefetch_page_ahead(cur);
                        // SAFETY: `node` is in this queue, lock held.
                        unsafe { self.leave(node) };
                        taken += 1;
                        sink(node);
                    }
                    Step::Move => {
                        prefetch_page_ahead(cur);
                        // SAFETY: `node` is in this queue, lock held; `moved` is appended (the
                        // node given a group) before the unlock.
                        unsafe {
                            self.unlink(node);
                            moved.push_node(node);
                        }
                    }
                }
                // (Taken or moved, the head's place passes to `next`, if any.)
                if next.is_null() {
                    break;
                }
                cur = next;
            }
        }
        taken
    }

    /// Every group, for migration by a resize: taken out oldest first, with its key.
    ///
    /// # Safety
    /// The caller holds this queue's bucket lock and adopts each group elsewhere ([`adopt`])
    /// before unlocking.
    ///
    /// [`adopt`]: Queue::adopt
    pub(crate) unsafe fn drain(&mut self, mut sink: impl FnMut(Detached, Key)) {
        while let Some(g) = NonNull::new(self.head.cast_mut()) {
            // SAFETY: the head group of this locked queue.
            unsafe { self.unlink_group(g.as_ref()) };
            // SAFETY: as above.
            let key = key_of(unsafe { g.as_ref() });
            sink(Detached { group: g }, key);
        }
    }

    /// Append a group taken out of another queue whole, under `key`, with `bucket` (which owns
    /// this queue) as where it is now.
    ///
    /// # Safety
    /// The caller holds this queue's lock and the lock of the queue `d` came from.
    pub(crate) unsafe fn adopt(&mut self, d: Detached, key: Key, bucket: &H) {
        // SAFETY: `d` is out of every queue and ours to place; both locks are held.
        unsafe {
            let g = d.group.as_ref();
            g.place(key.words(), ptr::from_ref(bucket).cast());
            self.link(g);
        }
    }
}
/// A page: how far ahead of a taken node a queue walk prefetches, and what the node pool's
/// chunks start on (`node_pool.rs`).
pub(crate) const PAGE: usize = 4096;

/// Start the CPU on the address one page above `node` — the node it will most likely take a
/// page's worth of nodes later — so that the page walk a cold TLB needs there is done before
/// the walk gets there. Threads' nodes sit side by side in the node pool, in the order the
/// threads first waited, which is mostly the order they queue (`node_pool.rs`); the CPU's own
/// prefetcher follows such a walk but stops at each page. A hint only (`primitive::prefetch`):
/// one that turns out useless costs a line of cache.
#[inline(always)]
fn prefetch_page_ahead<H>(node: *const Node<H>) {
    prefetch((node as usize).wrapping_add(PAGE) as *const u8);
}

/// Nodes a waker has dequeued, to unpark once the bucket lock is dropped (the kernel's wake_q).
pub(crate) struct WakeList<H> {
    head: *const Node<H>,
    tail: *const Node<H>,
    len: usize,
}

/// The most distinct home bells one wake looks at to ring: a key's nodes have one home per
/// table they were first queued in, and an automatic table doubles as the threads arrive, so
/// eight homes cover the waiters of a key in a process that grew from 16 slots to 4,096 (about
/// a thousand threads) at once. A node of a home past these gets a wake of its own.
const HOMES: usize = 8;

impl<H> WakeList<H> {
    pub(crate) fn new() -> WakeList<H> {
        WakeList { head: ptr::null(), tail: ptr::null(), len: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Mark a just-taken node `Woken` and chain it.
    ///
    /// # Safety
    /// The caller just took `node` out of a queue whose lock it still holds.
    pub(crate) unsafe fn push(&mut self, node: &Node<H>) {
        // SAFETY: the lock is held; the node is ours to mark until we unpark it.
        let l = unsafe { node.locked() };
        l.state = NodeState::Woken;
        // SAFETY: a queued node's home bell is set and lives in a bucket of the domain.
        unsafe { (*l.bell).homed_left() };
        // SAFETY: the node's thread cannot end its episode before our unpark: its parker lives.
        unsafe { (*node.parker).expect_unpark() };
        // (The node is in no queue now: its `next` is ours to chain it by.)
        l.next = ptr::null();
        if self.tail.is_null() {
            self.head = node;
        } else {
            // SAFETY: `tail` was pushed here and is Woken, awaiting our unpark: alive.
            unsafe { (*self.tail).locked().next = node };
        }
        self.tail = node;
        self.len += 1;
    }

    /// Unpark every node, oldest first. Call with no bucket lock held.
    ///
    /// The kernel wakes are batched into one ring of each home bell that is worth it
    /// ([`Self::worthy_homes`]): the ring wakes every thread asleep on that bell, and those we
    /// did not take sleep again (`parker::Bell`). Nodes of any other home get a wake of their
    /// own. (Until the eighty-ninth session only the first node's home could be rung: after an
    /// automatic table grew as 128 threads arrived, their nodes had several homes, and the first
    /// wake of them all made one ring and 118 kernel wakes of one thread each, against five
    /// rings and three single wakes now; `tests/preload/wake_after_growth.c`, BENCHMARKS.md.)
    #[inline(never)] // only a wake that took nodes calls it (`wake_all`): kept out of the wakes' frames
    #[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
    pub(crate) fn unpark_all(mut self) {
        let mut batch = WakeBatch::new();
        // (One node is never worth a ring.)
        if self.len >= 2 {
            self.worthy_homes(|bell| batch.may_ring(bell));
        }
        let mut cur = std::mem::replace(&mut self.head, ptr::null());
        while !cur.is_null() {
            // SAFETY:
            // - a Woken node stays alive until its thread receives our unpark, which has not
            //   happened yet for `cur`;
            // - nobody else writes `next` or `bell` of a Woken node (it is in no queue).
            let (next, handle, node_home): (*const Node<H>, UnparkHandle, *const Bell) = unsafe {
                let node = &*cur;
                (node.locked().next, (*node.parker).handle(), node.locked().bell)
            };
            batch.unpark(handle, node_home); // `cur` may be freed from here on
            cur = next;
        }
        batch.finish();
    }

    /// Each home bell worth ringing (`Bell::worth_ringing`), once: among the first [`HOMES`]
    /// distinct homes of the nodes taken, in queue order, each whose nodes taken here are at
    /// least two and no fewer than its nodes still queued anywhere. (Out of line, and asked only
    /// by a wake of two or more: a wake of one node, the common one, makes no second walk.)
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
    fn worthy_homes<'d>(&self, mut worthy: impl FnMut(&'d Bell)) {
        // (Each home with the count of its nodes taken; the first `known` are in use.)
        let mut homes = [(ptr::null::<Bell>(), 0usize); HOMES];
        let mut known = 0;
        let mut cur = self.head;
        while !cur.is_null() {
            // SAFETY: as in `unpark_all` (no node has been unparked yet).
            let (next, home) = unsafe {
                let l = (*cur).locked();
                (l.next, l.bell)
            };
            match homes[..known].iter_mut().find(|h| ptr::eq(h.0, home)) {
                Some(h) => h.1 += 1,
                None if known < HOMES => {
                    homes[known] = (home, 1);
                    known += 1;
                }
                None => {}
            }
            cur = next;
        }
        for &(home, taken) in &homes[..known] {
            // SAFETY: a home is the bell of a bucket of the domain, which outlives the wake
            // (tables are never freed while their domain lives).
            let bell: &'d Bell = unsafe { &*home };
            if bell.worth_ringing(taken) {
                worthy(bell);
            }
        }
    }
}

/// What a requeue has taken from the source queue, still `Queued`, to append to the target:
/// whole groups first (chained through their own links, out of any queue), then single nodes
/// (chained through their `next`). A walk moves whole groups while its count lasts and single
/// nodes after, so this order is queue order.
pub(crate) struct MoveList<H> {
    groups: *const Group,
    groups_tail: *const Group,
    head: *const Node<H>,
    tail: *const Node<H>,
    len: usize,
}

impl<H: Home> MoveList<H> {
    pub(crate) fn new() -> MoveList<H> {
        MoveList { groups: ptr::null(), groups_tail: ptr::null(), head: ptr::null(), tail: ptr::null(), len: 0 }
    }

    /// Nodes moved, in groups and alone.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Chain a group just taken out of a queue whole.
    ///
    /// # Safety
    /// The caller just took `g` out of a queue whose lock it holds until `append_to`.
    unsafe fn push_group(&mut self, g: &Group) {
        debug_assert!(self.head.is_null(), "whole groups come before single nodes");
        // SAFETY: the group is out of every queue: only we reach it, under the source's lock,
        // and so are the groups chained here before it.
        unsafe {
            self.len += *g.len() as usize;
            chain_group(&mut self.groups, &mut self.groups_tail, g);
        }
    }

    /// Chain a node just taken out of its group.
    ///
    /// # Safety
    /// The caller just took `node` out of a queue whose lock it holds until `append_to`.
    unsafe fn push_node(&mut self, node: &Node<H>) {
        // SAFETY: lock held; the node is in no group, so only we reach it (its `next` is ours
        // to chain it by, until `append_to` queues it in the target).
        unsafe {
            node.locked().next = ptr::null();
            if self.tail.is_null() {
                self.head = node;
            } else {
                (*self.tail).locked().next = node;
            }
        }
        self.tail = node;
        self.len += 1;
    }

    /// Append everything, in order, to `queue` under `key` (masks kept): whole groups with
    /// their key and bucket changed, touching no node, then single nodes.
    ///
    /// # Safety
    /// `queue` belongs to `bucket`, and the caller holds its lock and the source's lock.
    #[inline(always)] // into the requeue's accept
    pub(crate) unsafe fn append_to(mut self, queue: &mut Queue<H>, key: Key, bucket: &H) {
        let mut g = std::mem::replace(&mut self.groups, ptr::null());
        while let Some(d) = NonNull::new(g.cast_mut()) {
            // SAFETY: chained groups are out of every queue, ours until adopted; both locks held.
            unsafe {
                g = d.as_ref().locked().next;
                queue.adopt(Detached { group: d }, key, bucket);
            }
        }
        let mut cur = std::mem::replace(&mut self.head, ptr::null());
        while !cur.is_null() {
            // SAFETY: taken nodes stay alive (they are still logically Queued: their threads
            // cannot leave without locking a bucket we hold).
            unsafe {
                let node = &*cur;
                cur = node.locked().next;
                let mask = node.locked().mask;
                queue.push_back(node, key, mask, bucket);
            }
        }
    }
}

impl<H> Drop for MoveList<H> {
    fn drop(&mut self) {
        debug_assert!(
            (self.head.is_null() && self.groups.is_null()) || std::thread::panicking(),
            "a MoveList must be appended"
        );
    }
}

impl<H> Drop for WakeList<H> {
    fn drop(&mut self) {
        debug_assert!(self.head.is_null() || std::thread::panicking(), "a WakeList must be unparked");
    }
}

/// The queue on its own. A stand-in home replaces the bucket (this module may not import the
/// table: imports point down), and a `Rig` owns the queues, their homes, the nodes and their
/// parkers, so every pointer a queue or a list keeps points into memory the rig holds;
/// `&mut Rig` stands for the bucket locks (one thread, nothing shared).
#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use crate::deadline::{Clock, Timeout, Timespec};

    /// What a bucket is to the queue: a place with a bell.
    struct Spot {
        bell: Bell,
    }

    impl Home for Spot {
        fn bell(&self) -> &Bell {
            &self.bell
        }
    }

    type TestNode = Node<Spot>;

    const A: Key = Key::private(0x1000);
    const B: Key = Key::private(0x2000);
    const C: Key = Key::private(0x3000);

    std::thread_local! {
        /// Where this test's rig keeps its nodes (one rig per test thread).
        static NODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Node `i` of this test's rig is `nodes[i]`.
    fn index_of(node: &TestNode) -> usize {
        (ptr::from_ref(node) as usize - NODES.get()) / std::mem::size_of::<TestNode>()
    }

    /// Two queues with their homes, and nodes with their parkers (node `i` has index `i`).
    struct Rig {
        queues: [Queue<Spot>; 2],
        homes: Box<[Spot; 2]>,
        nodes: Box<[TestNode]>,
        parkers: Box<[Parker]>,
        /// Node `i` parks on `parkers[owner[i]]`.
        owner: Box<[usize]>,
    }

    impl Rig {
        /// `n` nodes, each with a parker of its own.
        fn new(n: usize) -> Rig {
            Rig::sharing(n, n)
        }

        /// `n` nodes over `p` parkers: node `i` belongs to parker `i % p` (a waitv thread
        /// owns several nodes).
        fn sharing(n: usize, p: usize) -> Rig {
            let parkers: Box<[Parker]> = (0..p).map(|_| Parker::new()).collect();
            let owner: Box<[usize]> = (0..n).map(|i| i % p).collect();
            // The boxes never move their contents, so the nodes' parker pointers stay valid.
            let nodes: Box<[TestNode]> = (0..n).map(|i| Node::new(&parkers[owner[i]]).expect("a record")).collect();
            NODES.set(nodes.as_ptr() as usize);
            let homes = Box::new([Spot { bell: Bell::new() }, Spot { bell: Bell::new() }]);
            Rig { queues: [Queue::new(), Queue::new()], homes, nodes, parkers, owner }
        }

        /// Queue `q`'s groups, head to tail, each as its key and node indices, by the forward
        /// links and without checks.
        fn groups(&self, q: usize) -> Vec<(Key, Vec<usize>)> {
            let mut out = Vec::new();
            let mut g = self.queues[q].head;
            while !g.is_null() && out.len() <= self.nodes.len() {
                // SAFETY:
                // - `g` is linked into a queue of this rig: a live record;
                // - `&self` excludes every writer, and no other `&mut` to it is live.
                let gr = unsafe { &*g };
                let mut nodes = Vec::new();
                // SAFETY: as above.
                let mut cur: *const TestNode = unsafe { gr.locked().head.cast() };
                while !cur.is_null() && nodes.len() <= self.nodes.len() {
                    // SAFETY: `cur` is linked into a group of this rig: one of `self.nodes`.
                    let node = unsafe { &*cur };
                    nodes.push(index_of(node));
                    // SAFETY: as above.
                    cur = unsafe { node.locked().next };
                }
                out.push((key_of(gr), nodes));
                // SAFETY: as above.
                g = unsafe { gr.locked().next };
            }
            out
        }

        /// Indices of queue `q`'s nodes in queue order, after checking every link both ways,
        /// each group's tail, length, key, bucket and one debtor, and that each node is
        /// `Queued` in its group with queue `q`'s home as its bucket.
        fn order(&self, q: usize) -> Vec<usize> {
            let groups = self.groups(q);
            assert!(groups.len() <= self.nodes.len(), "queue {q} has a cycle of groups");
            let (mut prev_g, mut g): (*const Group, *const Group) = (ptr::null(), self.queues[q].head);
            let mut order = Vec::new();
            for (key, nodes) in &groups {
                assert!(nodes.len() <= self.nodes.len(), "a group of queue {q} has a cycle");
                assert!(!nodes.is_empty(), "queue {q} holds an empty group");
                // SAFETY: `g` walks the same list `groups` did; `&self` excludes writers.
                let gr = unsafe { &*g };
                // SAFETY: as above.
                let gl = unsafe { gr.locked() };
                assert_eq!(gl.prev, prev_g, "a group's back link in queue {q}");
                // SAFETY: as above.
                assert_eq!(unsafe { *gr.len() } as usize, nodes.len(), "a group's length in queue {q}");
                assert!(ptr::eq(gr.bucket().cast::<Spot>(), &self.homes[q]), "a group's bucket is queue {q}'s home");
                let mut prev: *const TestNode = ptr::null();
                let mut debtors = 0;
                for &i in nodes {
                    let node = &self.nodes[i];
                    // SAFETY: the node is linked into a group of queue `q`; `&self` excludes
                    // writers.
                    let l = unsafe { node.locked() };
                    // (A group's head has a stale back link: `Locked::prev`.)
                    if !prev.is_null() {
                        assert_eq!(l.prev, prev, "node {i}'s back link in queue {q}");
                    }
                    assert_eq!(l.state, NodeState::Queued, "node {i} in queue {q}");
                    assert!(ptr::eq(node.group.load(Ordering::Relaxed), g), "node {i} points to its group");
                    assert!(ptr::eq(node.bucket_now(), &self.homes[q]), "node {i}'s bucket is queue {q}'s home");
                    debtors += usize::from(l.spare.is_null());
                    assert_eq!(l.spare.is_null(), l.next.is_null(), "node {i}: a group's tail is its debtor");
                    prev = node;
                }
                assert_eq!(gl.tail, prev.cast(), "a group's tail in queue {q}");
                assert_eq!(debtors, 1, "group {key:?} of queue {q} has one debtor");
                order.extend(nodes);
                (prev_g, g) = (g, gl.next);
            }
            assert_eq!(self.queues[q].tail, prev_g, "queue {q}'s tail");
            assert_eq!(self.queues[q].len(), order.len());
            order
        }

        /// `(index, key, mask)` of queue `q`'s nodes in queue order (checked as in `order`).
        fn entries(&self, q: usize) -> Vec<(usize, Key, u64)> {
            self.order(q);
            let mut out = Vec::new();
            for (key, nodes) in self.groups(q) {
                for i in nodes {
                    // SAFETY: the node is linked into queue `q`; `&self` excludes writers.
                    out.push((i, key, unsafe { self.nodes[i].locked() }.mask));
                }
            }
            out
        }

        /// The keys of queue `q`'s groups, head to tail.
        fn keys(&self, q: usize) -> Vec<Key> {
            self.groups(q).into_iter().map(|(k, _)| k).collect()
        }

        fn queue_of(&self, i: usize) -> Option<usize> {
            (0..2).find(|&q| self.groups(q).iter().any(|(_, nodes)| nodes.contains(&i)))
        }

        /// Node `i`'s state, read through `state_of` of the queue it is in (or of queue 0 when
        /// it is in none).
        fn state(&self, i: usize) -> NodeState {
            let q = self.queue_of(i).unwrap_or(0);
            // SAFETY:
            // - `&self` stands for the lock of both queues, and the node is linked into queue
            //   `q`, or into no queue: then it is Idle and owned by this test, or Woken and
            //   awaiting its unpark (or just taken, on its way into a list);
            // - no other thread exists that could write it.
            unsafe { self.queues[q].state_of(&self.nodes[i]) }
        }

        /// Records are conserved: every node in no group owns one, and (`order`) every group
        /// has exactly one debtor.
        fn check_records(&self) {
            for q in 0..2 {
                self.order(q);
            }
            for i in 0..self.nodes.len() {
                if self.queue_of(i).is_none() {
                    // SAFETY: a node in no queue is this test's alone.
                    assert!(!unsafe { self.nodes[i].locked() }.spare.is_null(), "node {i} owns a record");
                    assert!(self.nodes[i].group.load(Ordering::Relaxed).is_null(), "node {i} is in no group");
                }
            }
        }

        /// Queue node `i` at the tail of queue `q` under `key` and `mask`.
        fn push(&mut self, q: usize, i: usize, key: Key, mask: u64) {
            assert_eq!(self.queue_of(i), None, "node {i} is already queued");
            assert_ne!(self.state(i), NodeState::Woken, "node {i} awaits its unpark");
            // SAFETY:
            // - node `i` is in no queue and not Woken (checked): Idle and owned by this test,
            //   or Queued and just taken out of a queue of this rig (as a requeue does);
            // - `homes[q]` is the home of queue `q`, and `&mut self` is its lock;
            // - the node stays alive while queued: the rig owns it, and `Drop` empties the
            //   queues before anything of the rig is freed.
            unsafe { self.queues[q].push_back(&self.nodes[i], key, mask, &self.homes[q]) }
        }

        /// Node `i`'s own thread takes it out of queue `q` (timeout, interruption).
        fn cancel(&mut self, q: usize, i: usize) {
            assert_eq!(self.queue_of(i), Some(q), "node {i} is not in queue {q}");
            // SAFETY: node `i` is Queued in queue `q` (checked); `&mut self` is its lock.
            unsafe { self.queues[q].cancel(&self.nodes[i]) }
        }

        /// `Queue::take` of `key` on queue `q` with a pick of nodes by mask that moves nothing,
        /// every taken node handed on to `sink`; the indices taken, in the order `sink` saw.
        fn take(
            &mut self,
            q: usize,
            key: Key,
            mut pick: impl FnMut(u64) -> Step,
            sink: impl FnMut(&TestNode),
        ) -> Vec<usize> {
            let mut list = MoveList::new();
            let taken = self.take_moving(
                q,
                key,
                !0,
                |ask| match ask {
                    Ask::Node(mask) => pick(mask),
                    Ask::Group { .. } => Step::Take,
                },
                sink,
                &mut list,
            );
            assert_eq!(list.len(), 0, "this pick moves nothing");
            taken
        }

        /// `Queue::take` of `key` on queue `q` for a pick that skips nodes whose mask misses
        /// `within`: taken nodes handed on to `sink`, moved ones into `list`; the indices
        /// taken, in the order `sink` saw them.
        fn take_moving(
            &mut self,
            q: usize,
            key: Key,
            within: u64,
            pick: impl FnMut(Ask) -> Step,
            mut sink: impl FnMut(&TestNode),
            list: &mut MoveList<Spot>,
        ) -> Vec<usize> {
            let mut taken = Vec::new();
            // SAFETY: `&mut self` is queue `q`'s lock; the tests append `list` before they let
            // go of the rig.
            let n = unsafe {
                self.queues[q].take(
                    &key,
                    within,
                    pick,
                    |node| {
                        taken.push(index_of(node));
                        sink(node);
                    },
                    list,
                )
            };
            assert_eq!(n, taken.len(), "take counts what it hands over");
            taken
        }

        /// The wake path end to end: take from queue `q` what `pick` says of `key`'s nodes into
        /// a wake list, unpark it, check each taken node's parker got exactly one unpark per
        /// node, then reclaim the nodes and end their parkers' episodes. The indices taken,
        /// oldest first.
        fn wake(&mut self, q: usize, key: Key, pick: impl FnMut(u64) -> Step) -> Vec<usize> {
            let mut list = WakeList::new();
            // SAFETY: each node was just taken from queue `q`, whose lock `take` still holds.
            let taken = self.take(q, key, pick, |node| unsafe { list.push(node) });
            assert_eq!(list.len(), taken.len());
            assert_eq!(chain(&list), taken, "the wake list keeps the order taken");
            list.unpark_all();
            for &i in &taken {
                let owed = taken.iter().filter(|&&j| self.owner[j] == self.owner[i]).count();
                assert_eq!(self.unparks(i), owed as u32, "one unpark per taken node of parker {}", self.owner[i]);
            }
            for &i in &taken {
                self.reclaim(i);
            }
            for &i in &taken {
                self.end_episode(i);
            }
            self.check_records();
            taken
        }

        /// Unparks node `i`'s parker received this episode: the highest count a park with a
        /// timeout long passed still reaches.
        fn unparks(&self, i: usize) -> u32 {
            let past = Timeout::new(Clock::Monotonic, Timespec::ZERO);
            let parker = &self.parkers[self.owner[i]];
            (1..).take_while(|&need| parker.sleep(need, Some(&past), None, &[]).is_ok()).count() as u32
        }

        /// `Woken → Idle` once the unpark has arrived.
        fn reclaim(&mut self, i: usize) {
            assert_eq!(self.state(i), NodeState::Woken, "node {i}");
            assert!(self.unparks(i) >= 1, "node {i} is reclaimed only after its unpark");
            // SAFETY:
            // - the node is Woken, so in no queue, and its waker's list has been unparked
            //   (its parker counted the unpark, checked above);
            // - no other thread exists that could still reach it.
            unsafe { self.nodes[i].reclaim() };
        }

        /// End the episode of node `i`'s parker, once none of its nodes awaits an unpark.
        fn end_episode(&mut self, i: usize) {
            let p = self.owner[i];
            let waiting = (0..self.nodes.len()).filter(|&j| self.owner[j] == p && self.state(j) == NodeState::Woken);
            assert_eq!(waiting.count(), 0, "parker {p} still owes a reclaim");
            self.parkers[p].reset();
        }

        /// Drain queue `from` into queue `to` as a resize migrates a bucket; the groups the
        /// drain handed over, as key and length, in order.
        fn drain_into(&mut self, from: usize, to: usize) -> Vec<(Key, usize)> {
            assert_ne!(from, to, "a drain into its own queue would never end");
            let mut seen = Vec::new();
            let [q0, q1] = &mut self.queues;
            let (src, dst) = if from == 0 { (q0, q1) } else { (q1, q0) };
            let home = &self.homes[to];
            // SAFETY:
            // - `&mut self` is the lock of both queues;
            // - every drained group is adopted (into `dst`, with `to`'s home) before the
            //   drain returns; the nodes are the rig's and outlive their time queued.
            unsafe {
                src.drain(|group, key| {
                    seen.push((key, group.len()));
                    dst.adopt(group, key, home);
                })
            };
            seen
        }

        /// A requeue that moves (and wakes nothing): up to `moves` of `key`'s nodes of queue
        /// `from`, whole groups where they fit, appended to queue `to` under `target`.
        fn move_into(&mut self, from: usize, key: Key, moves: usize, to: usize, target: Key) {
            let mut list = MoveList::new();
            self.take_moving(from, key, !0, requeue(0, moves), |_| unreachable!(), &mut list);
            self.append(list, to, target);
        }

        /// Append a move list to queue `q` under `key`.
        fn append(&mut self, list: MoveList<Spot>, q: usize, key: Key) {
            // SAFETY: `homes[q]` owns queue `q`; `&mut self` is the lock of the target and of
            // the queue the list was taken from (both are this rig's).
            unsafe { list.append_to(&mut self.queues[q], key, &self.homes[q]) };
            self.check_records();
        }

        /// Queued nodes whose home is queue `q`'s, wherever they are now (`Bell::homed`).
        fn homed(&self, q: usize) -> u32 {
            self.homes[q].bell.homed()
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            // The lifetime rule: no node may go while a queue links it. Take out what a test
            // left queued (its waiters' own exit path), so no queue points at freed nodes.
            for q in 0..2 {
                for (_, nodes) in self.groups(q) {
                    for i in nodes {
                        // SAFETY: node `i` is linked into queue `q` (just walked); `&mut self`
                        // is its lock.
                        unsafe { self.queues[q].cancel(&self.nodes[i]) };
                    }
                }
            }
            if !std::thread::panicking() {
                self.check_records();
                for i in 0..self.nodes.len() {
                    assert_eq!(self.state(i), NodeState::Idle, "node {i} must be reclaimed before it goes");
                }
            }
        }
    }

    /// The indices chained in a wake list, first to last.
    fn chain(list: &WakeList<Spot>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = list.head;
        while !cur.is_null() {
            // SAFETY: `cur` was pushed onto the list and is Woken, awaiting the list's unpark:
            // alive, and only this thread touches it.
            let node = unsafe { &*cur };
            out.push(index_of(node));
            // SAFETY: as above.
            cur = unsafe { node.locked().next };
        }
        out
    }

    /// A move list's whole groups (their node indices) and single nodes, first to last.
    fn moves(list: &MoveList<Spot>) -> (Vec<Vec<usize>>, Vec<usize>) {
        let mut groups = Vec::new();
        let mut g = list.groups;
        while !g.is_null() {
            // SAFETY: chained groups are out of every queue, reachable only through the list.
            let gr = unsafe { &*g };
            let mut nodes = Vec::new();
            // SAFETY: as above; the group's nodes are alive (still logically Queued).
            let mut cur: *const TestNode = unsafe { gr.locked().head.cast() };
            while !cur.is_null() {
                // SAFETY: as above.
                let node = unsafe { &*cur };
                nodes.push(index_of(node));
                // SAFETY: as above.
                cur = unsafe { node.locked().next };
            }
            groups.push(nodes);
            // SAFETY: as above.
            g = unsafe { gr.locked().next };
        }
        let mut single = Vec::new();
        let mut cur = list.head;
        while !cur.is_null() {
            // SAFETY: `cur` was taken into the list and is still logically Queued: alive, and
            // only this thread touches it.
            let node = unsafe { &*cur };
            // SAFETY: as above.
            assert_eq!(unsafe { node.locked() }.state, NodeState::Queued, "a moving node stays Queued");
            single.push(index_of(node));
            // SAFETY: as above.
            cur = unsafe { node.locked().next };
        }
        assert_eq!(list.len(), groups.iter().map(Vec::len).sum::<usize>() + single.len());
        (groups, single)
    }

    fn every(_: u64) -> Step {
        Step::Take
    }

    /// The pick of a wake: up to `n` nodes, then stop.
    fn up_to(n: usize) -> impl FnMut(u64) -> Step {
        let mut left = n;
        move |_| match left {
            0 => Step::Stop,
            _ => {
                left -= 1;
                Step::Take
            }
        }
    }

    /// The pick of a requeue: wake `wake` nodes, then move `moves`, whole groups where they
    /// fit, then stop.
    fn requeue(wake: usize, moves: usize) -> impl FnMut(Ask) -> Step {
        let (mut wake, mut moves) = (wake, moves);
        move |ask| match ask {
            Ask::Group { len } if wake == 0 && moves >= len => {
                moves -= len;
                Step::Move
            }
            Ask::Group { .. } if wake == 0 && moves == 0 => Step::Stop,
            Ask::Group { .. } => Step::Take,
            Ask::Node(_) if wake > 0 => {
                wake -= 1;
                Step::Take
            }
            Ask::Node(_) if moves > 0 => {
                moves -= 1;
                Step::Move
            }
            Ask::Node(_) => Step::Stop,
        }
    }

    fn never(_: u64) -> Step {
        panic!("the pick is never asked about a key with no waiters")
    }

    #[test]
    fn push_back_groups_by_key_in_fifo_order_and_records_the_home() {
        let mut rig = Rig::new(4);
        assert_eq!(rig.state(0), NodeState::Idle);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.order(0), [0]);
        assert_eq!(rig.queues[0].head, rig.queues[0].tail, "one group is head and tail");
        rig.push(0, 1, B, 2);
        rig.push(0, 2, A, u64::MAX);
        rig.push(0, 3, C, 8);
        assert_eq!(rig.entries(0), [(0, A, 1), (2, A, u64::MAX), (1, B, 2), (3, C, 8)]);
        assert_eq!(rig.keys(0), [A, B, C], "a new waiter joins its key's group");
        assert!((0..4).all(|i| rig.state(i) == NodeState::Queued));
        assert_eq!((rig.homed(0), rig.homed(1)), (4, 0));
        assert_eq!(rig.order(1), []);
        rig.check_records();
    }

    #[test]
    fn an_empty_queue_has_nothing_to_take_or_drain() {
        let mut rig = Rig::new(1);
        assert_eq!(rig.queues[0].len(), 0);
        assert!(rig.queues[0].head.is_null() && rig.queues[0].tail.is_null());
        assert_eq!(rig.take(0, A, never, |_| unreachable!()), []);
        assert_eq!(rig.drain_into(0, 1), []);
        assert_eq!((rig.order(0), rig.order(1)), (vec![], vec![]));
        let mut list = WakeList::new();
        // SAFETY: the pick is never called (the queue is empty), so nothing reaches `list`.
        assert_eq!(rig.take(0, A, never, |node| unsafe { list.push(node) }), []);
        assert_eq!(list.len(), 0);
        list.unpark_all();
    }

    #[test]
    fn len_counts_the_nodes() {
        let mut rig = Rig::new(3);
        assert_eq!(rig.queues[0].len(), 0);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.queues[0].len(), 1);
        rig.push(0, 1, A, 1);
        rig.push(0, 2, B, 1);
        assert_eq!(rig.queues[0].len(), 3);
        rig.cancel(0, 1);
        assert_eq!(rig.queues[0].len(), 2);
        assert_eq!(rig.wake(0, B, every), [2]);
        assert_eq!(rig.queues[0].len(), 1);
        rig.cancel(0, 0);
        assert_eq!(rig.queues[0].len(), 0);
    }

    #[test]
    fn cancel_the_only_node_empties_the_queue() {
        let mut rig = Rig::new(1);
        rig.push(0, 0, A, 1);
        rig.cancel(0, 0);
        assert_eq!(rig.order(0), []);
        assert!(rig.queues[0].head.is_null() && rig.queues[0].tail.is_null());
        assert_eq!(rig.state(0), NodeState::Idle);
        assert_eq!(rig.homed(0), 0, "the node left its home");
        rig.check_records();
        // The queue and the node are both usable again.
        rig.push(0, 0, B, 2);
        assert_eq!(rig.entries(0), [(0, B, 2)]);
        assert_eq!(rig.homed(0), 1);
    }

    #[test]
    fn cancel_from_head_middle_and_tail_keeps_the_links_and_the_records() {
        let mut rig = Rig::new(5);
        for i in 0..5 {
            rig.push(0, i, A, 1);
        }
        rig.cancel(0, 0); // the head, and the group's debtor
        assert_eq!(rig.order(0), [1, 2, 3, 4]);
        rig.check_records();
        rig.cancel(0, 2); // the middle
        assert_eq!(rig.order(0), [1, 3, 4]);
        rig.cancel(0, 4); // the tail
        assert_eq!(rig.order(0), [1, 3]);
        assert!([0, 2, 4].iter().all(|&i| rig.state(i) == NodeState::Idle));
        assert_eq!(rig.homed(0), 2);
        rig.check_records();
        // The tail moved back correctly: a push lands after node 3.
        rig.push(0, 4, A, 2);
        assert_eq!(rig.order(0), [1, 3, 4]);
        rig.push(0, 0, B, 1);
        assert_eq!(rig.entries(0), [(1, A, 1), (3, A, 1), (4, A, 2), (0, B, 1)]);
    }

    #[test]
    fn a_cancelled_node_is_homed_where_it_queues_next() {
        let mut rig = Rig::new(2);
        rig.push(0, 0, A, 1);
        rig.push(0, 1, A, 1);
        rig.cancel(0, 0);
        rig.push(1, 0, A, 1); // `Idle → Queued` again, in the other queue
        assert_eq!((rig.order(0), rig.order(1)), (vec![1], vec![0]));
        assert_eq!((rig.homed(0), rig.homed(1)), (1, 1));
    }

    #[test]
    fn take_by_key_keeps_the_others_in_order() {
        let mut rig = Rig::new(5);
        for (i, k) in [A, B, A, C, A].into_iter().enumerate() {
            rig.push(0, i, k, 1);
        }
        assert_eq!(rig.wake(0, A, every), [0, 2, 4]);
        assert_eq!(rig.entries(0), [(1, B, 1), (3, C, 1)]);
        assert_eq!(rig.homed(0), 2);
    }

    #[test]
    fn take_by_mask() {
        let mut rig = Rig::new(4);
        for (i, m) in [0b001, 0b010, 0b011, 0b100].into_iter().enumerate() {
            rig.push(0, i, A, m);
        }
        let pick = |m: u64| if m & 0b010 != 0 { Step::Take } else { Step::Skip };
        assert_eq!(rig.wake(0, A, pick), [1, 2]);
        assert_eq!(rig.entries(0), [(0, A, 0b001), (3, A, 0b100)]);
    }

    #[test]
    fn take_follows_take_skip_and_stop() {
        let mut rig = Rig::new(7);
        for i in 0..6 {
            rig.push(0, i, A, 1 << i);
        }
        rig.push(0, 6, B, 1);
        let script = [Step::Skip, Step::Take, Step::Skip, Step::Take, Step::Stop];
        let mut asked = Vec::new();
        let pick = |m: u64| {
            asked.push(m);
            script[asked.len() - 1]
        };
        assert_eq!(rig.wake(0, A, pick), [1, 3]);
        assert_eq!(asked, [1, 2, 4, 8, 16], "the walk ends at the Stop, in queue order");
        assert_eq!(rig.order(0), [0, 2, 4, 5, 6]);
    }

    #[test]
    fn take_stop_at_the_head_takes_nothing() {
        let mut rig = Rig::new(2);
        rig.push(0, 0, A, 1);
        rig.push(0, 1, A, 1);
        let mut asked = 0;
        let pick = |_| {
            asked += 1;
            Step::Stop
        };
        assert_eq!(rig.wake(0, A, pick), []);
        assert_eq!(asked, 1);
        assert_eq!(rig.order(0), [0, 1]);
    }

    #[test]
    fn take_at_most_n() {
        let mut rig = Rig::new(5);
        for (i, k) in [A, B, A, A, A].into_iter().enumerate() {
            rig.push(0, i, k, 1);
        }
        assert_eq!(rig.wake(0, A, up_to(2)), [0, 2]);
        assert_eq!(rig.order(0), [3, 4, 1]);
        assert_eq!(rig.wake(0, A, up_to(10)), [3, 4], "n beyond the matches takes them all");
        assert_eq!(rig.order(0), [1]);
        assert_eq!(rig.wake(0, B, up_to(0)), [], "n = 0 takes nothing");
        assert_eq!(rig.order(0), [1]);
    }

    #[test]
    fn take_all_matching_empties_the_queue() {
        let mut rig = Rig::new(4);
        for i in 0..4 {
            rig.push(0, i, A, 1);
        }
        assert_eq!(rig.wake(0, A, every), [0, 1, 2, 3]);
        assert_eq!(rig.order(0), []);
        assert!(rig.queues[0].head.is_null() && rig.queues[0].tail.is_null());
        assert_eq!(rig.homed(0), 0);
        // Reclaimed nodes queue again, homed again.
        rig.push(0, 2, B, 1);
        rig.push(0, 0, B, 1);
        assert_eq!(rig.order(0), [2, 0]);
        assert_eq!(rig.homed(0), 2);
    }

    #[test]
    fn a_key_without_waiters_asks_nothing() {
        let mut rig = Rig::new(3);
        for i in 0..3 {
            rig.push(0, i, A, 1);
        }
        assert_eq!(rig.wake(0, B, never), []);
        assert_eq!(rig.entries(0), [(0, A, 1), (1, A, 1), (2, A, 1)]);
        assert_eq!(rig.homed(0), 3);
    }

    #[test]
    fn take_the_only_node_then_the_tail() {
        let mut rig = Rig::new(3);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.wake(0, A, every), [0]);
        assert_eq!(rig.order(0), []);
        rig.push(0, 1, A, 1);
        rig.push(0, 2, B, 1);
        assert_eq!(rig.wake(0, B, every), [2]);
        rig.push(0, 0, C, 1); // lands after node 1's group: the tail moved back
        assert_eq!(rig.entries(0), [(1, A, 1), (0, C, 1)]);
    }

    #[test]
    fn the_debt_follows_the_tail() {
        let mut rig = Rig::new(4);
        for i in 0..4 {
            rig.push(0, i, A, 1); // each join hands the debt to the newcomer (checked in `order`)
            rig.check_records();
        }
        rig.cancel(0, 3); // the tail leaves: node 2 takes the debt on
        rig.check_records();
        rig.cancel(0, 1); // a middle node leaves: nothing to settle
        rig.check_records();
        assert_eq!(rig.wake(0, A, up_to(1)), [0], "the head leaves: nothing to settle");
        assert_eq!(rig.wake(0, A, up_to(1)), [2], "the last node takes the group's record");
        assert_eq!(rig.order(0), []);
    }

    #[test]
    fn state_of_follows_the_transitions() {
        let mut rig = Rig::new(1);
        assert_eq!(rig.state(0), NodeState::Idle);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.state(0), NodeState::Queued);
        let mut list = WakeList::new();
        // SAFETY: the node was just taken from queue 0, whose lock `take` holds.
        rig.take(0, A, every, |node| unsafe { list.push(node) });
        assert_eq!(rig.state(0), NodeState::Woken);
        assert!(rig.nodes[0].whereabouts().is_none(), "a taken node is in no group");
        list.unpark_all();
        assert_eq!(rig.state(0), NodeState::Woken, "woken until its own thread reclaims it");
        rig.reclaim(0);
        assert_eq!(rig.state(0), NodeState::Idle);
        rig.end_episode(0);
        rig.push(1, 0, A, 1);
        assert_eq!(rig.state(0), NodeState::Queued);
        rig.cancel(1, 0);
        assert_eq!(rig.state(0), NodeState::Idle);
    }

    #[test]
    fn whereabouts_and_still_in_name_the_group_and_its_bucket() {
        let mut rig = Rig::new(2);
        rig.push(0, 0, A, 1);
        rig.push(1, 1, B, 1);
        let (g0, k0) = rig.nodes[0].whereabouts().expect("queued");
        let (g1, k1) = rig.nodes[1].whereabouts().expect("queued");
        assert_eq!((k0, k1), (A, B));
        assert!(rig.nodes[0].still_in(g0, &rig.homes[0]));
        assert!(!rig.nodes[0].still_in(g0, &rig.homes[1]), "not in the other bucket");
        assert!(!rig.nodes[0].still_in(g1, &rig.homes[1]), "not in the other group");
        // A whole move keeps the node's group and changes the group's key and bucket.
        rig.move_into(0, A, 1, 1, C);
        let (g, k) = rig.nodes[0].whereabouts().expect("queued");
        assert_eq!((g, k), (g0, C));
        assert!(rig.nodes[0].still_in(g0, &rig.homes[1]));
        assert!(!rig.nodes[0].still_in(g0, &rig.homes[0]));
    }

    #[test]
    fn drain_hands_over_every_group_in_order() {
        let mut rig = Rig::new(5);
        rig.push(1, 4, C, 16);
        for (i, k) in [A, B, A, C].into_iter().enumerate() {
            rig.push(0, i, k, 1 << i);
        }
        let seen = rig.drain_into(0, 1);
        assert_eq!(seen, [(A, 2), (B, 1), (C, 1)]);
        assert_eq!(rig.order(0), []);
        assert!(rig.queues[0].head.is_null() && rig.queues[0].tail.is_null());
        assert_eq!(rig.entries(1), [(4, C, 16), (0, A, 1), (2, A, 4), (1, B, 2), (3, C, 8)]);
        assert_eq!(rig.keys(1), [C, A, B, C], "drained groups stay groups");
        // Moved nodes keep their home (queue 0's bell), whose count stays with them.
        assert_eq!((rig.homed(0), rig.homed(1)), (4, 1));
        // A C waiter joins C's last group; a wake of C takes both groups in order.
        rig.cancel(1, 3);
        rig.push(1, 3, C, 32);
        assert_eq!(rig.wake(1, C, every), [4, 3]);
        for i in [2, 0, 1] {
            rig.cancel(1, i);
        }
        assert_eq!((rig.homed(0), rig.homed(1)), (0, 0));
    }

    /// The home bells a wake of `list` may ring, in the order it would.
    fn worthy<H>(list: &WakeList<H>) -> Vec<*const Bell> {
        let mut bells = Vec::new();
        list.worthy_homes(|b| bells.push(ptr::from_ref(b)));
        bells
    }

    #[test]
    fn wake_list_unparks_each_node_once_in_fifo_order() {
        let mut rig = Rig::new(4);
        for i in 0..4 {
            rig.push(0, i, A, 1);
        }
        let mut list = WakeList::new();
        // SAFETY: each node was just taken from queue 0, whose lock `take` holds.
        let taken = rig.take(0, A, every, |node| unsafe { list.push(node) });
        assert_eq!(taken, [0, 1, 2, 3]);
        assert_eq!((list.len(), chain(&list)), (4, taken.clone()));
        assert_eq!(worthy(&list), [ptr::from_ref(&rig.homes[0].bell)], "four of the home's four taken: ring it");
        for i in 0..4 {
            assert_eq!(rig.state(i), NodeState::Woken);
            assert_eq!(rig.unparks(i), 0, "no unpark before unpark_all");
        }
        assert_eq!(rig.homed(0), 0, "woken nodes left their home");
        list.unpark_all();
        for i in 0..4 {
            assert_eq!(rig.unparks(i), 1, "node {i}'s parker got exactly its unpark");
            rig.reclaim(i);
            rig.end_episode(i);
            assert_eq!(rig.unparks(i), 0, "a new episode starts at zero");
        }
    }

    /// A wake that took nodes of two homes may ring each home's bell that is worth it: at least
    /// two of its nodes taken, and no more of them left queued anywhere than were taken.
    #[test]
    fn a_wake_may_ring_each_worthy_home() {
        let home = |rig: &Rig, q: usize| ptr::from_ref(&rig.homes[q].bell);
        // Two homes, each emptied: both bells.
        let mut rig = Rig::new(4);
        rig.push(0, 0, A, 1);
        rig.push(1, 1, B, 1);
        rig.push(0, 2, A, 1);
        rig.push(1, 3, B, 1);
        let mut list = WakeList::new();
        // SAFETY: each node was just taken from queue 0 or 1, whose lock `take` holds.
        let taken = [
            rig.take(1, B, every, |node| unsafe { list.push(node) }),
            rig.take(0, A, every, |node| unsafe { list.push(node) }),
        ];
        assert_eq!(taken, [vec![1, 3], vec![0, 2]]);
        assert_eq!(worthy(&list), [home(&rig, 1), home(&rig, 0)], "in queue order");
        list.unpark_all();
        for i in 0..4 {
            assert_eq!(rig.unparks(i), 1, "node {i}");
            rig.reclaim(i);
            rig.end_episode(i);
        }
        // Queue 1's home keeps three queued for the two taken: only queue 0's bell; the three
        // taken later ring it.
        let mut rig = Rig::new(7);
        for (q, i) in [(0, 0), (0, 1), (1, 2), (1, 3), (1, 4), (1, 5), (1, 6)] {
            rig.push(q, i, if q == 0 { A } else { B }, 1);
        }
        let mut list = WakeList::new();
        // SAFETY: as above.
        let taken = [
            rig.take(0, A, every, |node| unsafe { list.push(node) }),
            rig.take(1, B, up_to(2), |node| unsafe { list.push(node) }),
        ];
        assert_eq!(taken, [vec![0, 1], vec![2, 3]]);
        assert_eq!(worthy(&list), [home(&rig, 0)]);
        let mut rest = WakeList::new();
        // SAFETY: as above.
        assert_eq!(rig.take(1, B, every, |node| unsafe { rest.push(node) }), [4, 5, 6]);
        assert_eq!(worthy(&rest), [home(&rig, 1)]);
        list.unpark_all();
        rest.unpark_all();
        for i in 0..7 {
            assert_eq!(rig.unparks(i), 1, "node {i}");
            rig.reclaim(i);
            rig.end_episode(i);
        }
    }

    #[test]
    fn wake_list_unparks_a_shared_parker_once_per_node_from_any_home() {
        // A waitv thread: three nodes on one parker, in two queues; a fourth thread apart.
        let mut rig = Rig::sharing(4, 3);
        assert_eq!(rig.owner[..], [0, 1, 2, 0]);
        rig.push(0, 0, A, 1);
        rig.push(0, 1, A, 1);
        rig.push(1, 3, B, 1);
        rig.push(0, 2, A, 1);
        let mut list = WakeList::new();
        // SAFETY: each node was just taken from queue 0 or 1, whose lock `take` holds.
        let first = rig.take(1, B, every, |node| unsafe { list.push(node) });
        // SAFETY: as above.
        let second = rig.take(0, A, up_to(2), |node| unsafe { list.push(node) });
        assert_eq!((first, second), (vec![3], vec![0, 1]));
        assert_eq!(chain(&list), [3, 0, 1]);
        // Queue 1's home: one node taken, not worth a ring; queue 0's: two taken, one left.
        assert_eq!(worthy(&list), [ptr::from_ref(&rig.homes[0].bell)]);
        list.unpark_all();
        assert_eq!(rig.unparks(0), 2, "nodes 0 and 3 share a parker: two unparks");
        assert_eq!(rig.unparks(1), 1);
        assert_eq!(rig.unparks(2), 0, "node 2 is still queued");
        for i in [3, 0, 1] {
            rig.reclaim(i);
        }
        for i in [3, 1] {
            rig.end_episode(i);
        }
        assert_eq!(rig.order(0), [2]);
    }

    #[test]
    fn a_node_is_one_cache_line_and_a_record_another() {
        use std::mem::{align_of, offset_of, size_of};
        assert_eq!((size_of::<Node<Spot>>(), align_of::<Node<Spot>>()), (64, 64));
        assert_eq!(offset_of!(Node<Spot>, group), 0);
        assert_eq!((size_of::<Group>(), align_of::<Group>()), (64, 64));
    }

    #[test]
    fn a_requeue_moves_whole_groups_touching_no_node() {
        let mut rig = Rig::new(6);
        for (i, k) in [A, B, A, A].into_iter().enumerate() {
            rig.push(0, i, k, 1 << i);
        }
        rig.push(1, 4, C, 16);
        let mut list = MoveList::new();
        assert_eq!(rig.take_moving(0, A, !0, requeue(0, 10), |_| unreachable!(), &mut list), []);
        assert_eq!(moves(&list), (vec![vec![0, 2, 3]], vec![]), "one group, whole");
        assert!([0, 2, 3].iter().all(|&i| rig.state(i) == NodeState::Queued), "moving nodes stay Queued");
        rig.append(list, 1, C);
        assert_eq!(rig.entries(1), [(4, C, 16), (0, C, 1), (2, C, 4), (3, C, 8)], "keys replaced, masks kept");
        assert_eq!(rig.keys(1), [C, C], "the moved group stays a group, behind C's own");
        assert_eq!(rig.entries(0), [(1, B, 2)]);
        // A moved node keeps its first home.
        assert_eq!((rig.homed(0), rig.homed(1)), (4, 1));
        // A new C waiter joins the last C group; a wake of C takes every group in order.
        rig.push(1, 5, C, 32);
        assert_eq!(rig.wake(1, C, up_to(3)), [4, 0, 2]);
        assert_eq!(rig.entries(1), [(3, C, 8), (5, C, 32)]);
    }

    #[test]
    fn a_requeue_wakes_then_moves_the_rest_whole() {
        let mut rig = Rig::new(4);
        for i in 0..4 {
            rig.push(0, i, A, 1);
        }
        let (mut woken, mut list) = (WakeList::new(), MoveList::new());
        // SAFETY: the node was just taken from queue 0, whose lock `take_moving` holds.
        let taken = rig.take_moving(0, A, !0, requeue(1, 10), |node| unsafe { woken.push(node) }, &mut list);
        assert_eq!(taken, [0]);
        assert_eq!(moves(&list), (vec![vec![1, 2, 3]], vec![]), "after the wake, the group moves whole");
        rig.append(list, 1, B);
        assert_eq!(rig.entries(1), [(1, B, 1), (2, B, 1), (3, B, 1)]);
        woken.unpark_all();
        rig.reclaim(0);
        rig.end_episode(0);
        rig.check_records();
    }

    #[test]
    fn a_requeue_short_of_a_group_moves_single_nodes() {
        let mut rig = Rig::new(6);
        for i in 0..3 {
            rig.push(0, i, A, 1);
        }
        rig.push(0, 3, B, 1);
        rig.push(1, 4, A, 1);
        rig.push(1, 5, C, 1);
        let mut list = MoveList::new();
        rig.take_moving(0, A, !0, requeue(0, 2), |_| unreachable!(), &mut list);
        assert_eq!(moves(&list), (vec![], vec![0, 1]));
        assert!(
            rig.nodes[0].whereabouts().is_some() && rig.nodes[1].whereabouts().is_some(),
            "a node on its way to another group is never taken for woken by its own thread"
        );
        assert_eq!(rig.entries(0), [(2, A, 1), (3, B, 1)]);
        rig.append(list, 1, A);
        assert_eq!(
            rig.entries(1),
            [(4, A, 1), (0, A, 1), (1, A, 1), (5, C, 1)],
            "single nodes join the key's last group"
        );
        assert_eq!(rig.keys(1), [A, C]);
    }

    #[test]
    fn a_requeue_moves_groups_whole_then_nodes_of_the_last() {
        // Two groups of A in queue 0 (the second moved in whole before), then a requeue of
        // three: the first group whole, one node of the second.
        let mut rig = Rig::new(5);
        rig.push(0, 0, A, 1);
        rig.push(0, 1, A, 1);
        rig.push(1, 2, B, 1);
        rig.push(1, 3, B, 1);
        rig.move_into(1, B, 2, 0, A);
        assert_eq!(rig.keys(0), [A, A]);
        let mut list = MoveList::new();
        rig.take_moving(0, A, !0, requeue(0, 3), |_| unreachable!(), &mut list);
        assert_eq!(moves(&list), (vec![vec![0, 1]], vec![2]));
        rig.push(1, 4, C, 1);
        rig.append(list, 1, C);
        assert_eq!(rig.entries(1), [(4, C, 1), (0, C, 1), (1, C, 1), (2, C, 1)]);
        assert_eq!(rig.keys(1), [C, C]);
        assert_eq!(rig.entries(0), [(3, A, 1)]);
    }

    #[test]
    fn a_move_into_the_queue_it_came_from() {
        // A requeue whose two keys share a bucket: the moved nodes go to the tail.
        let mut rig = Rig::new(4);
        for (i, k) in [A, B, A, B].into_iter().enumerate() {
            rig.push(0, i, k, 1);
        }
        rig.move_into(0, A, 10, 0, C);
        assert_eq!(rig.entries(0), [(1, B, 1), (3, B, 1), (0, C, 1), (2, C, 1)]);
        assert_eq!(rig.homed(0), 4);
        // And of a key onto itself: the order stays.
        rig.move_into(0, B, 10, 0, B);
        assert_eq!(rig.entries(0), [(0, C, 1), (2, C, 1), (1, B, 1), (3, B, 1)]);
    }

    #[test]
    fn a_group_whose_masks_miss_is_passed_over_unseen() {
        let mut rig = Rig::new(4);
        rig.push(0, 0, A, 0b001);
        rig.push(0, 1, A, 0b001);
        rig.push(0, 2, B, 0b010);
        let unseen = |_: Ask| -> Step { panic!("nothing of a group whose masks miss is looked at") };
        assert_eq!(rig.take_moving(0, A, 0b010, unseen, |_| unreachable!(), &mut MoveList::new()), []);
        assert_eq!(rig.order(0), [0, 1, 2]);
        // A mask that meets the union is asked about the group, then about each node.
        let mut asked = Vec::new();
        let pick = |ask| {
            asked.push(ask);
            match ask {
                Ask::Group { .. } => Step::Take,
                Ask::Node(_) => Step::Skip,
            }
        };
        assert_eq!(rig.take_moving(0, A, 0b011, pick, |_| unreachable!(), &mut MoveList::new()), []);
        assert_eq!(asked, [Ask::Group { len: 2 }, Ask::Node(0b001), Ask::Node(0b001)]);
        // The union only grows while the group lives: node 1 leaves, its bit stays.
        rig.cancel(0, 1);
        rig.push(0, 3, A, 0b100);
        // SAFETY: `&rig` stands for the lock; the head group is A's.
        let masks = unsafe { (*rig.queues[0].head).locked().masks };
        assert_eq!(masks, 0b101);
    }

    #[test]
    fn an_empty_move_list_appends_nothing() {
        let mut rig = Rig::new(1);
        rig.push(1, 0, A, 1);
        let list = MoveList::new();
        assert_eq!(list.len(), 0);
        rig.append(list, 1, C);
        assert_eq!(rig.entries(1), [(0, A, 1)]);
    }

    /// A queue model for [`random_operations_keep_each_keys_fifo_order`]: per queue, every
    /// queued node as `(index, key, mask)` in the order it joined (per key, the queue's order).
    #[derive(Default)]
    struct Model {
        queues: [Vec<(usize, Key, u64)>; 2],
        /// The queue each queued node was queued in first (its home: `Bell::homed`).
        home: Vec<Option<usize>>,
    }

    impl Model {
        /// Queue `q`'s nodes of `key`, oldest first, as `(index, mask)`.
        fn of(&self, q: usize, key: Key) -> Vec<(usize, u64)> {
            self.queues[q].iter().filter(|e| e.1 == key).map(|&(i, _, m)| (i, m)).collect()
        }

        /// Take out of queue `q` the nodes of `key` that `pick` says of (in order): `Some(true)`
        /// to take, `Some(false)` to leave, `None` to stop.
        fn take(&mut self, q: usize, key: Key, mut pick: impl FnMut(u64) -> Option<bool>) -> Vec<(usize, u64)> {
            let mut out = Vec::new();
            let mut kept = Vec::new();
            let mut stopped = false;
            for e in std::mem::take(&mut self.queues[q]) {
                if e.1 == key && !stopped {
                    match pick(e.2) {
                        Some(true) => {
                            out.push((e.0, e.2));
                            continue;
                        }
                        Some(false) => {}
                        None => stopped = true,
                    }
                }
                kept.push(e);
            }
            self.queues[q] = kept;
            out
        }
    }

    /// Unpark the nodes a take put on `list` (`taken`), reclaim them and end their parkers'
    /// episodes; the model forgets their homes.
    fn wake_up(rig: &mut Rig, list: WakeList<Spot>, taken: &[usize], model: &mut Model) {
        list.unpark_all();
        for &i in taken {
            rig.reclaim(i);
            model.home[i] = None;
        }
        for &i in taken {
            rig.end_episode(i);
        }
    }

    /// Seeded, reproducible operations (xorshift64*).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
        }
    }

    /// Every operation a bucket's queue sees, at random — queue, cancel, wake by count and mask
    /// (passing over groups whose masks miss), requeue (waking some, moving some, whole groups
    /// where they fit, to either queue and any key), and a resize's drain — checked after each
    /// step against a model that keeps each key's waiters in FIFO order: the same nodes taken in
    /// the same order, each key's order in both queues, every link and record (`check_records`),
    /// and each home's count of its nodes.
    #[test]
    fn random_operations_keep_each_keys_fifo_order() {
        const KEYS: [Key; 3] = [A, B, C];
        const MASKS: [u64; 4] = [0b01, 0b10, 0b11, u64::MAX];
        const NODES: usize = 10;
        for seed in 1..=24u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut rig = Rig::sharing(NODES, if seed % 2 == 0 { NODES } else { 4 });
            let mut model = Model { home: vec![None; NODES], ..Model::default() };
            for step in 0..1500 {
                let ctx = format!("seed {seed}, step {step}");
                let queued: Vec<(usize, usize)> =
                    (0..2).flat_map(|q| model.queues[q].iter().map(move |e| (q, e.0))).collect();
                match rng.below(8) {
                    0..=2 => {
                        let idle: Vec<usize> = (0..NODES).filter(|&i| model.home[i].is_none()).collect();
                        if idle.is_empty() {
                            continue;
                        }
                        let (i, q) = (idle[rng.below(idle.len())], rng.below(2));
                        let (key, mask) = (KEYS[rng.below(3)], MASKS[rng.below(4)]);
                        rig.push(q, i, key, mask);
                        model.queues[q].push((i, key, mask));
                        model.home[i] = Some(q);
                    }
                    3 => {
                        if queued.is_empty() {
                            continue;
                        }
                        let (q, i) = queued[rng.below(queued.len())];
                        rig.cancel(q, i);
                        model.queues[q].retain(|e| e.0 != i);
                        model.home[i] = None;
                    }
                    4 | 5 => {
                        let (q, key, n, within) = (rng.below(2), KEYS[rng.below(3)], rng.below(4), MASKS[rng.below(4)]);
                        let mut left = n;
                        let want = model.take(q, key, |m| match (m & within != 0, left) {
                            (_, 0) => None,
                            (true, _) => {
                                left -= 1;
                                Some(true)
                            }
                            (false, _) => Some(false),
                        });
                        let mut left = n;
                        let pick = |ask| match ask {
                            Ask::Group { .. } if left == 0 => Step::Stop,
                            Ask::Group { .. } => Step::Take,
                            Ask::Node(_) if left == 0 => Step::Stop,
                            Ask::Node(m) if m & within != 0 => {
                                left -= 1;
                                Step::Take
                            }
                            Ask::Node(_) => Step::Skip,
                        };
                        let mut list = WakeList::new();
                        // SAFETY: each node was just taken from queue `q`, whose lock `&mut rig`
                        // stands for.
                        let taken = rig.take_moving(
                            q,
                            key,
                            within,
                            pick,
                            |node| unsafe { list.push(node) },
                            &mut MoveList::new(),
                        );
                        assert_eq!(taken, want.iter().map(|e| e.0).collect::<Vec<_>>(), "{ctx}: a wake takes");
                        wake_up(&mut rig, list, &taken, &mut model);
                    }
                    6 => {
                        let (from, to) = (rng.below(2), rng.below(2));
                        let (key, target) = (KEYS[rng.below(3)], KEYS[rng.below(3)]);
                        let (wake, moves) = (rng.below(3), rng.below(12));
                        let (mut w, mut m) = (wake, moves);
                        let want = model.take(from, key, |_| match (w, m) {
                            (0, 0) => None,
                            (0, _) => {
                                m -= 1;
                                Some(true)
                            }
                            _ => {
                                w -= 1;
                                Some(true)
                            }
                        });
                        let (woken, moved) = want.split_at(want.len().min(wake));
                        let mut wl = WakeList::new();
                        let mut list = MoveList::new();
                        // SAFETY: as above.
                        let taken = rig.take_moving(
                            from,
                            key,
                            !0,
                            requeue(wake, moves),
                            |node| unsafe { wl.push(node) },
                            &mut list,
                        );
                        assert_eq!(taken, woken.iter().map(|e| e.0).collect::<Vec<_>>(), "{ctx}: a requeue wakes");
                        assert_eq!(list.len(), moved.len(), "{ctx}: a requeue moves");
                        rig.append(list, to, target);
                        model.queues[to].extend(moved.iter().map(|&(i, m)| (i, target, m)));
                        wake_up(&mut rig, wl, &taken, &mut model);
                    }
                    _ => {
                        let from = rng.below(2);
                        rig.drain_into(from, 1 - from);
                        let drained = std::mem::take(&mut model.queues[from]);
                        model.queues[1 - from].extend(drained);
                    }
                }
                rig.check_records();
                for q in 0..2 {
                    for key in KEYS {
                        let got: Vec<(usize, u64)> =
                            rig.entries(q).into_iter().filter(|e| e.1 == key).map(|(i, _, m)| (i, m)).collect();
                        assert_eq!(got, model.of(q, key), "{ctx}: queue {q}, key {key:?}");
                    }
                    let homed = model.home.iter().filter(|&&h| h == Some(q)).count();
                    assert_eq!(rig.homed(q) as usize, homed, "{ctx}: queue {q}'s home counts its nodes");
                }
            }
        }
    }
}
