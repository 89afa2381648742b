//! Where the threads' plain-wait nodes live: side by side in a few process-wide chunks, not
//! each on its own thread's stack.
//!
//! A requeue (and a wake of many) walks the sleepers' nodes one after another. On thread
//! stacks every node is on a page of its own, so a walk that finds its caches cold (the
//! requeuer slept, as in perf's `futex requeue`) takes a TLB miss per node — in a virtual
//! machine a two-dimensional page walk — on top of the cache miss: ~1 µs a node here. Nodes in
//! one chunk share pages (32 to a page).
//!
//! A slot is a thread's for the thread's life ([`Slot`]): it writes a fresh node into it when it
//! takes it, and gives it back when it exits, between episodes (no waker references an idle
//! node). Chunks are never freed, so a slot's address stays valid for the process.
//!
//! The pool's lock is only ever tried, never waited for: a child forked while another thread
//! held it would wait forever. A thread that finds it busy keeps its node in its own memory
//! instead (`thread.rs`), and a slot that cannot be given back is left unused.

use crate::parker::Parker;
use crate::table::Node;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::Mutex;

/// Nodes per chunk: 8 KiB.
const CHUNK: usize = 64;

type Cell = UnsafeCell<MaybeUninit<Node>>;

struct Pool {
    /// How many chunks there are (each leaked: never freed).
    chunks: usize,
    /// The newest chunk, whose slots `newest[used..]` were never handed out.
    newest: Option<&'static [Cell; CHUNK]>,
    used: usize,
    /// Slots given back, reused first (most recently freed first: still warm).
    free: Vec<&'static Cell>,
}

// SAFETY: the pool only hands out and takes back slot references; a slot's contents are touched
// only by the thread that holds it (or under the bucket locks, as any node).
unsafe impl Send for Pool {}

static POOL: Mutex<Pool> = Mutex::new(Pool { chunks: 0, newest: None, used: CHUNK, free: Vec::new() });

/// One thread's plain-wait node, in the pool; given back on drop.
pub(crate) struct Slot {
    cell: &'static Cell,
}

impl Slot {
    /// A slot holding a fresh idle node for `parker`'s thread; `None` if memory for a new chunk
    /// cannot be had or the pool stays busy (the caller then keeps its node elsewhere).
    pub(crate) fn take(parker: &Parker) -> Option<Slot> {
        let cell = {
            let mut pool = locked()?;
            match pool.free.pop() {
                Some(cell) => cell,
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
                    cell
                }
            }
        };
        // SAFETY: the slot is ours alone (taken from the pool under its lock; its previous
        // holder gave it back between episodes, so no other thread references its node).
        unsafe { (*cell.get()).write(Node::new(parker, 0)) };
        Some(Slot { cell })
    }

    /// The node.
    pub(crate) fn node(&self) -> &Node {
        // SAFETY: written by `take`, and the slot stays ours until `drop`.
        unsafe { (*self.cell.get()).assume_init_ref() }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mut pool) = locked() {
            // (Capacity reserved when the chunk was made: a push here never allocates.)
            pool.free.push(self.cell);
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

/// A chunk of uninitialised slots, leaked (chunks live as long as the process).
fn new_chunk() -> Option<&'static [Cell; CHUNK]> {
    let layout = std::alloc::Layout::new::<[Cell; CHUNK]>();
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
        drop(held);
        let free = POOL.lock().unwrap().free.len();
        assert!(free >= 3 * CHUNK, "every slot given back ({free} free)");
    }
}
