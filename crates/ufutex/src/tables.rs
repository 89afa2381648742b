//! The engine's table registry: the current wait-queue table of each *slot* (the plain table,
//! and with NUMA one per node), the sizing policy, live resizes, and the retired tables kept
//! for reuse. The operations (`wait`, `wake`, `waitv`, `requeue`) take a `&Tables`; the public
//! [`crate::Domain`] is a thin facade over one.
//!
//! Every table of a registry (the plain one and each node's) has the same size: a resize
//! resizes them all, one after the other, under the state lock (so one resizer at a time).

use crate::gate::Gate;
use crate::key::{Key, NO_NODE};
use crate::once::{Racy, RacyWord};
use crate::primitive::{AtomicPtr, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::table::{Table, RETIRED};
use crate::topology::{Topology, MAX_NODES};
use std::io;
use std::mem::ManuallyDrop;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How many buckets a domain's table has.
///
/// Only the table's size changes with it: waiters queued when it changes move to the new
/// table, and no operation sees a difference but its speed. Checked by [`crate::Domain::new`]
/// and [`crate::Domain::set_slots`].
///
/// # Examples
/// ```
/// use ufutex::{Domain, DomainConfig, Slots};
/// let d = Domain::new(DomainConfig::new().slots(Slots::Fixed(32)))?;
/// assert_eq!((d.policy(), d.slots()), (Slots::Fixed(32), 32));
/// assert!(d.set_slots(Slots::Fixed(3)).is_err()); // not a power of two
/// d.set_slots(Slots::Large)?;
/// assert!(d.slots() >= 256);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slots {
    /// Sized to the threads that wait on it: 16 ≤ 4 × threads ≤ the large size, rounded up to
    /// a power of two; grows as threads arrive, never shrinks by itself.
    Auto,
    /// Exactly this many buckets: a power of two ≥ 2. Automatic growth stops.
    Fixed(usize),
    /// One table of 256 × CPUs buckets (rounded up to a power of two): the analogue of the
    /// kernel's global futex hash. For the process default domain this choice is final.
    Large,
}

/// Tables are never freed while their domain lives: retired ones wait here to be reused by a
/// later resize of the same slot to the same size, so memory is bounded by one table per slot
/// and size ever used. Every table here that is not current has counts ≥ `RETIRED`, including
/// one allocated for a resize that then failed (it is made retired and waits for reuse).
struct State {
    policy: Slots,
    /// Set once the default domain switched to `Large` (the prctl mirror: later sets fail).
    frozen: bool,
    /// The size every current table has (0 until the first table is allocated).
    size: usize,
    /// The default domain's static first table (`Table::initial`); `None` elsewhere.
    initial: Option<&'static Table>,
    // Boxed: a table must not move when the vector grows (threads hold pointers into it).
    #[allow(clippy::vec_box)]
    tables: Vec<Box<Table>>,
}

impl State {
    /// Every table of the domain, current or retired.
    fn all_tables(&self) -> impl Iterator<Item = &Table> {
        self.initial.into_iter().chain(self.tables.iter().map(|t| &**t))
    }

    /// Keep `t` for as long as the domain lives (boxed: it never moves), listed for the fork
    /// handlers ([`hold_for_fork`]). Under the gate (`gate`), as every change of a state is.
    fn keep(&mut self, gate: &Gate, t: Table) -> io::Result<&Table> {
        self.tables.try_reserve(1).map_err(|_| no_memory())?;
        self.tables.push(Box::new(t));
        let kept: &Table = self.tables.last().expect("just pushed");
        gate.list(kept);
        Ok(kept)
    }
}

impl Drop for State {
    /// The domain is dropped: its tables leave the fork handlers' list (under the gate, so a
    /// prepare handler never holds a table that is being freed).
    fn drop(&mut self) {
        // (Under loom a domain may be dropped while the model's statics are torn down, the
        // gate's among them; a model's list dies with its execution: nothing to unlist.)
        if cfg!(ufutex_loom) || self.tables.is_empty() {
            return;
        }
        let gate = Gate::take();
        for t in &self.tables {
            gate.unlist(t);
        }
    }
}

