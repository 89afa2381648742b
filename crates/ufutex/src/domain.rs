//! The public face of a table registry: [`Domain`] (a private registry, or the process
//! default that the free functions use), how to build one, and its operations. Everything here
//! forwards to the engine (`tables.rs` and the operation modules).

use crate::deadline::Deadline;
use crate::error::WaitError;
use crate::membarrier::Pays;
use crate::tables::{NumaMode, Tables};
use crate::waitv::WaitEntry;
use crate::word::{word_of, Futex};
use crate::Slots;
use crate::MATCH_ANY;
use std::io;
use std::ptr::NonNull;

/// How to build a [`Domain`]: a builder, checked only by [`Domain::new`].
///
/// # Examples
/// ```
/// use ufutex::{Domain, DomainConfig, Slots};
/// let config = DomainConfig::new().slots(Slots::Fixed(128)).numa(true);
/// let d = Domain::new(config)?;
/// assert_eq!(d.slots(), 128);
/// # Ok::<(), std::io::Error>(())
/// ```
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
    ///
    /// # Examples
    /// ```
    /// use ufutex::{Domain, DomainConfig, Slots};
    /// let d = Domain::new(DomainConfig::new())?;
    /// assert_eq!(d.policy(), Slots::Auto);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Choose the table's sizing policy. Not checked here: [`Domain::new`] rejects a bad size.
    ///
    /// # Examples
    /// ```
    /// use ufutex::{Domain, DomainConfig, Slots};
    /// assert_eq!(Domain::new(DomainConfig::new().slots(Slots::Fixed(2)))?.slots(), 2);
    /// assert!(Domain::new(DomainConfig::new().slots(Slots::Fixed(0))).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn slots(mut self, slots: Slots) -> Self {
        self.slots = slots;
        self
    }

    /// Keep one table per NUMA node besides the plain table, for [`crate::NumaFutex`] words
    /// (`Domain::wait_numa` and friends). Each node's table is allocated when first used and
    /// placed on that node. The node count comes from `/sys/devices/system/node/possible`, or
    /// from the environment variable `UFUTEX_NUMA_NODES=N` (N virtual nodes; read once per
    /// process). Without it the NUMA operations fail [`crate::NumaError::NotNuma`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU16;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex};
    /// let f = NumaFutex::<AtomicU16>::new(0);
    /// let plain = Domain::new(DomainConfig::new())?;
    /// assert_eq!(plain.wake_numa(&f, 1), Err(NumaError::NotNuma));
    /// let numa = Domain::new(DomainConfig::new().numa(true))?;
    /// assert_eq!(numa.wake_numa(&f, 1), Ok(0));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn numa(mut self, on: bool) -> Self {
        self.numa = on;
        self
    }

    /// With NUMA: a node word of -1 first takes the node of a preferred or home-node memory
    /// policy covering the futex word (`get_mempolicy`), if there is one, before the caller's
    /// current node (the Rust face of `UFUTEX_MPOL`). Has no effect without
    /// [`DomainConfig::numa`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{Domain, DomainConfig, NumaFutex};
    /// let d = Domain::new(DomainConfig::new().numa(true).mpol(true))?;
    /// let f = NumaFutex::<AtomicU32>::new(0);
    /// d.wake_numa(&f, 1).unwrap();
    /// // The node of a policy covering `f`, else the caller's, was written back.
    /// assert_ne!(f.node().load(Ordering::Relaxed), u32::MAX);
    /// # Ok::<(), std::io::Error>(())
    /// ```
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
    /// The engine's registry, never inside the `Domain` itself: a wake that a signal handler
    /// deferred keeps a pointer to it until its thread makes it (`wake.rs`, `reentry.rs`),
    /// and a `Domain` may be moved meanwhile. Boxed by [`Domain::new`] and freed by its drop;
    /// the default domain's is a static ([`default_domain`]).
    tables: NonNull<Tables>,
    /// Whether `tables` came from a `Box` that this domain frees.
    owned: bool,
}

