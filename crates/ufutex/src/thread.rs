//! Per-thread state: the parker, the waitv node vector (grown to the largest vector the thread
//! used), and the domains the thread has waited on (their automatic sizing counts threads).
//! A few hundred bytes plus the waitv nodes.

use crate::parker::{Park, Parker};
use crate::primitive::{AtomicUsize, Ordering};
use crate::table::Node;
use std::cell::{RefCell, UnsafeCell};
use std::sync::Arc;

pub(crate) struct ThreadData {
    pub(crate) parker: Parker,
    /// The node of this thread's plain waits, made by the first (see [`ThreadData::plain_node`]).
    plain: UnsafeCell<Option<Plain>>,
    waitv_nodes: UnsafeCell<Vec<Node>>,
    /// Thread counters of the domains this thread has waited on; decremented on exit.
    domains: RefCell<Vec<Arc<AtomicUsize>>>,
}

impl ThreadData {
    fn new() -> ThreadData {
        ThreadData {
            parker: Parker::new(),
            plain: UnsafeCell::new(None),
            waitv_nodes: UnsafeCell::new(Vec::new()),
            domains: RefCell::new(Vec::new()),
        }
    }

    /// The node of this thread's plain waits: idle between episodes, reused by each (an
    /// episode ends with `Node::reclaim`), made by the first (the parker's address is final
    /// by then). In the process-wide pool (`node_pool`), beside the other threads' nodes; in
    /// the thread's own memory under loom, or if the pool cannot grow.
    ///
    /// # Safety
    /// As [`ThreadData::waitv_nodes`]: the thread is between episodes.
    pub(crate) unsafe fn plain_node(&self) -> &Node {
        // SAFETY: between episodes only this thread touches the cell (contract); once made, the
        // node stays where it is for the life of the `ThreadData`.
        let plain = unsafe { &mut *self.plain.get() };
        match plain.get_or_insert_with(|| Plain::new(&self.parker)) {
            #[cfg(not(ufutex_loom))]
            Plain::Pooled(slot) => slot.node(),
            Plain::Own(node) => node,
        }
    }

    /// Count this thread as a user of the domain whose counter is `threads`; returns the new
    /// count the first time, `None` after.
    pub(crate) fn register(&self, threads: &Arc<AtomicUsize>) -> Option<usize> {
        let mut domains = self.domains.borrow_mut();
        if domains.iter().any(|d| Arc::ptr_eq(d, threads)) {
            return None;
        }
        // Forget domains that were dropped (we hold the last reference to their counter), so
        // a long-lived thread that waits on many short-lived domains does not accumulate them.
        domains.retain(|d| Arc::strong_count(d) > 1);
        domains.push(threads.clone());
        // Relaxed: a sizing hint; the resize it may trigger is serialised by the domain's lock.
        Some(threads.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// `n` waiter nodes for a waitv, node `i` for entry `i`; `None` if memory for them cannot be
    /// had (the C ABI's `ENOMEM`).
    ///
    /// # Safety
    /// No node of this thread is in use (queued, or woken and awaiting its unpark): the
    /// thread is between episodes.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn waitv_nodes(&self, n: usize) -> Option<&[Node]> {
        // SAFETY: between episodes nothing else references the vector (contract), so growing
        // it (which may move nodes) is sound, and the thread is its only user.
        let v = unsafe { &mut *self.waitv_nodes.get() };
        v.try_reserve(n.saturating_sub(v.len())).ok()?;
        while v.len() < n {
            v.push(Node::new(&self.parker)?); // (within the capacity just reserved)
        }
        Some(&v[..n])
    }
}

/// Where a thread's plain-wait node is.
enum Plain {
    #[cfg(not(ufutex_loom))]
    Pooled(crate::node_pool::Slot),
    Own(Box<Node>),
}

impl Plain {
    /// A node for the thread of `parker` (in place in its `ThreadData`: its address is stable
    /// for the node's life).
    fn new(parker: &Parker) -> Plain {
        #[cfg(not(ufutex_loom))]
        if let Some(slot) = crate::node_pool::Slot::take(parker) {
            return Plain::Pooled(slot);
        }
        // A record's memory is as vital as the box's: out of it, abort as `Box::new` does.
        let node = Node::new(parker).unwrap_or_else(|| std::alloc::handle_alloc_error(crate::group::LAYOUT));
        Plain::Own(Box::new(node))
    }
}

impl Drop for ThreadData {
    fn drop(&mut self) {
        for d in self.domains.get_mut().drain(..) {
            d.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Run `f` with this thread's data. A thread whose thread-local storage is already torn down
/// (a wait inside another TLS destructor) gets a temporary one on the stack: it lives through
/// the whole operation, which is all an episode needs.
pub(crate) fn with_thread<R>(f: impl FnOnce(&ThreadData) -> R) -> R {
    #[cfg(not(ufutex_loom))]
    std::thread_local! {
        static THREAD: ThreadData = ThreadData::new();
    }
    // Under loom, loom's thread-locals: one ThreadData per model thread, so an unpark that
    // leaked from one episode into the next would be seen by the models.
    #[cfg(ufutex_loom)]
    loom::thread_local! {
        static THREAD: ThreadData = ThreadData::new();
    }
    let mut f = Some(f);
    if let Ok(r) = THREAD.try_with(|t| (f.take().expect("called once"))(t)) {
        return r;
    }
    (f.take().expect("not called by try_with"))(&ThreadData::new())
}
