//! Domains: a wait-queue table plus its sizing policy. The process default domain backs the
//! free functions; `Domain::new` makes a private one.

use crate::deadline::Deadline;
use crate::error::WaitError;
use crate::primitive::{AtomicPtr, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::table::Table;
use crate::waitv::WaitEntry;
use crate::word::{word_of, Futex};
use crate::MATCH_ANY;
use std::io;
use std::sync::{Arc, OnceLock};

/// How many buckets a domain's table has.
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

/// How to build a [`Domain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainConfig {
    slots: Slots,
}

impl Default for DomainConfig {
    fn default() -> Self {
        DomainConfig { slots: Slots::Auto }
    }
}

impl DomainConfig {
    /// The default: [`Slots::Auto`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Choose the table's sizing policy.
    pub fn slots(mut self, slots: Slots) -> Self {
        self.slots = slots;
        self
    }
}

/// Tables are never freed while their domain lives: retired ones wait here to be reused by a
/// later resize to the same size, so memory is bounded by one table per size ever used.
struct State {
    policy: Slots,
    /// Set once the default domain switched to `Large` (the prctl mirror: later sets fail).
    frozen: bool,
    // Boxed: a table must not move when the vector grows (threads hold pointers into it).
    #[allow(clippy::vec_box)]
    tables: Vec<Box<Table>>,
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
    current: AtomicPtr<Table>,
    state: Mutex<State>,
    threads: OnceLock<Arc<AtomicUsize>>,
}

/// The most buckets `Slots::Fixed` accepts (64 MiB of table); more fails with `ENOMEM`.
pub(crate) const MAX_SLOTS: usize = 1 << 20;
const AUTO_MIN: usize = 16;

/// 256 × CPUs, rounded up to a power of two (the kernel's global hash size).
pub(crate) fn large_slots() -> usize {
    static LARGE: OnceLock<usize> = OnceLock::new();
    *LARGE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        (256 * cpus.max(1) as usize).next_power_of_two()
    })
}

