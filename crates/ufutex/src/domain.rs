//! The public face of a table registry: [`Domain`] (a private registry, or the process
//! default that the free functions use), how to build one, and its operations. Everything here
//! forwards to the engine (`tables.rs` and the operation modules).

use crate::deadline::Deadline;
use crate::error::WaitError;
use crate::membarrier::Pays;
#[cfg(not(ufutex_loom))]
use crate::table::{Bucket, Table};
use crate::tables::{NumaMode, Tables};
use crate::waitv::WaitEntry;
use crate::word::{word_of, Futex};
use crate::Slots;
use crate::MATCH_ANY;
use std::io;

/// How to build a [`Domain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainConfig {
    slots: Slots,
    numa: bool,
    mpol: bool,
    virtual_nodes: Option<usize>,
}

impl Default for DomainConfig {
    fn default() -> Self {
        DomainConfig { slots: Slots::Auto, numa: false, mpol: false, virtual_nodes: None }
    }
}

impl DomainConfig {
    /// The default: [`Slots::Auto`], no NUMA.
    pub fn new() -> Self {
        Self::default()
    }

    /// Choose the table's sizing policy.
    pub fn slots(mut self, slots: Slots) -> Self {
        self.slots = slots;
        self
    }

    /// Keep one table per NUMA node besides the plain table, for [`crate::NumaFutex`] words
    /// (`Domain::wait_numa` and friends). Each node's table is allocated when first used and
    /// placed on that node. The node count comes from `/sys/devices/system/node/possible`, or
    /// from the environment variable `UFUTEX_NUMA_NODES=N` (N virtual nodes; read once per
    /// process).
    pub fn numa(mut self, on: bool) -> Self {
        self.numa = on;
        self
    }

    /// With NUMA: a node word of -1 first takes the node of a preferred or home-node memory
    /// policy covering the futex word (`get_mempolicy`), if there is one, before the caller's
    /// current node (the Rust face of `UFUTEX_MPOL`).
    pub fn mpol(mut self, on: bool) -> Self {
        self.mpol = on;
        self
    }

    /// NUMA with `n` virtual nodes (1..=1024), whatever the machine has: the current node is
    /// the current CPU modulo `n`, and tables are not bound to nodes. For tests.
    #[doc(hidden)]
    pub fn virtual_nodes(mut self, n: usize) -> Self {
        self.numa = true;
        self.virtual_nodes = Some(n);
        self
    }
}

/// A private wait-queue table with its own sizing policy.
///
/// Waiters and wakers meet only within one domain: a word waited on through one domain is not
/// woken through another. The free functions ([`crate::wait`], [`crate::wake`], ...) use the
/// process default domain, which is [`Slots::Auto`].
///
/// Resizing is live: every queued waiter (sleeping, timed, inside a waitv, just requeued) moves
/// to the new table, and no operation on the hot path writes anything but its bucket's line.
///
/// With NUMA ([`DomainConfig::numa`]) a domain also keeps one table per node, for
/// [`crate::NumaFutex`] pairs whose node word picks the table (`wait_numa`, `wake_numa`,
/// `waitv_numa`, `requeue_numa`; see [`crate::NumaFutex`]). All tables of a domain share its
/// size policy. The default domain has NUMA (the C ABI's `UFUTEX_NUMA`); its node count comes
/// from sysfs or `UFUTEX_NUMA_NODES`.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use ufutex::{Domain, DomainConfig, Slots};
/// let d = Domain::new(DomainConfig::new().slots(Slots::Fixed(64)))?;
/// let word = AtomicU32::new(1);
/// assert_eq!(d.wait(&word, 0, None), Err(ufutex::WaitError::WouldBlock));
/// assert_eq!(d.wake(&word, 1), 0);
/// d.set_slots(Slots::Fixed(8))?;
/// assert_eq!(d.slots(), 8);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Domain {
    tables: Tables,
}

impl Domain {
    /// A new domain with its table allocated (node tables come on first use of each node).
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2, or a virtual node count not
    /// in 1..=1024; `ENOMEM` when the table cannot be allocated.
    pub fn new(config: DomainConfig) -> io::Result<Domain> {
        let numa = match (config.numa, config.virtual_nodes) {
            (false, _) => NumaMode::Off,
            (true, None) => NumaMode::System { mpol: config.mpol },
            (true, Some(nodes)) => NumaMode::Virtual { nodes, mpol: config.mpol },
        };
        Ok(Domain { tables: Tables::new(config.slots, numa)? })
    }

    /// The engine's registry behind this domain.
    #[inline]
    pub(crate) fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Change the sizing policy, resizing the table now if its size changes.
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2; `EBUSY` if this is the
    /// process default domain and it was switched to `Large` (final, as for the kernel's
    /// global hash); `ENOMEM` when the new table cannot be allocated (nothing changes then).
    pub fn set_slots(&self, slots: Slots) -> io::Result<()> {
        self.tables.set_slots(slots, std::ptr::eq(self, default_domain()))
    }