/// The default domain's first table, static, so that its first wait never depends on an
/// allocation (`domain.rs`); the fork handlers hold it with the listed ones.
#[cfg(not(ufutex_loom))]
#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
static INITIAL: Table = Table::initial(&INITIAL_BUCKETS);
#[cfg(not(ufutex_loom))]
#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
static INITIAL_BUCKETS: [crate::table::Bucket; AUTO_MIN] = [const { crate::table::Bucket::new(0) }; AUTO_MIN];

/// The default domain's static first table.
#[cfg(not(ufutex_loom))]
pub(crate) const fn initial_table() -> &'static Table {
    &INITIAL
}

/// A domain's state, locked: the gate, then the domain's own lock, named to a forked child
/// that may find the gate held by a thread it does not have (`gate.rs`); released in the
/// reverse order.
struct StateGuard<'a> {
    state: ManuallyDrop<MutexGuard<'a, State>>,
    gate: Gate,
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here, and never used after.
        unsafe { ManuallyDrop::drop(&mut self.state) };
        self.gate.state_released();
        // (The gate is released by its own drop, after this.)
    }
}

impl StateGuard<'_> {
    /// [`State::keep`], under this guard's gate.
    fn keep(&mut self, t: Table) -> io::Result<&Table> {
        self.state.keep(&self.gate, t)
    }
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

/// What a fork's prepare handler holds until the fork returns (`fork.rs`): the gate.
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
pub(crate) struct ForkHold {
    gate: Gate,
}

/// A fork's prepare handler: take the gate, so that the fork copies no resize in the middle
/// (a resizer holds the gate throughout), no domain state held (every holder of one holds the
/// gate) and a list of tables that is whole. Nothing waits for the gate while it holds a
/// bucket lock, so this waits only for resizes and state queries to finish.
///
/// Bucket locks are not taken: the child forgets every bucket's contents whatever state the
/// parent's threads left it in (`Bucket::forget`), so the fork may copy one in the middle of a
/// change. Every page the parent writes after the fork costs it a copy-on-write fault, so
/// this writes the gate's word and nothing else (BENCHMARKS.md, forty-third session).
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
pub(crate) fn hold_for_fork() -> ForkHold {
    ForkHold { gate: Gate::take() }
}

/// [`hold_for_fork`] in a child made without the prepare handler (`fork_mark::check`), whose
/// one thread running our code is this one: the gate, taken over if a thread that the child
/// does not have held it at the fork (`gate::take_over`: the domain whose state that thread
/// held is lost, [`Tables`]).
#[cfg(not(ufutex_loom))]
pub(crate) fn hold_unprepared() -> ForkHold {
    ForkHold { gate: Gate::try_take().unwrap_or_else(crate::gate::take_over) }
}

impl ForkHold {
    /// The parent after the fork: the gate is released (with `self`).
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn release(self) {}

    /// The child after the fork: its one thread is the one that forked, which is in no call
    /// of ours (`reentry::fork_quiet`), so every queued waiter is a parent's thread that the
    /// child does not have, and every held bucket lock was held by one. Every bucket of every
    /// table forgets them and is free, and so is the gate.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn forget_waiters(self) {
        #[cfg(not(ufutex_loom))]
        initial_table().forget_every_waiter(None);
        for t in self.gate.listed() {
            t.forget_every_waiter(None);
        }
        // A migration the gate's lost holder left before publishing its new table: the old
        // table stays current (base 0), the new one spare (`RETIRED`). Once published, every
        // count already shows its base.
        if let Some((old, new, false)) = self.gate.migration_left() {
            old.forget_every_waiter(Some(0));
            new.forget_every_waiter(Some(RETIRED));
        }
        self.gate.forget();
    }
}

