//! The one intrusive wait queue. Every operation that moves waiters goes through here:
//! push, remove, take matching nodes (for wakes and requeues), and the wake list that carries
//! taken nodes past the bucket unlock.
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

use crate::key::Key;
use crate::parker::{Bell, Park, Parker, UnparkHandle, WakeBatch};
use crate::primitive::{prefetch, AtomicPtr, Ordering};
use std::cell::UnsafeCell;
use std::ptr;

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
    prev: *const Node<H>,
    /// The next node in the queue; after a requeue took the node, the next in its `MoveList`.
    next: *const Node<H>,
    key: Key,
    mask: u64,
    state: NodeState,
    /// The waker's chain of nodes to unpark, used only after `Queued → Woken`.
    wake_next: *const Node<H>,
    /// The bell of the bucket the node was first queued in (`Idle → Queued`), which a plain
    /// wait sleeps on too (`parker::Bell`); a requeue or resize that moves the node keeps it.
    bell: *const Bell,
}

/// One thread waiting on one word.
///
/// Laid out so that what a requeue reads and writes of a node (`bucket`, then the links, key,
/// mask and state) is its first cache line: a requeue walks nodes that sit on other threads'
/// stacks, mostly in another CPU's cache, one miss after another.
#[repr(C, align(64))]
pub(crate) struct Node<H> {
    /// The bucket the node is in now. Changed only with that bucket's lock held (and the new
    /// one's); read without a lock only by the node's own thread, which then locks the bucket
    /// and reads it again to confirm (tables are never freed while their domain lives).
    bucket: AtomicPtr<H>,
    locked: UnsafeCell<Locked<H>>,
    parker: *const Parker,
    /// Position in a waitv vector (0 for a plain wait).
    index: usize,
}

// SAFETY:
// - the `UnsafeCell` fields are only touched under the lock of the bucket holding the node, or
//   by its own thread while it is `Idle` (not reachable from any queue);
// - `parker` points to the owning thread's parker, which outlives every unpark owed to it.
unsafe impl<H> Sync for Node<H> {}
// SAFETY: as for `Sync`: a node is plain data whose shared parts are guarded as above.
unsafe impl<H> Send for Node<H> {}

impl<H> Node<H> {
    pub(crate) fn new(parker: &Parker, index: usize) -> Node<H> {
        Node {
            locked: UnsafeCell::new(Locked {
                prev: ptr::null(),
                next: ptr::null(),
                key: Key::private(0),
                mask: 0,
                state: NodeState::Idle,
                wake_next: ptr::null(),
                bell: ptr::null(),
            }),
            bucket: AtomicPtr::new(ptr::null_mut()),
            parker,
            index,
        }
    }

