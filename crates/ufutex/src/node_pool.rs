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
//! Slots given back are handed out again lowest address first ([`Pool::take`]). Threads mostly take
//! their slots in the order they first wait, which is the order their nodes are queued, so a
//! walk of a queue then goes up through memory and the CPU's prefetcher runs ahead of it, as it
//! does in a fresh process. Handed out most recently freed first, the slots of a generation of
//! threads that exited in queue order came back in reverse: perf's `futex requeue` (128 calls
//! of one waiter each) took 25 µs a round after the first against 12–15 µs (BENCHMARKS.md).
//!
//! The pool's lock is only ever tried, never waited for (`brief_lock.rs`): a signal handler
//! that interrupted its holder would wait for its own thread. A thread that finds it busy keeps
//! its node in its own memory instead (`thread.rs`), and a slot that cannot be given back then
//! waits on a lock-free stack beside the pool (`spill.rs`), linked through its idle node's
//! memory, until the pool's next holder takes the stack and marks its slots free: no slot is
//! lost. A child forked while another thread held it starts a new pool ([`forget_holder`]).
//!
//! A thread's first wait may make a chunk, and it may come from a signal handler that
//! interrupted the allocator: chunks are mapped from the kernel (`pages.rs`), and the pool's
//! own books (which slots are free) are a fixed array in it, so nothing here allocates. At most
//! [`MAX_CHUNKS`] chunks are made; past them, threads keep their nodes in their own memory.

use crate::brief_lock::{BriefGuard, BriefLock};
use crate::group::Group;
use crate::parker::Parker;
use crate::spill::{Linked, Spill};
use crate::table::Node;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Slots per chunk: 64 KiB (only the pages of slots handed out are ever touched).
const CHUNK: usize = 512;

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

/// The most chunks the pool makes: 65,536 slots, for as many threads at once.
const MAX_CHUNKS: usize = 128;

/// A chunk and which of its slots are free (given back; bit `i` for slot `i`).
struct Chunk {
    cells: &'static [Cell; CHUNK],
    free: [u64; CHUNK / 64],
}

impl Chunk {
    /// Slot `i` of the chunk, if `cell` is one of its slots.
    fn index_of(&self, cell: &Cell) -> Option<usize> {
        let offset = (cell as *const Cell as usize).wrapping_sub(self.cells.as_ptr() as usize);
        let i = offset / std::mem::size_of::<Cell>();
        (i < CHUNK).then_some(i)
    }

    fn has_free(&self) -> bool {
        self.free.iter().any(|&w| w != 0)
    }
}

struct Pool {
    /// The chunks made, `chunks[..made]`, in the order they were made (each never freed).
    chunks: [Option<Chunk>; MAX_CHUNKS],
    made: usize,
    /// Slots of the newest chunk handed out so far (`newest[..used]`); the rest never were.
    used: usize,
}

impl Pool {
    const fn new() -> Pool {
        Pool { chunks: [const { None }; MAX_CHUNKS], made: 0, used: CHUNK }
    }

    fn made(&mut self) -> impl Iterator<Item = &mut Chunk> {
        self.chunks[..self.made].iter_mut().flatten()
    }

    /// How many slots are free in all the chunks.
    #[cfg(test)]
    fn free(&mut self) -> usize {
        self.made().flat_map(|c| c.free).map(|w| w.count_ones() as usize).sum()
    }

    /// A slot: the lowest given back if any (see the module docs), else the next never handed
    /// out (`true`: its record is unwritten), in a new chunk if need be. `None` if the pool has
    /// made all its chunks, or memory for a new one cannot be had.
    fn take(&mut self) -> Option<(&'static Cell, bool)> {
        if let Some(c) = self.made().filter(|c| c.has_free()).min_by_key(|c| c.cells.as_ptr() as usize) {
            let (w, bits) = c.free.iter_mut().enumerate().find(|(_, bits)| **bits != 0)?;
            let b = bits.trailing_zeros() as usize;
            *bits &= !(1 << b);
            return Some((&c.cells[w * 64 + b], false));
        }
        if self.used == CHUNK {
            if self.made == MAX_CHUNKS {
                return None;
            }
            self.chunks[self.made] = Some(Chunk { cells: new_chunk()?, free: [0; CHUNK / 64] });
            (self.made, self.used) = (self.made + 1, 0);
        }
        let newest = self.chunks[self.made - 1].as_ref()?;
        let cell = &newest.cells[self.used];
        self.used += 1;
        Some((cell, true))
    }

    /// Give back a slot that [`Pool::take`] handed out.
    fn give(&mut self, cell: &'static Cell) {
        let Some((c, i)) = self.made().find_map(|c| c.index_of(cell).map(|i| (c, i))) else {
            return; // not one of ours: never the case, and then left alone
        };
        c.free[i / 64] |= 1 << (i % 64);
    }
}