/// The tables of one domain and their policy.
pub(crate) struct Tables {
    /// The plain table: the hot path's one load.
    current: AtomicPtr<Table>,
    /// Per-node current tables, once NUMA is in use (set at `new` for private domains, on
    /// first NUMA use for the default domain).
    nodes: Racy<Nodes>,
    /// Whether node operations are allowed, and with memory-policy lookup.
    numa: NumaMode,
    /// Locked under the gate only. Not dropped when `lost`.
    state: ManuallyDrop<Mutex<State>>,
    /// Set in a forked child whose gate a thread it does not have held, with this domain's
    /// state or about to take it (`gate.rs`): the state's lock stays held and the state may be
    /// half changed, so it is never read again. The tables stay as they are (a migration left
    /// unfinished was settled by the child's fresh start): [`Self::set_slots`] fails with
    /// `ENOTRECOVERABLE`, a node's first table cannot be had (a wait there fails as without
    /// memory), growth stops, [`Self::slots`] is the plain table's, the policy reads `Fixed` at
    /// that size, and the drop leaks the tables.
    lost: AtomicBool,
    threads: Racy<Arc<AtomicUsize>>,
    /// Wakes that signal handlers deferred to their threads (`reentry.rs`) and that are not
    /// made yet: the tables are not dropped before they are. The count (low half) belongs to
    /// the fork generation in the high half ([`FORKS`]): in a forked child, a count from
    /// before the fork is of threads the child does not have, and no longer holds a drop.
    deferred: AtomicU64,
}

/// How many times this process's line was forked, as counted by the child handler
/// (`fork.rs`): the generation of [`Tables`]'s deferred wakes. (A std atomic under loom: no
/// model forks.)
static FORKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// In a forked child (`fork.rs`): a new generation of deferred wakes.
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
pub(crate) fn forked() {
    FORKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The current fork generation, in a deferred count's high half.
fn generation() -> u64 {
    u64::from(FORKS.load(std::sync::atomic::Ordering::Relaxed)) << 32
}

/// The count in the deferred word `d` if it belongs to generation `now`, else `None`.
fn count_of(d: u64, now: u64) -> Option<u32> {
    (d & !u64::from(u32::MAX) == now).then_some(d as u32)
}

/// Whether node tables exist, and how nodes are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumaMode {
    Off,
    /// Topology from the environment or sysfs; `mpol`: consult memory policies (Rust API).
    System {
        mpol: bool,
    },
    /// Forced virtual nodes (tests).
    Virtual {
        nodes: usize,
        mpol: bool,
    },
}

/// The NUMA half of a domain: the topology and one current-table pointer per node.
pub(crate) struct Nodes {
    pub(crate) topology: Topology,
    current: Box<[AtomicPtr<Table>]>,
}

/// The most buckets `Slots::Fixed` accepts (64 MiB of table); more fails with `ENOMEM`.
pub(crate) const MAX_SLOTS: usize = 1 << 20;
/// The smallest automatic size (the kernel's minimum of 16).
pub(crate) const AUTO_MIN: usize = 16;

/// 256 × CPUs, rounded up to a power of two (the kernel's global hash size).
pub(crate) fn large_slots() -> usize {
    static LARGE: RacyWord = RacyWord::new();
    LARGE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        (256 * cpus.max(1) as u64).next_power_of_two()
    }) as usize
}