    pub(crate) fn index(&self) -> usize {
        self.index
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

    /// The bucket the node was last placed in (confirm under that bucket's lock).
    pub(crate) fn bucket_hint(&self) -> *const H {
        // Acquire: pairs with the Release store of a requeue/resize that moved the node, so the
        // bucket it names is initialised.
        self.bucket.load(Ordering::Acquire)
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

/// A FIFO of nodes; lives inside a bucket and is reachable only through its lock guard.
pub(crate) struct Queue<H> {
    head: *const Node<H>,
    tail: *const Node<H>,
}

// SAFETY: the raw pointers are only followed under the bucket lock (see `Node`).
unsafe impl<H> Send for Queue<H> {}

/// What `Queue::take` does with a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Skip,
    Take,
    Stop,
}

impl<H: Home> Queue<H> {
    pub(crate) const fn new() -> Queue<H> {
        Queue { head: ptr::null(), tail: ptr::null() }
    }

    /// Nodes in the queue (a walk; for tests and debug checks).
    pub(crate) fn len(&self) -> usize {
        let (mut n, mut cur) = (0, self.head);
        while !cur.is_null() {
            n += 1;
            // SAFETY: the caller reached this queue through its bucket guard: nodes are alive.
            cur = unsafe { (*cur).locked().next };
        }
        n
    }

    /// Append `node` with `key` and `mask`, recording `bucket` as its home.
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
        l.key = key;
        l.mask = mask;
        l.state = NodeState::Queued;
        l.prev = self.tail;
        l.next = ptr::null();
        if self.tail.is_null() {
            self.head = node;
        } else {
            // SAFETY: `tail` is a queued node of this locked queue, hence alive.
            unsafe { (*self.tail).locked().next = node };
        }
        self.tail = node;
        // Release: the node's new home is published before the lock is dropped; its own thread
        // reads it with Acquire (`bucket_hint`).
        node.bucket.store(ptr::from_ref(bucket).cast_mut(), Ordering::Release);
    }

    /// Unlink `node`, which is queued here.
    ///
    /// # Safety
    /// `node` is in this queue and the caller holds the bucket lock.
    unsafe fn unlink(&mut self, node: &Node<H>) {
        // SAFETY: queued nodes and their neighbours are alive and guarded by the held lock.
        unsafe {
            let l = node.locked();
            debug_assert_eq!(l.state, NodeState::Queued);
            if l.prev.is_null() {
                self.head = l.next;
            } else {
                (*l.prev).locked().next = l.next;
            }
            if l.next.is_null() {
                self.tail = l.prev;
            } else {
                (*l.next).locked().prev = l.prev;
            }
            l.prev = ptr::null();
            l.next = ptr::null();
        }
    }

    /// Whether `node` is still queued (in this queue, whose lock the caller holds).
    ///
    /// # Safety
    /// The caller holds this queue's bucket lock and has confirmed `node` lives in this bucket
    /// (`bucket_hint` read again under the lock), or the node is `Woken` and awaits its unpark.
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
            self.unlink(node);
            let l = node.locked();
            l.state = NodeState::Idle;
            (*l.bell).homed_left();
        }
    }

    /// Walk the queue from the head; `f` sees each node's key and mask and decides. Taken nodes
    /// are unlinked and handed to `sink` in queue order. Returns how many were taken.
    ///
    /// # Safety
    /// The caller holds this queue's bucket lock.
    #[inline(always)] // into the locked take of each table: no frame
    pub(crate) unsafe fn take(
        &mut self,
        mut f: impl FnMut(&Key, u64) -> Step,
        mut sink: impl FnMut(&Node<H>),
    ) -> usize {
        let mut taken = 0;
        let mut cur = self.head;
        while !cur.is_null() {
            // SAFETY: `cur` is a queued node of this locked queue.
            let node = unsafe { &*cur };
            // SAFETY: as above; the lock guards the node's fields.
            let l = unsafe { node.locked() };
            let next = l.next;
            match f(&l.key, l.mask) {
                Step::Stop => break,
                Step::Skip => {}
                Step::Take => {
                    prefetch_page_ahead(cur);
                    // SAFETY: `node` is in this queue, lock held.
                    unsafe { self.unlink(node) };
                    taken += 1;
                    sink(node);
                }
            }
            cur = next;
        }
        taken
    }

    /// Every node, for migration by a resize: unlinked in FIFO order.
    ///
    /// # Safety
    /// The caller holds this queue's bucket lock and re-queues each node before unlocking.
    pub(crate) unsafe fn drain(&mut self, mut sink: impl FnMut(&Node<H>, Key, u64)) {
        // SAFETY: forwarded contract.
        unsafe {
            while !self.head.is_null() {
                let node = &*self.head;
                self.unlink(node);
                let (key, mask) = (node.locked().key, node.locked().mask);
                sink(node, key, mask);
            }
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
    /// The home bell of the first node: the one bell this waker may ring.
    home: *const Bell,
}

impl<H> WakeList<H> {
    pub(crate) fn new() -> WakeList<H> {
        WakeList { head: ptr::null(), tail: ptr::null(), len: 0, home: ptr::null() }
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
        if self.head.is_null() {
            self.home = l.bell;
        }
        l.wake_next = ptr::null();
        if self.tail.is_null() {
            self.head = node;
        } else {
            // SAFETY: `tail` was pushed here and is Woken, awaiting our unpark: alive.
            unsafe { (*self.tail).locked().wake_next = node };
        }
        self.tail = node;
        self.len += 1;
    }

    /// Unpark every node, oldest first. Call with no bucket lock held.
    ///
    /// The kernel wakes are batched into one ring of the first node's home bell when at least
    /// two nodes were taken and no more nodes of that home are still queued anywhere than were
    /// taken (`Bell::worth_ringing`): the ring wakes every thread asleep on that bell, and those
    /// we did not take sleep again (`parker::Bell`). Nodes of another home get a wake of their
    /// own.
    #[inline(never)] // only a wake that took nodes calls it (`wake_all`): kept out of the wakes' frames
    pub(crate) fn unpark_all(mut self) {
        // SAFETY: the home is the bell of a bucket of the domain, which outlives this call.
        let home = unsafe { self.home.as_ref() };
        let bell = home.filter(|b| b.worth_ringing(self.len));
        let mut batch = WakeBatch::new(bell);
        let mut cur = std::mem::replace(&mut self.head, ptr::null());
        while !cur.is_null() {
            // SAFETY:
            // - a Woken node stays alive until its thread receives our unpark, which has not
            //   happened yet for `cur`;
            // - nobody else writes `wake_next` or `bell` of a Woken node.
            let (next, handle, node_home): (*const Node<H>, UnparkHandle, *const Bell) = unsafe {
                let node = &*cur;
                (node.locked().wake_next, (*node.parker).handle(), node.locked().bell)
            };
            batch.unpark(handle, bell.is_some_and(|b| ptr::eq(b, node_home))); // `cur` may be freed from here on
            cur = next;
        }
        batch.finish();
    }
}

/// Nodes a requeue has taken from the source queue, still `Queued`, to append to the target;
/// chained through their `next` (out of any queue, it is free until they are appended).
pub(crate) struct MoveList<H> {
    head: *const Node<H>,
    tail: *const Node<H>,
    len: usize,
}

impl<H: Home> MoveList<H> {
    pub(crate) fn new() -> MoveList<H> {
        MoveList { head: ptr::null(), tail: ptr::null(), len: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Chain a node just taken from a queue.
    ///
    /// # Safety
    /// The caller just took `node` out of a queue whose lock it holds until `append_to`.
    pub(crate) unsafe fn push(&mut self, node: &Node<H>) {
        // SAFETY: lock held; the node is in no queue, so only we reach it (its `next` is ours
        // to chain it by, until `append_to` links it into the target).
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

    /// Append every node, in order, to `queue` under `key` (masks kept).
    ///
    /// # Safety
    /// `queue` belongs to `bucket`, and the caller holds its lock and the source's lock.
    #[inline(always)] // into the requeue's accept
    pub(crate) unsafe fn append_to(mut self, queue: &mut Queue<H>, key: Key, bucket: &H) {
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
        debug_assert!(self.head.is_null() || std::thread::panicking(), "a MoveList must be appended");
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
            let nodes = (0..n).map(|i| Node::new(&parkers[owner[i]], i)).collect();
            let homes = Box::new([Spot { bell: Bell::new() }, Spot { bell: Bell::new() }]);
            Rig { queues: [Queue::new(), Queue::new()], homes, nodes, parkers, owner }
        }

        /// Indices of queue `q`'s nodes from the head by the forward links, without checks.
        fn linked(&self, q: usize) -> Vec<usize> {
            let mut out = Vec::new();
            let mut cur = self.queues[q].head;
            while !cur.is_null() && out.len() <= self.nodes.len() {
                // SAFETY:
                // - `cur` is linked into a queue of this rig, so it is one of `self.nodes`;
                // - `&self` excludes every writer, and no other `&mut` to the node is live.
                let node = unsafe { &*cur };
                out.push(node.index());
                // SAFETY: as above.
                cur = unsafe { node.locked().next };
            }
            out
        }

        /// Indices of queue `q`'s nodes, head to tail, after checking the links both ways,
        /// the tail, `len`, and that each node is `Queued` with queue `q`'s home as its bucket.
        fn order(&self, q: usize) -> Vec<usize> {
            let order = self.linked(q);
            assert!(order.len() <= self.nodes.len(), "queue {q} has a cycle: {order:?}");
            let mut prev: *const TestNode = ptr::null();
            for &i in &order {
                let node = &self.nodes[i];
                // SAFETY: the node is linked into queue `q` of this rig; `&self` excludes writers.
                let l = unsafe { node.locked() };
                assert_eq!(l.prev, prev, "node {i}'s back link in queue {q}");
                assert_eq!(l.state, NodeState::Queued, "node {i} in queue {q}");
                assert!(ptr::eq(node.bucket_hint(), &self.homes[q]), "node {i}'s bucket is queue {q}'s home");
                prev = node;
            }
            assert_eq!(self.queues[q].tail, prev, "queue {q}'s tail");
            assert_eq!(self.queues[q].len(), order.len());
            order
        }

        /// `(index, key, mask)` of queue `q`'s nodes, head to tail (checked as in `order`).
        fn entries(&self, q: usize) -> Vec<(usize, Key, u64)> {
            let order = self.order(q);
            order
                .into_iter()
                .map(|i| {
                    // SAFETY: the node is linked into queue `q`; `&self` excludes writers.
                    let l = unsafe { self.nodes[i].locked() };
                    (i, l.key, l.mask)
                })
                .collect()
        }

        fn queue_of(&self, i: usize) -> Option<usize> {
            (0..2).find(|&q| self.linked(q).contains(&i))
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

        /// Queue node `i` at the tail of queue `q` under `key` and `mask`.
        fn push(&mut self, q: usize, i: usize, key: Key, mask: u64) {
            assert_eq!(self.queue_of(i), None, "node {i} is already queued");
            assert_ne!(self.state(i), NodeState::Woken, "node {i} awaits its unpark");
            // SAFETY:
            // - node `i` is in no queue and not Woken (checked): Idle and owned by this test,
            //   or Queued and just taken out of a queue of this rig (as a drain does);
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

        /// `Queue::take` on queue `q`, every taken node handed on to `sink`; the indices taken,
        /// in the order `sink` saw them.
        fn take(
            &mut self,
            q: usize,
            pick: impl FnMut(&Key, u64) -> Step,
            mut sink: impl FnMut(&TestNode),
        ) -> Vec<usize> {
            let mut taken = Vec::new();
            // SAFETY: `&mut self` is queue `q`'s lock.
            let n = unsafe {
                self.queues[q].take(pick, |node| {
                    taken.push(node.index());
                    sink(node);
                })
            };
            assert_eq!(n, taken.len(), "take counts what it hands over");
            taken
        }

        /// The wake path end to end: take from queue `q` what `pick` says into a wake list,
        /// unpark it, check each taken node's parker got exactly one unpark per node, then
        /// reclaim the nodes and end their parkers' episodes. The indices taken, oldest first.
        fn wake(&mut self, q: usize, pick: impl FnMut(&Key, u64) -> Step) -> Vec<usize> {
            let mut list = WakeList::new();
            // SAFETY: each node was just taken from queue `q`, whose lock `take` still holds.
            let taken = self.take(q, pick, |node| unsafe { list.push(node) });
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
            taken
        }

        /// Unparks node `i`'s parker received this episode: the highest count a park with a
        /// timeout long passed still reaches.
        fn unparks(&self, i: usize) -> u32 {
            let past = Timeout { clock: Clock::Monotonic, at: Timespec::ZERO };
            let parker = &self.parkers[self.owner[i]];
            (1..).take_while(|&need| parker.sleep(need, Some(&past), None, None).is_ok()).count() as u32
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

        /// Drain queue `from` into queue `to` as a resize migrates a bucket; what the drain
        /// handed over, in order.
        fn drain_into(&mut self, from: usize, to: usize) -> Vec<(usize, Key, u64)> {
            assert_ne!(from, to, "a drain into its own queue would never end");
            let mut seen = Vec::new();
            let [q0, q1] = &mut self.queues;
            let (src, dst) = if from == 0 { (q0, q1) } else { (q1, q0) };
            let home = &self.homes[to];
            // SAFETY:
            // - `&mut self` is the lock of both queues;
            // - every drained node is re-queued (into `dst`, with `to`'s home) before the
            //   drain returns; the nodes are the rig's and outlive their time queued.
            unsafe {
                src.drain(|node, key, mask| {
                    seen.push((node.index(), key, mask));
                    dst.push_back(node, key, mask, home);
                })
            };
            seen
        }

        /// Append a move list to queue `q` under `key`.
        fn append(&mut self, list: MoveList<Spot>, q: usize, key: Key) {
            // SAFETY: `homes[q]` owns queue `q`; `&mut self` is the lock of the target and of
            // the queue the list was taken from (both are this rig's).
            unsafe { list.append_to(&mut self.queues[q], key, &self.homes[q]) }
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
                for i in self.linked(q) {
                    // SAFETY: node `i` is linked into queue `q` (just walked); `&mut self` is
                    // its lock.
                    unsafe { self.queues[q].cancel(&self.nodes[i]) };
                }
            }
            if !std::thread::panicking() {
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
            out.push(node.index());
            // SAFETY: as above.
            cur = unsafe { node.locked().wake_next };
        }
        out
    }

    /// The indices chained in a move list, first to last.
    fn moves(list: &MoveList<Spot>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = list.head;
        while !cur.is_null() {
            // SAFETY: `cur` was taken into the list and is still logically Queued: alive, and
            // only this thread touches it.
            let node = unsafe { &*cur };
            out.push(node.index());
            // SAFETY: as above.
            cur = unsafe { node.locked().next };
        }
        out
    }

    fn key_is(want: Key) -> impl FnMut(&Key, u64) -> Step {
        move |k, _| if *k == want { Step::Take } else { Step::Skip }
    }

    /// The pick of a wake: up to `n` nodes on `key`, then stop.
    fn up_to(n: usize, key: Key) -> impl FnMut(&Key, u64) -> Step {
        let mut left = n;
        move |k, _| match (*k == key, left) {
            (_, 0) => Step::Stop,
            (true, _) => {
                left -= 1;
                Step::Take
            }
            (false, _) => Step::Skip,
        }
    }

    fn never(_: &Key, _: u64) -> Step {
        panic!("the pick is never asked about an empty queue")
    }

    #[test]
    fn push_back_appends_in_fifo_order_and_records_the_home() {
        let mut rig = Rig::new(4);
        assert_eq!(rig.state(0), NodeState::Idle);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.order(0), [0]);
        assert_eq!(rig.queues[0].head, rig.queues[0].tail, "one node is head and tail");
        rig.push(0, 1, B, 2);
        rig.push(0, 2, A, u64::MAX);
        rig.push(0, 3, C, 8);
        assert_eq!(rig.entries(0), [(0, A, 1), (1, B, 2), (2, A, u64::MAX), (3, C, 8)]);
        assert!((0..4).all(|i| rig.state(i) == NodeState::Queued));
        assert_eq!((rig.homed(0), rig.homed(1)), (4, 0));
        assert_eq!(rig.order(1), []);
    }

    #[test]
    fn an_empty_queue_has_nothing_to_take_or_drain() {
        let mut rig = Rig::new(1);
        assert_eq!(rig.queues[0].len(), 0);
        assert!(rig.queues[0].head.is_null() && rig.queues[0].tail.is_null());
        assert_eq!(rig.take(0, never, |_| unreachable!()), []);
        assert_eq!(rig.drain_into(0, 1), []);
        assert_eq!((rig.order(0), rig.order(1)), (vec![], vec![]));
        let mut list = WakeList::new();
        // SAFETY: the pick is never called (the queue is empty), so nothing reaches `list`.
        assert_eq!(rig.take(0, never, |node| unsafe { list.push(node) }), []);
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
        assert_eq!(rig.wake(0, key_is(B)), [2]);
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
        // The queue and the node are both usable again.
        rig.push(0, 0, B, 2);
        assert_eq!(rig.entries(0), [(0, B, 2)]);
        assert_eq!(rig.homed(0), 1);
    }

    #[test]
    fn cancel_from_head_middle_and_tail_keeps_the_links() {
        let mut rig = Rig::new(5);
        for i in 0..5 {
            rig.push(0, i, A, 1);
        }
        rig.cancel(0, 0); // the head
        assert_eq!(rig.order(0), [1, 2, 3, 4]);
        rig.cancel(0, 2); // the middle
        assert_eq!(rig.order(0), [1, 3, 4]);
        rig.cancel(0, 4); // the tail
        assert_eq!(rig.order(0), [1, 3]);
        assert!([0, 2, 4].iter().all(|&i| rig.state(i) == NodeState::Idle));
        assert_eq!(rig.homed(0), 2);
        // The tail moved back correctly: a push lands after node 3.
        rig.push(0, 4, B, 1);
        assert_eq!(rig.order(0), [1, 3, 4]);
        rig.push(0, 0, B, 1);
        assert_eq!(rig.entries(0), [(1, A, 1), (3, A, 1), (4, B, 1), (0, B, 1)]);
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
        assert_eq!(rig.wake(0, key_is(A)), [0, 2, 4]);
        assert_eq!(rig.entries(0), [(1, B, 1), (3, C, 1)]);
        assert_eq!(rig.homed(0), 2);
    }

    #[test]
    fn take_by_mask() {
        let mut rig = Rig::new(4);
        for (i, m) in [0b001, 0b010, 0b011, 0b100].into_iter().enumerate() {
            rig.push(0, i, A, m);
        }
        let pick = |_: &Key, m: u64| if m & 0b010 != 0 { Step::Take } else { Step::Skip };
        assert_eq!(rig.wake(0, pick), [1, 2]);
        assert_eq!(rig.entries(0), [(0, A, 0b001), (3, A, 0b100)]);
    }

    #[test]
    fn take_follows_take_skip_and_stop() {
        let mut rig = Rig::new(6);
        for i in 0..6 {
            rig.push(0, i, A, 1 << i);
        }
        let script = [Step::Skip, Step::Take, Step::Skip, Step::Take, Step::Stop];
        let mut asked = Vec::new();
        let pick = |_: &Key, m: u64| {
            asked.push(m);
            script[asked.len() - 1]
        };
        assert_eq!(rig.wake(0, pick), [1, 3]);
        assert_eq!(asked, [1, 2, 4, 8, 16], "the walk ends at the Stop, in queue order");
        assert_eq!(rig.order(0), [0, 2, 4, 5]);
    }

    #[test]
    fn take_stop_at_the_head_takes_nothing() {
        let mut rig = Rig::new(2);
        rig.push(0, 0, A, 1);
        rig.push(0, 1, A, 1);
        let mut asked = 0;
        let pick = |_: &Key, _| {
            asked += 1;
            Step::Stop
        };
        assert_eq!(rig.wake(0, pick), []);
        assert_eq!(asked, 1);
        assert_eq!(rig.order(0), [0, 1]);
    }

    #[test]
    fn take_at_most_n() {
        let mut rig = Rig::new(5);
        for (i, k) in [A, B, A, A, A].into_iter().enumerate() {
            rig.push(0, i, k, 1);
        }
        assert_eq!(rig.wake(0, up_to(2, A)), [0, 2]);
        assert_eq!(rig.order(0), [1, 3, 4]);
        assert_eq!(rig.wake(0, up_to(10, A)), [3, 4], "n beyond the matches takes them all");
        assert_eq!(rig.order(0), [1]);
        assert_eq!(rig.wake(0, up_to(0, B)), [], "n = 0 takes nothing");
        assert_eq!(rig.order(0), [1]);
    }

    #[test]
    fn take_all_matching_empties_the_queue() {
        let mut rig = Rig::new(4);
        for i in 0..4 {
            rig.push(0, i, A, 1);
        }
        assert_eq!(rig.wake(0, key_is(A)), [0, 1, 2, 3]);
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
    fn take_none_matching_changes_nothing() {
        let mut rig = Rig::new(3);
        for i in 0..3 {
            rig.push(0, i, A, 1);
        }
        let mut asked = 0;
        let pick = |k: &Key, _| {
            asked += 1;
            if *k == B {
                Step::Take
            } else {
                Step::Skip
            }
        };
        assert_eq!(rig.wake(0, pick), []);
        assert_eq!(asked, 3, "every node was looked at");
        assert_eq!(rig.entries(0), [(0, A, 1), (1, A, 1), (2, A, 1)]);
        assert_eq!(rig.homed(0), 3);
    }

    #[test]
    fn take_the_only_node_then_the_tail() {
        let mut rig = Rig::new(3);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.wake(0, key_is(A)), [0]);
        assert_eq!(rig.order(0), []);
        rig.push(0, 1, A, 1);
        rig.push(0, 2, B, 1);
        assert_eq!(rig.wake(0, key_is(B)), [2]);
        rig.push(0, 0, C, 1); // lands after node 1: the tail moved back
        assert_eq!(rig.entries(0), [(1, A, 1), (0, C, 1)]);
    }

    #[test]
    fn state_of_follows_the_transitions() {
        let mut rig = Rig::new(1);
        assert_eq!(rig.state(0), NodeState::Idle);
        rig.push(0, 0, A, 1);
        assert_eq!(rig.state(0), NodeState::Queued);
        let mut list = WakeList::new();
        // SAFETY: the node was just taken from queue 0, whose lock `take` holds.
        rig.take(0, key_is(A), |node| unsafe { list.push(node) });
        assert_eq!(rig.state(0), NodeState::Woken);
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
    fn drain_hands_over_every_node_in_order() {
        let mut rig = Rig::new(5);
        rig.push(1, 4, C, 16);
        for (i, k) in [A, B, A, C].into_iter().enumerate() {
            rig.push(0, i, k, 1 << i);
        }
        let seen = rig.drain_into(0, 1);
        assert_eq!(seen, [(0, A, 1), (1, B, 2), (2, A, 4), (3, C, 8)]);
        assert_eq!(rig.order(0), []);
        assert!(rig.queues[0].head.is_null() && rig.queues[0].tail.is_null());
        assert_eq!(rig.entries(1), [(4, C, 16), (0, A, 1), (1, B, 2), (2, A, 4), (3, C, 8)]);
        // Moved nodes keep their home (queue 0's bell), whose count stays with them.
        assert_eq!((rig.homed(0), rig.homed(1)), (4, 1));
        for i in [2, 0, 4, 3, 1] {
            rig.cancel(1, i);
        }
        assert_eq!((rig.homed(0), rig.homed(1)), (0, 0));
    }

    #[test]
    fn wake_list_unparks_each_node_once_in_fifo_order() {
        let mut rig = Rig::new(4);
        for i in 0..4 {
            rig.push(0, i, A, 1);
        }
        let mut list = WakeList::new();
        // SAFETY: each node was just taken from queue 0, whose lock `take` holds.
        let taken = rig.take(0, |_, _| Step::Take, |node| unsafe { list.push(node) });
        assert_eq!(taken, [0, 1, 2, 3]);
        assert_eq!((list.len(), chain(&list)), (4, taken.clone()));
        assert!(ptr::eq(list.home, &rig.homes[0].bell), "the first node's home is the list's");
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
        let first = rig.take(1, key_is(B), |node| unsafe { list.push(node) });
        // SAFETY: as above.
        let second = rig.take(0, up_to(2, A), |node| unsafe { list.push(node) });
        assert_eq!((first, second), (vec![3], vec![0, 1]));
        assert_eq!(chain(&list), [3, 0, 1]);
        assert!(ptr::eq(list.home, &rig.homes[1].bell), "the first node's home is the list's");
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
    fn what_a_requeue_touches_of_a_node_is_its_first_cache_line() {
        use std::mem::{align_of, offset_of};
        assert_eq!(align_of::<Node<Spot>>(), 64);
        assert_eq!(offset_of!(Node<Spot>, bucket), 0);
        let locked = offset_of!(Node<Spot>, locked);
        for end in [
            offset_of!(Locked<Spot>, prev) + 8,
            offset_of!(Locked<Spot>, next) + 8,
            offset_of!(Locked<Spot>, key) + std::mem::size_of::<Key>(),
            offset_of!(Locked<Spot>, mask) + 8,
            offset_of!(Locked<Spot>, state) + 1,
        ] {
            assert!(locked + end <= 64, "a field a requeue touches ends at byte {}", locked + end);
        }
    }

    #[test]
    fn move_list_appends_in_order_under_the_new_key() {
        let mut rig = Rig::new(5);
        for (i, k) in [A, B, A, A].into_iter().enumerate() {
            rig.push(0, i, k, 1 << i);
        }
        rig.push(1, 4, C, 16);
        let mut list = MoveList::new();
        // SAFETY: each node was just taken from queue 0, whose lock (`&mut rig`) is held
        // until the list is appended.
        let taken = rig.take(0, up_to(2, A), |node| unsafe { list.push(node) });
        assert_eq!(taken, [0, 2]);
        assert_eq!((list.len(), moves(&list)), (2, taken));
        assert!([0, 2].iter().all(|&i| rig.state(i) == NodeState::Queued), "moving nodes stay Queued");
        rig.append(list, 1, C);
        assert_eq!(rig.entries(1), [(4, C, 16), (0, C, 1), (2, C, 4)], "keys replaced, masks kept");
        assert_eq!(rig.entries(0), [(1, B, 2), (3, A, 8)]);
        // A moved node keeps its first home.
        assert_eq!((rig.homed(0), rig.homed(1)), (4, 1));
    }

    #[test]
    fn move_list_into_the_queue_it_came_from() {
        // A requeue whose two keys share a bucket: the moved nodes go to the tail.
        let mut rig = Rig::new(4);
        for (i, k) in [A, B, A, B].into_iter().enumerate() {
            rig.push(0, i, k, 1);
        }
        let mut list = MoveList::new();
        // SAFETY: each node was just taken from queue 0, whose lock is held until the append.
        rig.take(0, key_is(A), |node| unsafe { list.push(node) });
        rig.append(list, 0, C);
        assert_eq!(rig.entries(0), [(1, B, 1), (3, B, 1), (0, C, 1), (2, C, 1)]);
        assert_eq!(rig.homed(0), 4);
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
}