// SAFETY: the pool only hands out and takes back slot references; a slot's contents are touched
// only by the thread that holds it (or under the bucket locks, as any node).
unsafe impl Send for Pool {}

/// A slot given back, on the stack beside the pool (module docs): the link is in its node's
/// memory, which holds no node while the slot is idle (`Slot`'s drop dropped it).
impl Linked for Cell {
    unsafe fn next(&self) -> *const Cell {
        // SAFETY: the caller owns the idle slot (the contract), so its node's memory is its to
        // read; `set_next` wrote the link there, aligned (a node's alignment is a line).
        unsafe { *self.node.get().cast::<*const Cell>() }
    }

    unsafe fn set_next(&self, next: *const Cell) {
        // SAFETY: as in `next`; `MaybeUninit` memory may hold any bytes.
        unsafe { *self.node.get().cast::<*const Cell>() = next };
    }
}

/// The pool behind its lock, and the slots given back while the lock stayed busy.
struct Shared {
    pool: BriefLock<Pool>,
    spill: Spill<Cell>,
}

impl Shared {
    const fn new() -> Shared {
        Shared { pool: BriefLock::new(Pool::new()), spill: Spill::new() }
    }

    /// The pool, if its lock can be had within a few tries (see the module docs), with every
    /// slot given back meanwhile marked free.
    fn locked(&self) -> Option<BriefGuard<'_, Pool>> {
        let mut pool = self.pool.lock_briefly()?;
        if !self.spill.is_empty() {
            let mut cell = self.spill.take_all();
            while !cell.is_null() {
                // SAFETY: the stack's slots are ours now (taken whole) and never freed.
                let c = unsafe { &*cell };
                // SAFETY: as above.
                cell = unsafe { c.next() };
                pool.give(c);
            }
        }
        Some(pool)
    }

    /// Give back an idle slot: to the pool, or to the stack beside it while the pool is busy.
    fn give(&self, cell: &'static Cell) {
        match self.locked() {
            Some(mut pool) => pool.give(cell),
            // SAFETY: the caller gives the idle slot up (its node dropped, no pointer kept);
            // chunks are never freed.
            None => unsafe { self.spill.push(NonNull::from(cell), cell) },
        }
    }
}

static POOL: Shared = Shared::new();

/// In a forked child's fresh start: a pool that a thread the child does not have held at the
/// fork is given up (its chunks stay where they are; a slot of theirs given back is left
/// alone, `Pool::give`), and a new one starts empty (`brief_lock.rs`). The stack beside it
/// stays, whole (`spill.rs`): its slots are of the old pool's chunks, and left alone so.
pub(crate) fn forget_holder() {
    POOL.pool.forget_holder(Pool::new);
}

/// The pool's lock, held as by a thread in the middle of a take (for the tests).
#[cfg(test)]
pub(crate) fn hold() -> BriefGuard<'static, impl Sized> {
    POOL.pool.lock_briefly().expect("the pool")
}

/// One thread's plain-wait node, in the pool; given back on drop.
pub(crate) struct Slot {
    cell: &'static Cell,
}

impl Slot {
    /// A slot holding a fresh idle node for `parker`'s thread; `None` if memory for a new chunk
    /// or the node's record cannot be had, or the pool stays busy (the caller then keeps its
    /// node elsewhere).
    pub(crate) fn take(parker: &Parker) -> Option<Slot> {
        let (cell, fresh) = locked()?.take()?;
        let node = if fresh {
            // SAFETY: a slot never handed out before: its record is unwritten and nobody else
            // knows of it; once written it is never written again, and never freed (chunks
            // are leaked).
            let record = unsafe { NonNull::from((*cell.record.get()).write(Group::new())) };
            Node::with_spare(parker, record)
        } else if let Some(node) = Node::new(parker) {
            node
        } else {
            POOL.give(cell);
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
        POOL.give(self.cell);
    }
}

/// The pool, if its lock can be had within a few tries (see [`Shared::locked`]).
fn locked() -> Option<BriefGuard<'static, Pool>> {
    POOL.locked()
}