fn auto_slots(threads: usize) -> usize {
    threads.saturating_mul(4).next_power_of_two().clamp(AUTO_MIN, large_slots())
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn no_memory() -> io::Error {
    errno(libc::ENOMEM)
}

impl Tables {
    crate::primitive::const_unless_loom! {
        /// Tables whose plain table is `initial` (a static table and its size), or none yet
        /// (`const` outside loom, so the default domain is a static).
        pub(crate) fn empty(policy: Slots, numa: NumaMode, initial: Option<(&'static Table, usize)>) -> Tables {
            let (current, size, initial) = match initial {
                Some((t, size)) => (std::ptr::from_ref(t).cast_mut(), size, Some(t)),
                None => (std::ptr::null_mut(), 0, None),
            };
            Tables {
                current: AtomicPtr::new(current),
                nodes: Racy::new(),
                numa,
                state: ManuallyDrop::new(Mutex::new(State { policy, frozen: false, size, initial, tables: Vec::new() })),
                lost: AtomicBool::new(false),
                threads: Racy::new(),
                deferred: AtomicU64::new(0),
            }
        }
    }

    /// A wake was deferred on these tables (`reentry.rs`): counted until [`Self::deferral_done`].
    pub(crate) fn deferral_made(&self) {
        let now = generation();
        // Relaxed: the thread that defers makes the wake itself later; only the drop waits.
        let _ = self
            .deferred
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| Some(count_of(d, now).map_or(now | 1, |_| d + 1)));
    }

    /// A deferred wake was made. One counted before a fork the child cannot be made by the
    /// thread that deferred it (the child does not have it): nothing to count down.
    pub(crate) fn deferral_done(&self) {
        let now = generation();
        // Release: the wake is done before a drop of the tables may go on.
        let _ = self.deferred.fetch_update(Ordering::Release, Ordering::Relaxed, |d| {
            count_of(d, now).filter(|&c| c != 0).map(|_| d - 1)
        });
    }

    /// Wakes deferred on these tables and not made yet, by threads this process has.
    pub(crate) fn deferrals(&self) -> u32 {
        // Acquire: pairs with `deferral_done`'s release.
        count_of(self.deferred.load(Ordering::Acquire), generation()).unwrap_or(0)
    }

    /// Tables with the plain one allocated (node tables come on first use of each node).
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2, or a virtual node count not
    /// in 1..=MAX_NODES; `ENOMEM` when the table cannot be allocated.
    pub(crate) fn new(slots: Slots, numa: NumaMode) -> io::Result<Tables> {
        if matches!(numa, NumaMode::Virtual { nodes, .. } if !(1..=MAX_NODES).contains(&nodes)) {
            return Err(errno(libc::EINVAL));
        }
        let t = Tables::empty(Slots::Auto, numa, None);
        t.set_slots(slots, false)?;
        // Set up the node pointers and the thread counter now, outside any race (the default
        // domain does both lazily; loom cannot see a std `OnceLock`'s synchronisation, so
        // models that use their own domain never race on these).
        let _ = t.numa_nodes();
        let _ = t.threads();
        Ok(t)
    }

    /// The NUMA half, set up on first use; `None` if the domain has no NUMA.
    #[inline]
    pub(crate) fn numa_nodes(&self) -> Option<&Nodes> {
        match self.nodes.get() {
            Some(n) => Some(n),
            None => self.init_nodes(),
        }
    }

    #[cold]
    fn init_nodes(&self) -> Option<&Nodes> {
        let topology = match self.numa {
            NumaMode::Off => return None,
            NumaMode::System { .. } => Topology::system().clone(),
            NumaMode::Virtual { nodes, .. } => Topology::virtual_nodes(nodes),
        };
        let current = (0..topology.count()).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect();
        Some(self.nodes.get_or_init(|| Nodes { topology, current }))
    }

    /// Whether a node word of -1 consults the memory policy first (the Rust API's `mpol`).
    pub(crate) fn numa_mpol(&self) -> bool {
        matches!(self.numa, NumaMode::System { mpol: true } | NumaMode::Virtual { mpol: true, .. })
    }

    /// The current number of buckets of each table (a `Large` table reports its real size).
    pub(crate) fn slots(&self) -> usize {
        let Some(st) = self.lock_state() else {
            return self.current_of(&self.current).map_or(0, Table::slots);
        };
        if st.size != 0 {
            return st.size;
        }
        self.policy_slots(st.policy)
    }

    /// The current sizing policy.
    pub(crate) fn policy(&self) -> Slots {
        match self.lock_state() {
            Some(st) => st.policy,
            None => Slots::Fixed(self.slots()),
        }
    }

    /// The state, locked; `None` if it is lost ([`Self::lost`]).
    fn lock_state(&self) -> Option<StateGuard<'_>> {
        let gate = Gate::take();
        // Relaxed: set before any thread of the child went on (`fork_mark`'s start).
        if self.lost.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        gate.hold_state(&self.lost);
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Some(StateGuard { state: ManuallyDrop::new(state), gate })
    }

    /// The error of a change that needs a lost state.
    fn lost_state() -> io::Error {
        errno(libc::ENOTRECOVERABLE)
    }

    /// The size `policy` asks for now.
    fn policy_slots(&self, policy: Slots) -> usize {
        match policy {
            Slots::Auto => auto_slots(self.thread_count()),
            Slots::Fixed(n) => n,
            Slots::Large => large_slots(),
        }
    }

    /// Change the sizing policy, resizing the tables now if their size changes; with
    /// `final_large`, a switch to `Large` is final (the process default domain, as the kernel's
    /// global hash). The prctl mirror's order of checks: a bad size (`EINVAL`) before a frozen
    /// registry (`EBUSY`) before an impossible allocation (`ENOMEM`).
    pub(crate) fn set_slots(&self, slots: Slots, final_large: bool) -> io::Result<()> {
        if let Slots::Fixed(n) = slots {
            if n < 2 || !n.is_power_of_two() {
                return Err(errno(libc::EINVAL));
            }
        }
        let mut st = self.lock_state().ok_or_else(Self::lost_state)?;
        if st.frozen {
            return Err(errno(libc::EBUSY));
        }
        if matches!(slots, Slots::Fixed(n) if n > MAX_SLOTS) {
            return Err(no_memory());
        }
        // The policy changes only if its tables could be had: a failed resize leaves all as it was.
        self.resize_locked(&mut st, self.policy_slots(slots))?;
        st.policy = slots;
        st.frozen = final_large && slots == Slots::Large;
        Ok(())
    }

    /// The current-table pointer of the slot serving `node` ([`NO_NODE`]: the plain table).
    #[inline]
    fn slot(&self, node: u32) -> &AtomicPtr<Table> {
        self.slot_if_any(node).expect("a node key comes from a NUMA domain's resolved node word")
    }

    /// The slot of `node`, if this domain has one.
    #[inline]
    fn slot_if_any(&self, node: u32) -> Option<&AtomicPtr<Table>> {
        match node {
            NO_NODE => Some(&self.current),
            _ => {
                // (Out of the plain key's way: a NUMA domain's keys pay a jump.)
                std::hint::cold_path();
                self.nodes.get()?.current.get(node as usize)
            }
        }
    }

    /// Every slot that has a table, plain first.
    fn slots_in_use(&self) -> impl Iterator<Item = &AtomicPtr<Table>> {
        let nodes = self.nodes.get().map(|n| &n.current[..]).unwrap_or(&[]);
        std::iter::once(&self.current).chain(nodes).filter(|p| !p.load(Ordering::Acquire).is_null())
    }

    /// The current table of every slot that has one, plain first.
    fn current_tables(&self) -> impl Iterator<Item = &Table> {
        self.slots_in_use().filter_map(|p| self.current_of(p))
    }

    /// Make every current table `slots` big, with the state lock held (one resizer at a time).
    /// Every table needed is had first; only then do waiters move, so on `ENOMEM` nothing has
    /// changed (all tables keep one size).
    fn resize_locked(&self, st: &mut StateGuard<'_>, slots: usize) -> io::Result<()> {
        let in_use: Vec<(&AtomicPtr<Table>, u32)> = match self.slots_in_use().collect::<Vec<_>>() {
            // The first table: the plain one (a node's first table is made by `ensure_table`).
            none if none.is_empty() => vec![(&self.current, NO_NODE)],
            some => some
                .into_iter()
                .map(|slot| {
                    // SAFETY: a non-null current pointer points into the domain's tables, never
                    // freed while the domain lives.
                    (slot, unsafe { &*slot.load(Ordering::Acquire) }.node())
                })
                .collect(),
        };
        for &(slot, node) in &in_use {
            // SAFETY: as above.
            let resized = unsafe { slot.load(Ordering::Acquire).as_ref() }.is_some_and(|t| t.slots() != slots);
            if resized && self.spare_table(st, node, slots).is_none() {
                // Allocated retired (counts ≥ RETIRED): not current, like every spare table.
                let t = self.fresh_table(node, slots, RETIRED).ok_or_else(no_memory)?;
                st.keep(t)?;
            }
        }
        for (slot, node) in in_use {
            self.replace_locked(st, slot, node, slots)?;
        }
        st.size = slots;
        Ok(())
    }

    /// A table of `slots(node)`'s slot and size that is not current, kept for reuse.
    fn spare_table(&self, st: &State, node: u32, slots: usize) -> Option<*const Table> {
        st.all_tables()
            .find(|&t| t.slots() == slots && t.node() == node && !self.is_current_any(t))
            .map(|t| t as *const Table)
    }

    /// Whether `t` is its slot's current table (under the state lock: Acquire, no bucket held).
    fn is_current_any(&self, t: &Table) -> bool {
        std::ptr::eq(self.slot(t.node()).load(Ordering::Acquire), t)
    }

    /// Make `slot`'s (serving `node`) current table `slots` big: publish a first table (counts
    /// 0), or migrate every waiter to a spare table of that size. Fails only when a first table
    /// cannot be had.
    fn replace_locked(
        &self,
        st: &mut StateGuard<'_>,
        slot: &AtomicPtr<Table>,
        node: u32,
        slots: usize,
    ) -> io::Result<()> {
        let cur = slot.load(Ordering::Acquire);
        // SAFETY: a non-null `current` points into the domain's tables, which frees nothing while
        // the domain lives.
        let Some(old) = (unsafe { cur.as_ref() }) else {
            // A fresh table is seen by no one before it is published: counts start at 0.
            let t = self.fresh_table(node, slots, 0).ok_or_else(no_memory)?;
            let new: *const Table = st.keep(t)?;
            slot.store(new.cast_mut(), Ordering::Release);
            return Ok(());
        };
        if old.slots() == slots {
            return Ok(());
        }
        let new = self.spare_table(st, node, slots).expect("resize_locked had every spare table first");
        // SAFETY: `new` points into the domain's tables, never freed while the domain lives.
        let new_ref = unsafe { &*new };
        let _named = st.gate.migrating(slot, old, new_ref);
        old.migrate_to(new_ref, || slot.store(new.cast_mut(), Ordering::Release));
        Ok(())
    }

    /// A new table for `node`, placed on it when the node is real; `None` without memory.
    fn fresh_table(&self, node: u32, slots: usize, waiters: u32) -> Option<Table> {
        let real = node != NO_NODE && self.nodes.get().is_some_and(|n| n.topology.is_real());
        Table::new_on(slots, waiters, node, real)
    }

    fn thread_count(&self) -> usize {
        self.threads.get().map_or(0, |t| t.load(Ordering::Relaxed))
    }

    /// The counter a thread registers with when it first waits here.
    pub(crate) fn threads(&self) -> &Arc<AtomicUsize> {
        self.threads.get_or_init(|| Arc::new(AtomicUsize::new(0)))
    }

    /// A new thread waits here: grow the tables of an `Auto` domain if 4 × threads outgrew
    /// them. Once per thread and domain. The state lock only when the plain table is smaller
    /// than the size wanted: threads that start together (a pool of 128 waking up) otherwise
    /// queue on that lock one after another, most of them to find nothing to do.
    #[cold]
    pub(crate) fn thread_arrived(&self, threads: usize) {
        let target = auto_slots(threads);
        // Acquire: the table's header is initialised (as for every use of `current`). A table
        // that is current or was, and already this big, means a resize to `target` is done or
        // was overtaken by a bigger one; a stale smaller one only sends us to the lock.
        // SAFETY: tables are never freed while their domain lives.
        if unsafe { self.current.load(Ordering::Acquire).as_ref() }.is_some_and(|t| t.slots() >= target) {
            return;
        }
        let Some(mut st) = self.lock_state() else {
            return;
        };
        if st.policy == Slots::Auto && st.size < target {
            // Growing is a performance policy: without memory the tables keep their size (all
            // waiters still meet), and a later arrival tries again.
            let _ = self.resize_locked(&mut st, target);
        }
    }

    /// The current table of `key`'s slot, if one was allocated yet (a wake needs none: no
    /// table, no waiter).
    #[inline]
    pub(crate) fn table_if_any(&self, key: &Key) -> Option<&Table> {
        self.current_of(self.slot(key.node()))
    }

    /// The current table of `key`'s slot for a key read without a lock, which may be stale
    /// (`private_table::lock_home`): `None` when this domain has no such slot or table.
    pub(crate) fn table_of_hint(&self, key: &Key) -> Option<&Table> {
        self.current_of(self.slot_if_any(key.node())?)
    }

    /// The table `slot` (one of this domain's) holds now, if any yet.
    #[inline(always)]
    fn current_of<'s>(&'s self, slot: &'s AtomicPtr<Table>) -> Option<&'s Table> {
        // Acquire: pairs with the publishing store, so the table's buckets are initialised.
        let t = slot.load(Ordering::Acquire);
        // SAFETY: tables are owned by `state.tables` and never freed while `self` lives.
        unsafe { t.as_ref() }
    }

    /// The current table of `key`'s slot, for an operation that queues. The plain table always
    /// exists (the default domain starts with a static one; `Domain::new` allocates one); a
    /// node's table exists once [`Self::ensure_table`] succeeded for it (NUMA resolution does
    /// that), and a slot never loses its table.
    #[inline]
    pub(crate) fn table(&self, key: &Key) -> &Table {
        self.table_if_any(key).expect("the plain table, or a node table that resolution ensured")
    }

    /// Make sure `key`'s slot has a table (allocating a node's first one).
    ///
    /// # Errors
    /// `ENOMEM` when the table cannot be allocated.
    #[inline]
    pub(crate) fn ensure_table(&self, key: &Key) -> io::Result<()> {
        match self.table_if_any(key) {
            Some(_) => Ok(()),
            None => self.first_table(key),
        }
    }

    #[cold]
    fn first_table(&self, key: &Key) -> io::Result<()> {
        let mut st = self.lock_state().ok_or_else(Self::lost_state)?;
        if self.table_if_any(key).is_none() {
            let slots = if st.size != 0 { st.size } else { self.policy_slots(st.policy) };
            self.replace_locked(&mut st, self.slot(key.node()), key.node(), slots)?;
            st.size = slots;
        }
        Ok(())
    }

    /// Whether `t` is still current. Call with one of `t`'s buckets locked: a resize publishes
    /// the new table while holding every old bucket lock, so Relaxed suffices — the lock's
    /// Acquire orders this load after the resize's publication.
    #[inline]
    pub(crate) fn is_current(&self, t: &Table) -> bool {
        std::ptr::eq(self.slot(t.node()).load(Ordering::Relaxed), t)
    }

    /// Waiters queued anywhere in these tables, every node's table included (walks every
    /// bucket under its lock).
    pub(crate) fn queued_waiters(&self) -> usize {
        // No resize moves waiters between tables meanwhile (nor ever, in a lost domain).
        let _st = self.lock_state();
        self.current_tables().map(Table::queued).sum()
    }

    /// Waiters whose home bucket (where they first queued; `parker::Bell`) is in this domain,
    /// by the buckets' own counts, over every table, current or retired. Equals
    /// [`Self::queued_waiters`] when no operation is in flight (for tests).
    pub(crate) fn homed_waiters(&self) -> usize {
        self.over_tables(Table::homed)
    }

    /// The waiter counts of the current tables' buckets, summed (walks every bucket).
    pub(crate) fn counted_waiters(&self) -> usize {
        self.current_tables().map(Table::counted).sum()
    }

    /// How many tables are current: the plain one (if allocated) and each node's in use.
    pub(crate) fn tables_in_use(&self) -> usize {
        self.slots_in_use().count()
    }

    /// Bytes held by this domain's tables (current and retired).
    pub(crate) fn memory_footprint(&self) -> usize {
        self.over_tables(Table::footprint)
    }

    /// The sum of `f` over every table, current or retired (a lost domain's current ones: its
    /// list of tables is not read again).
    fn over_tables(&self, f: impl Fn(&Table) -> usize) -> usize {
        match self.lock_state() {
            Some(st) => st.all_tables().map(f).sum(),
            None => self.current_tables().map(f).sum(),
        }
    }
}

impl Drop for Tables {
    /// A wake that a signal handler deferred on these tables is made by its thread when that
    /// thread leaves its critical section (`reentry.rs`): a few list operations away. Wait for
    /// it, so that it does not find the tables gone.
    fn drop(&mut self) {
        while self.deferrals() != 0 {
            crate::primitive::yield_now();
        }
        if !self.lost.load(std::sync::atomic::Ordering::Relaxed) {
            // SAFETY: dropped once, here, and never used after.
            unsafe { ManuallyDrop::drop(&mut self.state) };
        }
    }
}
