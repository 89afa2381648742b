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
use crate::primitive::{AtomicPtr, Ordering};
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

/// Fields behind the bucket lock.
struct Locked<H> {
    prev: *const Node<H>,
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
pub(crate) struct Node<H> {
    locked: UnsafeCell<Locked<H>>,
    /// The bucket the node is in now. Changed only with that bucket's lock held (and the new
    /// one's); read without a lock only by the node's own thread, which then locks the bucket
    /// and reads it again to confirm (tables are never freed while their domain lives).
    bucket: AtomicPtr<H>,
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
    /// two nodes share that home and no other node of that home is still queued anywhere
    /// (`Bell::homed`): then every thread asleep on that bell is one we wake (`parker::Bell`).
    /// Everyone else gets a wake of their own.
    pub(crate) fn unpark_all(mut self) {
        // SAFETY: the home is the bell of a bucket of the domain, which outlives this call.
        let home = unsafe { self.home.as_ref() };
        let bell = home.filter(|b| self.len >= 2 && b.homed() == 0);
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

/// Nodes a requeue has taken from the source queue, still `Queued`, to append to the target.
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
        // SAFETY: lock held; the node is in no queue, so only we reach it.
        unsafe {
            node.locked().wake_next = ptr::null();
            if self.tail.is_null() {
                self.head = node;
            } else {
                (*self.tail).locked().wake_next = node;
            }
        }
        self.tail = node;
        self.len += 1;
    }

    /// Append every node, in order, to `queue` under `key` (masks kept).
    ///
    /// # Safety
    /// `queue` belongs to `bucket`, and the caller holds its lock and the source's lock.
    pub(crate) unsafe fn append_to(mut self, queue: &mut Queue<H>, key: Key, bucket: &H) {
        let mut cur = std::mem::replace(&mut self.head, ptr::null());
        while !cur.is_null() {
            // SAFETY: taken nodes stay alive (they are still logically Queued: their threads
            // cannot leave without locking a bucket we hold).
            unsafe {
                let node = &*cur;
                cur = node.locked().wake_next;
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