fn auto_slots(threads: usize) -> usize {
    threads.saturating_mul(4).next_power_of_two().clamp(AUTO_MIN, large_slots())
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// A domain with no table yet; `const` outside loom so the default domain can be a static.
macro_rules! empty_domain {
    ($policy:expr) => {
        Domain {
            current: AtomicPtr::new(std::ptr::null_mut()),
            state: Mutex::new(State { policy: $policy, frozen: false, tables: Vec::new() }),
            threads: OnceLock::new(),
        }
    };
}

impl Domain {
    #[cfg(not(ufutex_loom))]
    const fn empty(policy: Slots) -> Domain {
        empty_domain!(policy)
    }

    #[cfg(ufutex_loom)]
    fn empty(policy: Slots) -> Domain {
        empty_domain!(policy)
    }

    /// A new domain with its table allocated.
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2; `ENOMEM` when the table
    /// cannot be allocated.
    pub fn new(config: DomainConfig) -> io::Result<Domain> {
        let d = Domain::empty(Slots::Auto);
        d.apply(config.slots, false)?;
        Ok(d)
    }

    /// Change the sizing policy, resizing the table now if its size changes.
    ///
    /// # Errors
    /// `EINVAL` for a `Fixed` size that is not a power of two ≥ 2; `EBUSY` if this is the
    /// process default domain and it was switched to `Large` (final, as for the kernel's
    /// global hash); `ENOMEM` when the new table cannot be allocated.
    pub fn set_slots(&self, slots: Slots) -> io::Result<()> {
        self.apply(slots, std::ptr::eq(self, default_domain()))
    }

    /// The current number of buckets (a `Large` table reports its real size).
    pub fn slots(&self) -> usize {
        self.table_if_any().map_or_else(|| self.initial_slots(), Table::slots)
    }

    /// The current sizing policy.
    pub fn policy(&self) -> Slots {
        self.lock_state().policy
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn initial_slots(&self) -> usize {
        match self.lock_state().policy {
            Slots::Auto => auto_slots(self.thread_count()),
            Slots::Fixed(n) => n,
            Slots::Large => large_slots(),
        }
    }

    fn apply(&self, slots: Slots, final_large: bool) -> io::Result<()> {
        let target = match slots {
            Slots::Fixed(n) if n < 2 || !n.is_power_of_two() => return Err(errno(libc::EINVAL)),
            Slots::Fixed(n) if n > MAX_SLOTS => return Err(errno(libc::ENOMEM)),
            Slots::Fixed(n) => n,
            Slots::Large => large_slots(),
            Slots::Auto => auto_slots(self.thread_count()),
        };
        let mut st = self.lock_state();
        if st.frozen {
            return Err(errno(libc::EBUSY));
        }
        st.policy = slots;
        st.frozen = final_large && slots == Slots::Large;
        self.resize_locked(&mut st, target);
        Ok(())
    }

    /// Make the current table `slots` big, with the state lock held (one resizer at a time).
    fn resize_locked(&self, st: &mut State, slots: usize) {
        let cur = self.current.load(Ordering::Acquire);
        // SAFETY: a non-null `current` points into `st.tables`, which frees nothing while the
        // domain lives.
        let cur: Option<&Table> = unsafe { cur.as_ref() };
        if cur.is_some_and(|t| t.slots() == slots) {
            return;
        }
        let reuse = st.tables.iter().position(|t| t.slots() == slots);
        let new: *const Table = match reuse {
            Some(i) => &*st.tables[i],
            None => {
                // A fresh table is seen by no one before it is published: counts start at 0.
                st.tables.push(Box::new(Table::new(slots, 0)));
                &**st.tables.last().expect("just pushed")
            }
        };
        // SAFETY: `new` points into a Box owned by `st.tables`, never freed while we live.
        let new_ref = unsafe { &*new };
        let publish = || self.current.store(new as *mut Table, Ordering::Release);
        match cur {
            Some(old) => old.migrate_to(new_ref, reuse.is_some(), publish),
            None => {
                debug_assert!(reuse.is_none(), "no table can be retired before the first");
                publish();
            }
        }
    }

    fn thread_count(&self) -> usize {
        self.threads.get().map_or(0, |t| t.load(Ordering::Relaxed))
    }

    /// The counter a thread registers with when it first waits here.
    pub(crate) fn threads(&self) -> &Arc<AtomicUsize> {
        self.threads.get_or_init(|| Arc::new(AtomicUsize::new(0)))
    }

    /// A new thread waits here: grow an `Auto` table if 4 × threads outgrew it.
    #[cold]
    pub(crate) fn thread_arrived(&self, threads: usize) {
        let target = auto_slots(threads);
        if self.table_if_any().is_some_and(|t| t.slots() >= target) {
            return;
        }
        let mut st = self.lock_state();
        let grows = self.table_if_any().is_none_or(|t| t.slots() < target);
        if st.policy == Slots::Auto && grows {
            self.resize_locked(&mut st, target);
        }
    }

    /// The current table, if one was allocated yet (a wake needs none: no table, no waiter).
    #[inline]
    pub(crate) fn table_if_any(&self) -> Option<&Table> {
        // Acquire: pairs with the publishing store, so the table's buckets are initialised.
        let t = self.current.load(Ordering::Acquire);
        // SAFETY: tables are owned by `state.tables` and never freed while `self` lives.
        unsafe { t.as_ref() }
    }

    /// The current table, allocating the first one.
    #[inline]
    pub(crate) fn table(&self) -> &Table {
        match self.table_if_any() {
            Some(t) => t,
            None => self.first_table(),
        }
    }

    #[cold]
    fn first_table(&self) -> &Table {
        let mut st = self.lock_state();
        if self.table_if_any().is_none() {
            let slots = match st.policy {
                Slots::Auto => auto_slots(self.thread_count()),
                Slots::Fixed(n) => n,
                Slots::Large => large_slots(),
            };
            self.resize_locked(&mut st, slots);
        }
        drop(st);
        self.table_if_any().expect("allocated above")
    }

    /// Whether `t` is still current. Call with one of `t`'s buckets locked: a resize publishes
    /// the new table while holding every old bucket lock, so Relaxed suffices — the lock's
    /// Acquire orders this load after the resize's publication.
    #[inline]
    pub(crate) fn is_current(&self, t: &Table) -> bool {
        std::ptr::eq(self.current.load(Ordering::Relaxed), t)
    }

    /// Waiters queued anywhere in this domain (walks every bucket under its lock).
    #[doc(hidden)]
    pub fn queued_waiters(&self) -> usize {
        self.table_if_any().map_or(0, Table::queued)
    }

    /// Bytes held by this domain's tables (current and retired).
    #[doc(hidden)]
    pub fn memory_footprint(&self) -> usize {
        self.lock_state().tables.iter().map(|t| t.footprint()).sum()
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
        crate::wait::wait_word(self, word_of(f), F::value_bits(expected), mask, deadline.map(Into::into))
    }

    /// Wake up to `n` waiters on `f` in this domain; see [`crate::wake`].
    pub fn wake<F: Futex>(&self, f: &F, n: usize) -> usize {
        crate::wake::wake_word(self, word_of(f), n, MATCH_ANY)
    }

    /// Wake up to `n` waiters on `f` whose mask shares a bit with `mask`.
    pub fn wake_bitset<F: Futex>(&self, f: &F, n: usize, mask: u64) -> usize {
        crate::wake::wake_word(self, word_of(f), n, mask)
    }

    /// Wait on any of `entries` in this domain; see [`crate::waitv`].
    ///
    /// # Errors
    /// As [`crate::waitv`].
    pub fn waitv(&self, entries: &[WaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, WaitError> {
        crate::waitv::waitv_entries(self, entries, deadline.map(Into::into))
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
        crate::requeue::requeue_words(self, word_of(from), F::value_bits(expected), word_of(to), nr_wake, nr_requeue)
    }
}

impl std::fmt::Debug for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Domain").field("slots", &self.slots()).field("policy", &self.policy()).finish()
    }
}

/// The process default domain (automatic sizing until `set_slots` says otherwise).
#[cfg(not(ufutex_loom))]
pub(crate) fn default_domain() -> &'static Domain {
    static DEFAULT: Domain = Domain::empty(Slots::Auto);
    &DEFAULT
}

#[cfg(ufutex_loom)]
pub(crate) fn default_domain() -> &'static Domain {
    loom::lazy_static! {
        static ref DEFAULT: Domain = Domain::new(DomainConfig::new()).expect("default domain");
    }
    &DEFAULT
}

impl Domain {
    /// The process default domain, which the free functions use.
    pub fn default_domain() -> &'static Domain {
        default_domain()
    }
}