// SAFETY: a `Domain` is a handle to its `Tables` (owned, or the default domain's static), and
// every operation on it only reads through the pointer (as `&Tables`); `Tables` is itself
// `Send` and `Sync` (checked below), so sending or sharing the handle is sending or sharing it.
unsafe impl Send for Domain {}
// SAFETY: as for `Send`.
unsafe impl Sync for Domain {}
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Tables>();
};

impl Drop for Domain {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `owned` says `tables` came from `Box::leak` in `Domain::new`, and
            // this is the only `Domain` that holds it (`Domain` is not `Clone`): freed once,
            // here. `Tables`' own drop first waits out any deferred wake that points to it.
            drop(unsafe { Box::from_raw(self.tables.as_ptr()) });
        }
    }
}

impl Domain {
    /// A new domain with its table allocated (node tables come on first use of each node).
    /// It shares no waiters with any other domain.
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2, or a virtual node count not
    /// in 1..=1024; `ENOMEM` for a `Fixed` size above 2^20, or when the table cannot be
    /// allocated.
    ///
    /// # Examples
    /// ```
    /// use ufutex::{Domain, DomainConfig, Slots};
    /// let d = Domain::new(DomainConfig::new().slots(Slots::Fixed(16)))?;
    /// assert_eq!(d.slots(), 16);
    /// let e = Domain::new(DomainConfig::new().slots(Slots::Fixed(24))).unwrap_err();
    /// assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(config: DomainConfig) -> io::Result<Domain> {
        let numa = match (config.numa, config.virtual_nodes) {
            (false, _) => NumaMode::Off,
            (true, None) => NumaMode::System { mpol: config.mpol },
            (true, Some(nodes)) => NumaMode::Virtual { nodes, mpol: config.mpol },
        };
        let tables = Box::new(Tables::new(config.slots, numa)?);
        Ok(Domain { tables: NonNull::from(Box::leak(tables)), owned: true })
    }

    /// The engine's registry behind this domain.
    #[inline]
    pub(crate) fn tables(&self) -> &Tables {
        // SAFETY: `tables` is the default domain's static or the box that `new` made, which
        // lives until this domain's drop, and is never written through the pointer.
        unsafe { self.tables.as_ref() }
    }

    /// Change the sizing policy, resizing the table now if its size changes. Waiters queued
    /// meanwhile move to the new table; none is lost or woken by the move.
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2; `EBUSY` if this is the
    /// process default domain and it was switched to `Large` (final, as for the kernel's
    /// global hash); `ENOMEM` for a `Fixed` size above 2^20, or when the new table cannot be
    /// allocated (nothing changes then); `ENOTRECOVERABLE` in a child made without the fork
    /// handlers (`_Fork`) while another thread of the parent was changing this domain's state
    /// (its tables then stay as they are: see the C header's "Fork").
    ///
    /// # Examples
    /// ```
    /// use ufutex::{Domain, DomainConfig, Slots};
    /// let d = Domain::new(DomainConfig::new())?;
    /// d.set_slots(Slots::Fixed(1024))?;
    /// assert_eq!((d.policy(), d.slots()), (Slots::Fixed(1024), 1024));
    /// let e = d.set_slots(Slots::Fixed(1 << 21)).unwrap_err();
    /// assert_eq!(e.raw_os_error(), Some(libc::ENOMEM));
    /// assert_eq!(d.slots(), 1024); // unchanged
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_slots(&self, slots: Slots) -> io::Result<()> {
        self.tables().set_slots(slots, std::ptr::eq(self, default_domain()))
    }

    /// The current number of buckets of each table (a `Large` table reports its real size).
    /// With [`Slots::Auto`] it may grow by the time the caller looks at it.
    ///
    /// # Examples
    /// ```
    /// use ufutex::{Domain, DomainConfig};
    /// let d = Domain::new(DomainConfig::new())?;
    /// assert!(d.slots() >= 16 && d.slots().is_power_of_two());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn slots(&self) -> usize {
        self.tables().slots()
    }

    /// The current sizing policy.
    ///
    /// # Examples
    /// ```
    /// use ufutex::{Domain, DomainConfig, Slots};
    /// let d = Domain::new(DomainConfig::new().slots(Slots::Large))?;
    /// assert_eq!(d.policy(), Slots::Large);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn policy(&self) -> Slots {
        self.tables().policy()
    }

    /// Waiters queued anywhere in this domain, every node's table included (walks every
    /// bucket under its lock).
    #[doc(hidden)]
    pub fn queued_waiters(&self) -> usize {
        self.tables().queued_waiters()
    }

    /// Waiters whose home bucket (where they first queued; `parker::Bell`) is in this domain,
    /// over every table, current or retired. Equals [`Self::queued_waiters`] when no operation
    /// is in flight (for tests).
    #[doc(hidden)]
    pub fn homed_waiters(&self) -> usize {
        self.tables().homed_waiters()
    }

    /// The waiter counts of this domain's current tables, summed: at least the waiters queued
    /// and about to queue (the invariant of `table.rs`), and equal to [`Self::queued_waiters`]
    /// when no operation is in flight (for tests).
    #[doc(hidden)]
    pub fn counted_waiters(&self) -> usize {
        self.tables().counted_waiters()
    }

    /// How many tables are current: the plain one (if allocated) and each node's in use.
    #[doc(hidden)]
    pub fn tables_in_use(&self) -> usize {
        self.tables().tables_in_use()
    }

    /// Bytes held by this domain's tables (current and retired).
    #[doc(hidden)]
    pub fn memory_footprint(&self) -> usize {
        self.tables().memory_footprint()
    }

    /// Wait on `f` in this domain; see [`crate::wait`]. Only wakes and requeues through this
    /// domain reach it.
    ///
    /// # Errors
    /// As [`crate::wait`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{Domain, DomainConfig};
    /// let d = Domain::new(DomainConfig::new())?;
    /// let w = AtomicU32::new(0);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while w.load(Ordering::Acquire) == 0 {
    ///             let _ = d.wait(&w, 0, None);
    ///         }
    ///     });
    ///     w.store(1, Ordering::Release);
    ///     d.wake(&w, 1);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait<F: Futex>(&self, f: &F, expected: F::Value, deadline: Option<Deadline>) -> Result<(), WaitError> {
        self.wait_bitset(f, expected, MATCH_ANY, deadline)
    }

    /// Wait on `f` in this domain, woken only by wakes whose mask shares a bit with `mask`
    /// (see [`crate::wait_bitset`]).
    ///
    /// # Errors
    /// As [`crate::wait`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU8;
    /// use std::time::Duration;
    /// use ufutex::{Domain, DomainConfig, WaitError};
    /// let d = Domain::new(DomainConfig::new())?;
    /// let w = AtomicU8::new(0);
    /// let r = d.wait_bitset(&w, 0, 0b100, Some(Duration::from_millis(1).into()));
    /// assert_eq!(r, Err(WaitError::TimedOut));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait_bitset<F: Futex>(
        &self,
        f: &F,
        expected: F::Value,
        mask: u64,
        deadline: Option<Deadline>,
    ) -> Result<(), WaitError> {
        crate::wait::wait_word(
            self.tables(),
            word_of(f),
            F::value_bits(expected),
            mask,
            deadline.map(Into::into),
            Pays::Waiter,
        )
    }

    /// Wake up to `n` waiters on `f` in this domain, oldest first; returns how many were woken
    /// (see [`crate::wake`]). Waiters in other domains are not counted or woken.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU64;
    /// use ufutex::{Domain, DomainConfig};
    /// let d = Domain::new(DomainConfig::new())?;
    /// assert_eq!(d.wake(&AtomicU64::new(0), usize::MAX), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wake<F: Futex>(&self, f: &F, n: usize) -> usize {
        crate::wake::wake_word(self.tables(), word_of(f), n, MATCH_ANY, Pays::Waiter)
    }

    /// Wake up to `n` waiters on `f` in this domain whose mask shares a bit with `mask`;
    /// returns how many were woken (see [`crate::wake_bitset`]).
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{Domain, DomainConfig};
    /// let d = Domain::new(DomainConfig::new())?;
    /// let w = AtomicU32::new(0);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while w.load(Ordering::Acquire) == 0 {
    ///             let _ = d.wait_bitset(&w, 0, 0b10, None);
    ///         }
    ///     });
    ///     w.store(1, Ordering::Release);
    ///     d.wake_bitset(&w, 1, 0b10);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wake_bitset<F: Futex>(&self, f: &F, n: usize, mask: u64) -> usize {
        crate::wake::wake_word(self.tables(), word_of(f), n, mask, Pays::Waiter)
    }

    /// Wait on any of `entries` in this domain; returns the index of a woken entry (see
    /// [`crate::waitv`]: which one, when several are woken, is not promised).
    ///
    /// # Errors
    /// As [`crate::waitv`].
    ///
    /// # Panics
    /// As [`crate::waitv`]: `entries` empty or longer than [`crate::WAITV_MAX`]; no memory for
    /// the waiters aborts the process.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU16, AtomicU32};
    /// use std::time::Duration;
    /// use ufutex::{Domain, DomainConfig, WaitEntry, WaitError};
    /// let d = Domain::new(DomainConfig::new())?;
    /// let (a, b) = (AtomicU16::new(1), AtomicU32::new(2));
    /// let entries = [WaitEntry::new(&a, 1), WaitEntry::new(&b, 2)];
    /// let r = d.waitv(&entries, Some(Duration::from_millis(1).into()));
    /// assert_eq!(r, Err(WaitError::TimedOut));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn waitv(&self, entries: &[WaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, WaitError> {
        crate::waitv::waitv_entries(self.tables(), entries, deadline.map(Into::into))
    }

    /// If `*from == expected`, wake up to `nr_wake` waiters of `from` and move up to
    /// `nr_requeue` more to `to`, within this domain; returns woken + moved (see
    /// [`crate::requeue`]).
    ///
    /// # Errors
    /// As [`crate::requeue`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{Domain, DomainConfig};
    /// let d = Domain::new(DomainConfig::new())?;
    /// let (from, to) = (AtomicU32::new(0), AtomicU32::new(0));
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while from.load(Ordering::Acquire) == 0 {
    ///             let _ = d.wait(&from, 0, None);
    ///         }
    ///     });
    ///     // Move the waiter onto `to` once it is queued, then wake it there.
    ///     while d.requeue(&from, 0, &to, 0, 1) != Ok(1) {
    ///         std::thread::yield_now();
    ///     }
    ///     from.store(1, Ordering::Release);
    ///     assert_eq!(d.wake(&to, 1), 1);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn requeue<F: Futex>(
        &self,
        from: &F,
        expected: F::Value,
        to: &F,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, WaitError> {
        crate::requeue::requeue_words(
            self.tables(),
            word_of(from),
            F::value_bits(expected),
            word_of(to),
            nr_wake,
            nr_requeue,
            Pays::Waiter, // as this domain's waits
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
    #[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
    static TABLES: Tables = Tables::empty(
        Slots::Auto,
        NumaMode::System { mpol: false },
        Some((crate::tables::initial_table(), crate::tables::AUTO_MIN)),
    );
    #[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
    static DEFAULT: Domain = Domain { tables: NonNull::from_ref(&TABLES), owned: false };
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
    /// The process default domain, which the free functions use: a wait through it is woken by
    /// [`crate::wake`], and the other way round.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::Domain;
    /// let w = AtomicU32::new(0);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while w.load(Ordering::Acquire) == 0 {
    ///             let _ = ufutex::wait(&w, 0, None);
    ///         }
    ///     });
    ///     w.store(1, Ordering::Release);
    ///     Domain::default_domain().wake(&w, 1);
    /// });
    /// ```
    pub fn default_domain() -> &'static Domain {
        default_domain()
    }
}