    /// The current number of buckets of each table (a `Large` table reports its real size).
    pub fn slots(&self) -> usize {
        self.tables.slots()
    }

    /// The current sizing policy.
    pub fn policy(&self) -> Slots {
        self.tables.policy()
    }

    /// Waiters queued anywhere in this domain, every node's table included (walks every
    /// bucket under its lock).
    #[doc(hidden)]
    pub fn queued_waiters(&self) -> usize {
        self.tables.queued_waiters()
    }

    /// Waiters whose home bucket (where they first queued; `parker::Bell`) is in this domain,
    /// over every table, current or retired. Equals [`Self::queued_waiters`] when no operation
    /// is in flight (for tests).
    #[doc(hidden)]
    pub fn homed_waiters(&self) -> usize {
        self.tables.homed_waiters()
    }

    /// How many tables are current: the plain one (if allocated) and each node's in use.
    #[doc(hidden)]
    pub fn tables_in_use(&self) -> usize {
        self.tables.tables_in_use()
    }

    /// Bytes held by this domain's tables (current and retired).
    #[doc(hidden)]
    pub fn memory_footprint(&self) -> usize {
        self.tables.memory_footprint()
    }

    /// Wait on `f` in this domain; see [`crate::wait`].
    ///
    /// # Errors
    /// As [`crate::wait`].
    pub fn wait<F: Futex>(&self, f: &F, expected: F::Value, deadline: Option<Deadline>) -> Result<(), WaitError> {
        self.wait_bitset(f, expected, MATCH_ANY, deadline)
    }

    /// Wait on `f` in this domain, woken only by wakes whose mask shares a bit with `mask`.
    ///
    /// # Errors
    /// As [`crate::wait`].
    pub fn wait_bitset<F: Futex>(
        &self,
        f: &F,
        expected: F::Value,
        mask: u64,
        deadline: Option<Deadline>,
    ) -> Result<(), WaitError> {
        crate::wait::wait_word(
            &self.tables,
            word_of(f),
            F::value_bits(expected),
            mask,
            deadline.map(Into::into),
            Pays::Waiter,
        )
    }

    /// Wake up to `n` waiters on `f` in this domain; see [`crate::wake`].
    pub fn wake<F: Futex>(&self, f: &F, n: usize) -> usize {
        crate::wake::wake_word(&self.tables, word_of(f), n, MATCH_ANY, Pays::Waiter)
    }

    /// Wake up to `n` waiters on `f` whose mask shares a bit with `mask`.
    pub fn wake_bitset<F: Futex>(&self, f: &F, n: usize, mask: u64) -> usize {
        crate::wake::wake_word(&self.tables, word_of(f), n, mask, Pays::Waiter)
    }

    /// Wait on any of `entries` in this domain; see [`crate::waitv`].
    ///
    /// # Errors
    /// As [`crate::waitv`].
    pub fn waitv(&self, entries: &[WaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, WaitError> {
        crate::waitv::waitv_entries(&self.tables, entries, deadline.map(Into::into))
    }

    /// Requeue within this domain; see [`crate::requeue`].
    ///
    /// # Errors
    /// As [`crate::requeue`].
    pub fn requeue<F: Futex>(
        &self,
        from: &F,
        expected: F::Value,
        to: &F,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, WaitError> {
        crate::requeue::requeue_words(
            &self.tables,
            word_of(from),
            F::value_bits(expected),
            word_of(to),
            nr_wake,
            nr_requeue,
        )
    }
}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain").field("slots", &self.slots()).field("policy", &self.policy()).finish()
    }
}

/// The process default domain (automatic sizing until `set_slots` says otherwise). Its plain
/// table starts as a static one of the smallest automatic size, so a wait never depends on an
/// allocation: growing it later may fail (the table keeps its size), using it cannot.
#[cfg(not(ufutex_loom))]
pub(crate) fn default_domain() -> &'static Domain {
    use crate::tables::AUTO_MIN;
    static BUCKETS: [Bucket; AUTO_MIN] = [const { Bucket::new(0) }; AUTO_MIN];
    static INITIAL: Table = Table::initial(&BUCKETS);
    static DEFAULT: Domain =
        Domain { tables: Tables::empty(Slots::Auto, NumaMode::System { mpol: false }, Some((&INITIAL, AUTO_MIN))) };
    &DEFAULT
}

#[cfg(ufutex_loom)]
pub(crate) fn default_domain() -> &'static Domain {
    loom::lazy_static! {
        static ref DEFAULT: Domain = Domain::new(DomainConfig::new().numa(true)).expect("default domain");
    }
    &DEFAULT
}

impl Domain {
    /// The process default domain, which the free functions use.
    pub fn default_domain() -> &'static Domain {
        default_domain()
    }
}