/// A chunk of uninitialised slots, starting on a page, from the kernel (`pages.rs`), never
/// given back (chunks live as long as the process).
fn new_chunk() -> Option<&'static [Cell; CHUNK]> {
    let p = crate::pages::map(std::mem::size_of::<[Cell; CHUNK]>())?.cast::<[Cell; CHUNK]>();
    // SAFETY: fresh memory of the chunk's size, starting on a page (more than `Cell`'s
    // alignment), never unmapped; uninitialised cells are what `UnsafeCell<MaybeUninit<_>>`
    // allows, and nobody else knows of them.
    Some(unsafe { p.as_ref() })
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
        assert_eq!(new_chunk().unwrap().as_ptr() as usize % crate::queue::PAGE, 0, "a chunk starts on a page");
        drop(held);
        let free = POOL.locked().expect("the pool").free();
        assert!(free >= 3 * CHUNK, "every slot given back ({free} free)");
    }

    fn address(cell: &Cell) -> usize {
        cell as *const Cell as usize
    }

    #[test]
    fn slots_given_back_are_handed_out_lowest_first() {
        let mut pool = Pool::new();
        let first: Vec<&Cell> = (0..CHUNK)
            .map(|_| pool.take().unwrap())
            .map(|(c, fresh)| {
                assert!(fresh, "a new pool's slots were never handed out");
                c
            })
            .collect();
        // Given back in an order that is neither the address order nor its reverse.
        for i in (0..CHUNK).map(|i| (i * 37 + 11) % CHUNK) {
            pool.give(first[i]);
        }
        let again: Vec<usize> = (0..CHUNK)
            .map(|_| pool.take().unwrap())
            .map(|(c, fresh)| {
                assert!(!fresh, "a slot given back is not fresh");
                address(c)
            })
            .collect();
        let want: Vec<usize> = first.iter().map(|&c| address(c)).collect();
        assert_eq!(again, want, "every slot once, in address order");
        let (next, fresh) = pool.take().unwrap();
        assert!(fresh && !want.contains(&address(next)), "then a slot of a new chunk");
    }

    #[test]
    fn the_lowest_chunk_with_a_free_slot_goes_first() {
        let mut pool = Pool::new();
        let held: Vec<&Cell> = (0..2 * CHUNK).map(|_| pool.take().unwrap().0).collect();
        let (a, b) = (held[CHUNK - 1], held[CHUNK]);
        let (low, high) = if address(a) < address(b) { (a, b) } else { (b, a) };
        pool.give(high);
        pool.give(low);
        assert_eq!(address(pool.take().unwrap().0), address(low));
        assert_eq!(address(pool.take().unwrap().0), address(high));
        assert!(pool.take().unwrap().1, "no slot left to reuse: a fresh one");
    }

    #[test]
    fn a_full_pool_says_none_and_a_slot_given_back_comes_back() {
        let mut pool = Pool::new();
        let held: Vec<&Cell> = (0..MAX_CHUNKS * CHUNK).map(|_| pool.take().unwrap().0).collect();
        assert!(pool.take().is_none(), "no chunk past the last");
        pool.give(held[CHUNK + 5]);
        assert_eq!(pool.take().map(|(c, fresh)| (address(c), fresh)), Some((address(held[CHUNK + 5]), false)));
        assert!(pool.take().is_none());
    }

    /// A slot given back while the pool's lock is held (by this thread: a signal handler that
    /// interrupted the holder) waits on the stack, and is free again at the next holder's take.
    #[test]
    fn a_slot_given_back_while_the_pool_is_held_is_not_lost() {
        let shared = Shared::new();
        let (a, b) = {
            let mut pool = shared.locked().expect("a free lock");
            (pool.take().unwrap().0, pool.take().unwrap().0)
        };
        let held = shared.pool.lock_briefly().expect("a free lock");
        shared.give(b);
        shared.give(a);
        drop(held);
        assert!(!shared.spill.is_empty(), "both on the stack");
        let mut pool = shared.locked().expect("a free lock");
        assert!(shared.spill.is_empty(), "taken by the next holder");
        assert_eq!(pool.free(), 2);
        assert_eq!(address(pool.take().unwrap().0), address(a), "lowest first, as ever");
        assert_eq!(address(pool.take().unwrap().0), address(b));
    }

    /// Two threads take a slot and give it back as fast as they can (threads that start and
    /// exit at once): however the lock's races go, every slot ever handed out ends free, on
    /// the stack or in the pool.
    #[test]
    fn racing_takes_and_gives_lose_no_slot() {
        const ROUNDS: usize = 100_000;
        let shared = Shared::new();
        let (fresh, lost_takes): (usize, usize) = std::thread::scope(|s| {
            let racers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let (mut fresh, mut lost) = (0, 0);
                        for _ in 0..ROUNDS {
                            let Some((cell, new)) = shared.locked().and_then(|mut p| p.take()) else {
                                lost += 1;
                                continue;
                            };
                            fresh += usize::from(new);
                            shared.give(cell);
                        }
                        (fresh, lost)
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().expect("a racer")).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        });
        eprintln!("{fresh} slots handed out fresh; {lost_takes} takes did not have the lock");
        assert_eq!(shared.locked().expect("a free lock").free(), fresh, "slots lost");
    }

    #[test]
    fn a_cell_that_is_not_the_pools_is_left_alone() {
        let mut pool = Pool::new();
        let (mine, _) = pool.take().unwrap();
        let stranger = &new_chunk().unwrap()[0];
        pool.give(stranger);
        assert_eq!(pool.free(), 0);
        pool.give(mine);
        assert_eq!(pool.take().map(|(c, _)| address(c)), Some(address(mine)));
    }
}
