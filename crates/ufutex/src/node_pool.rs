//! Where the threads' plain-wait nodes live: side by side in a few process-wide chunks, not
//! each on its own thread's stack.
//!
//! A requeue (and a wake of many) walks the sleepers' nodes one after another. On thread
//! stacks every node is on a page of its own, so a walk that finds its caches cold (the
//! requeuer slept, as in perf's `futex requeue`) takes a TLB miss per node — in a virtual
//! machine a two-dimensional page walk — on top of the cache miss: ~1 µs a node here. Nodes in
//! one chunk share pages (32 to a page).
//!
//! A chunk is 64 KiB, 512 nodes, and starts on a page, so a walk of the nodes of a few hundred
//! threads crosses a page every 32 nodes and no chunk boundary. The CPU's prefetcher stops at
//! a page boundary, so each crossing still costs a page walk, 250–500 ns here with cold caches;
//! a walk starts the next one a page early (`queue::prefetch_page_ahead`). In perf's `futex
//! requeue` (128 calls of one waiter each, after a 100 ms sleep) 8 KiB chunks wherever the
//! allocator put them cost 11.5 µs a round, these chunks 10.7 µs, and with the prefetch 9.8 µs
//! (medians of six, BENCHMARKS.md).
//!
//! A slot is a thread's for the thread's life ([`Slot`]): it writes a fresh node into it when it
//! takes it, and gives it back when it exits, between episodes (no waker references an idle
//! node). Chunks are never freed, so a slot's address stays valid for the process.
//!
//! Slots given back are handed out again lowest address first ([`Free`]). Threads mostly take
//! their slots in the order they first wait, which is the order their nodes are queued, so a
//! walk of a queue then goes up through memory and the CPU's prefetcher runs ahead of it, as it
//! does in a fresh process. Handed out most recently freed first, the slots of a generation of
//! threads that exited in queue order came back in reverse: perf's `futex requeue` (128 calls
//! of one waiter each) took 25 µs a round after the first against 12–15 µs (BENCHMARKS.md).
//!
//! The pool's lock is only ever tried, never waited for: a child forked while another thread
//! held it would wait forever. A thread that finds it busy keeps its node in its own memory
//! instead (`thread.rs`), and a slot that cannot be given back is left unused.

use crate::group::Group;
use crate::parker::Parker;
use crate::table::Node;
use std::cell::UnsafeCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, TryReserveError};
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Mutex;

/// Slots per chunk: 64 KiB (only the pages of slots handed out are ever touched).
const CHUNK: usize = 512;

/// The alignment of a chunk: a page.
const CHUNK_ALIGN: usize = crate::queue::PAGE;

/// A slot: a node (one line) and a group record beside it (`group.rs`), which the slot's first
/// node takes as its own. A group is made of the record of the node that starts it, so a walk
/// of a queue finds a group's record on a page it walks anyway: after perf's 100 ms sleep, a
/// record on a page of its own cost a requeue of 128 waiters one at a time ~2 µs more
/// (page walks; BENCHMARKS.md).
#[repr(C)]
struct Cell {
    node: UnsafeCell<MaybeUninit<Node>>,
    /// Written when the slot is first handed out; never written again nor freed after (its
    /// node may give it away and get another back: records are fungible).
    record: UnsafeCell<MaybeUninit<Group>>,
}

const _: () = assert!(std::mem::size_of::<Cell>() == 128);

// SAFETY: a slot's node is touched only by the thread that holds the slot (or under the bucket
// locks, as any node); its record is written once, by the thread that first takes the slot,
// before any other thread can know of it, and is shared as a `Group` (which is `Sync`) after.
unsafe impl Sync for Cell {}

struct Pool {
    /// How many chunks there are (each leaked: never freed).
    chunks: usize,
    /// The newest chunk, whose slots `newest[used..]` were never handed out.
    newest: Option<&'static [Cell; CHUNK]>,
    used: usize,
    /// Slots given back, reused first.
    free: Free,
}

/// Slots given back: a heap that hands out the lowest address first (see the module docs).
struct Free(BinaryHeap<Reverse<usize>>);

impl Free {
    const fn new() -> Free {
        Free(BinaryHeap::new())
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// Room for `more` slots beyond those held, so that [`Free::give`] never allocates.
    fn try_reserve(&mut self, more: usize) -> Result<(), TryReserveError> {
        self.0.try_reserve(more)
    }

    /// The lowest slot given back, if any.
    fn take(&mut self) -> Option<&'static Cell> {
        // SAFETY: every address in the heap was a `&'static Cell` given to `give`; chunks are
        // never freed, so it still names that cell.
        self.0.pop().map(|Reverse(at)| unsafe { &*(at as *const Cell) })
    }

    /// Give back a slot (within the capacity reserved, this does not allocate).
    fn give(&mut self, cell: &'static Cell) {
        self.0.push(Reverse(cell as *const Cell as usize));
    }
}

// SAFETY: the pool only hands out and takes back slot references; a slot's contents are touched
// only by the thread that holds it (or under the bucket locks, as any node).
unsafe impl Send for Pool {}

static POOL: Mutex<Pool> = Mutex::new(Pool { chunks: 0, newest: None, used: CHUNK, free: Free::new() });

/// One thread's plain-wait node, in the pool; given back on drop.
pub(crate) struct Slot {
    cell: &'static Cell,
}

impl Slot {
    /// A slot holding a fresh idle node for `parker`'s thread; `None` if memory for a new chunk
    /// or the node's record cannot be had, or the pool stays busy (the caller then keeps its
    /// node elsewhere).
    pub(crate) fn take(parker: &Parker) -> Option<Slot> {
        let (cell, fresh) = {
            let mut pool = locked()?;
            match pool.free.take() {
                Some(cell) => (cell, false),
                None => {
                    let chunk = match pool.newest {
                        Some(chunk) if pool.used < CHUNK => chunk,
                        _ => {
                            // Room for every slot on the free list, so that giving one back
                            // never allocates (a thread may exit with memory exhausted).
                            let more = (CHUNK * (pool.chunks + 1)).saturating_sub(pool.free.len());
                            pool.free.try_reserve(more).ok()?;
                            let chunk = new_chunk()?;
                            (pool.chunks, pool.newest, pool.used) = (pool.chunks + 1, Some(chunk), 0);
                            chunk
                        }
                    };
                    let cell = &chunk[pool.used];
                    pool.used += 1;
                    (cell, true)
                }
            }
        };
        let node = if fresh {
            // SAFETY: a slot never handed out before: its record is unwritten and nobody else
            // knows of it; once written it is never written again, and never freed (chunks
            // are leaked).
            let record = unsafe { NonNull::from((*cell.record.get()).write(Group::new())) };
            Node::with_spare(parker, record)
        } else if let Some(node) = Node::new(parker) {
            node
        } else {
            if let Some(mut pool) = locked() {
                pool.free.give(cell);
            }
            return None;
        };
        // SAFETY: the slot is ours alone (taken from the pool under its lock; its previous
        // holder gave it back between episodes, so no other thread references its node).
        unsafe { (*cell.node.get()).write(node) };
        Some(Slot { cell })
    }

    /// The node.
    pub(crate) fn node(&self) -> &Node {
        // SAFETY: written by `take`, and the slot stays ours until `drop`.
        unsafe { (*self.cell.node.get()).assume_init_ref() }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: written by `take`; the thread gives the slot back between episodes, so no
        // other thread references the node (and it is dropped once: the slot goes now).
        unsafe { (*self.cell.node.get()).assume_init_drop() };
        if let Some(mut pool) = locked() {
            // (Capacity reserved when the chunk was made: a push here never allocates.)
            pool.free.give(self.cell);
        }
    }
}

/// The pool, if its lock can be had within a few tries (see the module docs).
fn locked() -> Option<std::sync::MutexGuard<'static, Pool>> {
    for _ in 0..64 {
        match POOL.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    None
}

/// A chunk of uninitialised slots, starting on a page, leaked (chunks live as long as the
/// process).
fn new_chunk() -> Option<&'static [Cell; CHUNK]> {
    let layout = std::alloc::Layout::new::<[Cell; CHUNK]>().align_to(CHUNK_ALIGN).ok()?;
    // SAFETY: a non-zero-sized layout; the memory is uninitialised, which `MaybeUninit` cells
    // allow, and `UnsafeCell<MaybeUninit<_>>` has no invariant to break.
    let p = unsafe { std::alloc::alloc(layout) }.cast::<[Cell; CHUNK]>();
    // SAFETY: non-null, allocated for this layout, never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parker::Park;

    #[test]
    fn slots_held_at_once_are_apart_and_given_back() {
        let p = Parker::new();
        let held: Vec<Slot> = (0..3 * CHUNK).map(|_| Slot::take(&p).unwrap()).collect();
        let mut at: Vec<usize> = held.iter().map(|s| s.node() as *const Node as usize).collect();
        at.sort_unstable();
        at.dedup();
        assert_eq!(at.len(), 3 * CHUNK, "no slot handed out twice");
        assert!(at.iter().all(|a| a % 64 == 0), "nodes keep their alignment");
        assert_eq!(new_chunk().unwrap().as_ptr() as usize % CHUNK_ALIGN, 0, "a chunk starts on a page");
        drop(held);
        let free = POOL.lock().unwrap().free.len();
        assert!(free >= 3 * CHUNK, "every slot given back ({free} free)");
    }

    #[test]
    fn slots_given_back_are_handed_out_lowest_first() {
        let chunk = new_chunk().unwrap();
        let mut free = Free::new();
        free.try_reserve(CHUNK).unwrap();
        // Given back in an order that is neither the address order nor its reverse.
        for i in (0..CHUNK).map(|i| (i * 37 + 11) % CHUNK) {
            free.give(&chunk[i]);
        }
        let out: Vec<*const Cell> = std::iter::from_fn(|| free.take()).map(|c| c as *const Cell).collect();
        let want: Vec<*const Cell> = chunk.iter().map(|c| c as *const Cell).collect();
        assert_eq!(out, want, "every slot once, in address order");
        assert!(free.take().is_none());
    }
}
