//! Named cross-process objects: find an object by a 64-bit key in a namespace — a shared segment
//! of the user's, beside the shared futex table — without a lock or a system call, then operate
//! on it with atomics, entering the kernel only to sleep or wake (its word is a process-shared
//! futex word: `shared`).
//!
//! What there is (issue 15): namespaces; 64-bit keys and byte-string names; create/open with
//! semget's flags and errors plus an "it existed" answer; counting semaphores, events (manual,
//! auto, pulse), mutexes with an owner and the abandoned state, raw futex words of 8 to 64 bits;
//! [`wait_any`] over up to 1024 of them; removal now (waiters see `Removed`, like `IPC_RMID`'s
//! `EIDRM`); reference-counted lifetime ([`Namespace::counted`]: an object that dies with the
//! last handle of every process, a killed process's included); generation-checked handles;
//! crash-consistent creation, removal and reference changes; a table that grows by levels
//! while lookups go on; the C ABI and the `ufutex-named` tool.
//!
//! The trust model is the shared table's: one user's processes trust each other; a namespace
//! is a 0600 file of the user's (`EACCES` otherwise); a corrupt one gives errors, never UB.

#![cfg_attr(ufutex_loom, allow(dead_code, unused_imports))]

#[cfg(not(ufutex_loom))]
mod counted;
#[cfg(not(ufutex_loom))]
mod event;
#[cfg(all(test, ufutex_loom))]
mod loom_tests;
#[cfg(not(ufutex_loom))]
mod mutex;
mod table;

#[cfg(not(ufutex_loom))]
pub use counted::{Handle, Held, HELD_MAX};
#[cfg(not(ufutex_loom))]
pub use event::Event;
#[cfg(not(ufutex_loom))]
pub use mutex::{Acquired, Mutex};
#[cfg(not(ufutex_loom))]
use table::Unchanged;
use table::{
    Found, Header, Levels, NameSlot, Slot, Table, TableError, COUNTED, KIND_WORD, KIND_WORD16, KIND_WORD64, KIND_WORD8,
    MAX_LEVELS, REMOVED,
};
pub use table::{Key, Open, NAME_MAX};

use crate::deadline::Deadline;
use crate::shared::{self, SharedError};
use crate::word::Futex;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

const MAGIC: u64 = 0x5546_5554_584e_5331; // "UFUTXNS1"
const VERSION: u32 = 9;
const PAGE: usize = 4096;
const KIND_SEMAPHORE: u32 = 1;
const KIND_MUTEX: u32 = 3;
const KIND_EVENT: u32 = 4;
/// Slots of a new namespace's first level: 2^16 (one object per 64 bytes and its name slot per
/// 64 more: a sparse 8 MiB file), so that 32,768 keys fit at half load in one dense level — a
/// lookup there touches few pages, and keeps its cache and TLB entries; past that it grows by
/// levels, and a lookup goes by the level hints (`Table::hints`: 10^6 keys 105 ns a hit, 22 ns
/// a miss; a first level of 2^21 makes 31,900-key lookups cost 25 ns instead of 9: BENCHMARKS.md).
/// `UFUTEX_NAMED_SLOTS` (a power of two, at least 32) sets it when the namespace is created.
const DEFAULT_ORDER: u32 = 16;
/// The most a semaphore counts to (SysV's `SEMVMX` is 32767; ours stays clear of the removed
/// mark). A create with more is [`NamedError::Invalid`]; a post past it is [`NamedError::Range`].
///
/// # Examples
/// ```
/// use ufutex::named::{NamedError, Namespace, Open, SEMAPHORE_MAX};
/// let name = format!("doc-semaphore-max-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_0100 + std::process::id() as u64;
/// let (sem, _) = ns.semaphore(key, Open::CreateNew, SEMAPHORE_MAX).unwrap();
/// assert_eq!(sem.post(1), Err(NamedError::Range)); // the count stays
/// assert_eq!(sem.value(), Ok(SEMAPHORE_MAX));
/// ns.remove(key).unwrap();
/// let err = ns.semaphore(key, Open::CreateNew, SEMAPHORE_MAX + 1).unwrap_err();
/// assert_eq!(err, NamedError::Invalid);
/// Namespace::unlink(&name).unwrap();
/// ```
pub const SEMAPHORE_MAX: u32 = i32::MAX as u32;

/// Why a named-object operation failed; [`NamedError::errno`] is semget/semop's errno.
/// Non-exhaustive: match it with a catch-all arm.
///
/// # Examples
/// ```
/// use ufutex::named::{NamedError, Namespace, Open};
/// let name = format!("doc-named-error-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_0200 + std::process::id() as u64;
/// let e = ns.mutex(key, Open::Existing).unwrap_err();
/// assert_eq!(e, NamedError::NotFound);
/// assert_eq!(e.errno(), libc::ENOENT);
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NamedError {
    /// `ENOENT`: no object has that key ([`Open::Existing`]).
    NotFound,
    /// `EEXIST`: an object has that key ([`Open::CreateNew`]).
    Exists,
    /// `EINVAL`: the key's object is of another kind, or a name or value is invalid.
    Invalid,
    /// `EIDRM`: the object was removed (the handle's, even if its key was reused since).
    Removed,
    /// `ENOSPC`: the namespace is full.
    Full,
    /// `ENAMETOOLONG`: a name longer than [`NAME_MAX`] bytes.
    NameTooLong,
    /// `ERANGE`: a semaphore would pass [`SEMAPHORE_MAX`].
    Range,
    /// `EAGAIN`: a semaphore at 0 where the caller would not sleep (the C ABI's
    /// `ufutex_sem_trywait`; [`Semaphore::try_wait`] answers `Ok(false)` instead).
    WouldBlock,
    /// `EPERM`: a mutex released by a thread that does not hold it.
    NotOwner,
    /// The deadline passed, a signal handler ran, or the shared table failed.
    Shared(SharedError),
}

impl NamedError {
    /// The errno the C ABI returns for this error (a `Shared` one's is [`SharedError::errno`]).
    /// An errno does not name one variant: `Shared(NoSpace)` and `Full` are both `ENOSPC`.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::NamedError;
    /// use ufutex::shared::SharedError;
    /// assert_eq!(NamedError::Removed.errno(), libc::EIDRM);
    /// assert_eq!(NamedError::Shared(SharedError::TimedOut).errno(), libc::ETIMEDOUT);
    /// ```
    pub fn errno(self) -> i32 {
        match self {
            NamedError::NotFound => libc::ENOENT,
            NamedError::Exists => libc::EEXIST,
            NamedError::Invalid => libc::EINVAL,
            NamedError::Removed => libc::EIDRM,
            NamedError::Full => libc::ENOSPC,
            NamedError::Range => libc::ERANGE,
            NamedError::NameTooLong => libc::ENAMETOOLONG,
            NamedError::WouldBlock => libc::EAGAIN,
            NamedError::NotOwner => libc::EPERM,
            NamedError::Shared(e) => e.errno(),
        }
    }
}

impl fmt::Display for NamedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamedError::Shared(e) => e.fmt(f),
            other => write!(f, "{}", std::io::Error::from_raw_os_error(other.errno())),
        }
    }
}

impl std::error::Error for NamedError {}

impl From<TableError> for NamedError {
    fn from(e: TableError) -> NamedError {
        match e {
            TableError::NotFound => NamedError::NotFound,
            TableError::Exists => NamedError::Exists,
            TableError::WrongKind => NamedError::Invalid,
            TableError::Full => NamedError::Full,
            TableError::Shared(e) => NamedError::Shared(e),
        }
    }
}

impl From<SharedError> for NamedError {
    fn from(e: SharedError) -> NamedError {
        NamedError::Shared(e)
    }
}

#[cfg(not(ufutex_loom))]
/// A namespace: the user's segment `ns-<name>` beside the shared table, mapped for the life of
/// the process. Every `Namespace` of one file in a process shares one mapping; it is never
/// unmapped, so handles stay valid while their `Namespace` lives. Only its user's processes
/// can open it.
///
/// # Examples
/// ```
/// use ufutex::named::{Namespace, Open};
/// let key = 0x5eed_0300 + std::process::id() as u64;
/// let name = format!("doc-namespace-{}", std::process::id());
/// // Two opens of one name: one namespace.
/// let a = Namespace::open(&name).unwrap();
/// let b = Namespace::open(&name).unwrap();
/// a.semaphore(key, Open::CreateNew, 2).unwrap();
/// let (sem, existed) = b.semaphore(key, Open::Existing, 0).unwrap();
/// assert!(existed);
/// assert_eq!(sem.value(), Ok(2));
/// a.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
pub struct Namespace {
    /// The file's mapping (shared by every `Namespace` of the same file in this process).
    map: &'static Mapping,
    /// Its header, ledgers and level 0, here as well: a lookup that finds its key in level 0
    /// reads nothing of the namespace but the slots it probes (see `Table::first`).
    header: &'static Header,
    holders: &'static counted::Holders,
    first: (&'static [Slot], &'static [NameSlot]),
    hints: &'static [AtomicU16],
}

#[cfg(not(ufutex_loom))]
impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Namespace").field("slots", &self.capacity()).finish()
    }
}

#[cfg(not(ufutex_loom))]
impl Namespace {
    /// Open (or create) the namespace `name` (letters, digits, `.`, `_`, `-`; 1 to 64 bytes).
    /// A process maps each namespace file once: opening it again reuses the mapping (a new file
    /// under the name, after [`Namespace::unlink`], is mapped anew).
    ///
    /// # Errors
    /// [`NamedError::Invalid`] for a bad name; `Shared(Access)` if its file is not safely the
    /// user's; `Shared(NotRecoverable)` if it is corrupt or of another version while a process
    /// has it mapped (one nobody uses is made afresh, empty); `Shared(NoMemory)`.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-example-{}", std::process::id()); // its own, in a parallel run too
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0000 + std::process::id() as u64;
    /// let (sem, existed) = ns.semaphore(key, Open::CreateNew, 1).unwrap();
    /// assert!(!existed);
    /// sem.wait(None).unwrap(); // 1 → 0, no system call
    /// sem.post(1).unwrap();
    /// ns.remove(key).unwrap();
    /// assert_eq!(sem.post(1), Err(ufutex::named::NamedError::Removed));
    /// Namespace::unlink(&name).unwrap(); // its file; our mapping stays usable
    /// ```
    pub fn open(name: &str) -> Result<Namespace, NamedError> {
        if !valid_name(name) {
            return Err(NamedError::Invalid);
        }
        let path = shared::file::user_file(&format!("ns-{name}"))?;
        let map = shared::file::with_owned_file(&path, |fd, st| mapped(fd, st, &path))?;
        let first = map.level(0).ok_or(NamedError::Shared(SharedError::NotRecoverable))?;
        let ns = Namespace { map, header: map.header, holders: map.holders, first, hints: map.hints() };
        // Objects that only dead processes held die now (best effort: a namespace that opens
        // is usable even if the shared table is not).
        let _ = ns.reap();
        Ok(ns)
    }

    fn table(&self) -> Table<'static> {
        Table { header: self.header, first: self.first, levels: self.map, ledgers: self.holders, hints: self.hints }
    }

    /// The same opens for counted objects: they live while some process holds a handle
    /// ([`Held`]), and die with the last (Windows handles; POSIX `sem_unlink` and the last
    /// `sem_close`). A counted object and a plain one are of different kinds: opening one as
    /// the other is [`NamedError::Invalid`]. [`Namespace::remove`] removes either now.
    ///
    /// Opening it again in a process that holds it, or cloning a handle, writes nothing
    /// shared; a process's first handle to an object and its last take the namespace's
    /// changers' lock (as creating does). A process that dies gives its references back when
    /// the next process opens the namespace, takes its place in the shared table, or calls
    /// [`Namespace::reap`]. At most [`HELD_MAX`] objects held at once per process.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open, NamedError};
    /// let name = format!("doc-counted-{}", std::process::id()); // its own, in a parallel run too
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0xc0_0000 + std::process::id() as u64;
    /// let (ev, _) = ns.counted().event(key, Open::Create, true, false).unwrap();
    /// let again = ev.clone();
    /// drop(ev);
    /// again.set().unwrap(); // still held
    /// drop(again); // the last handle: the object dies
    /// assert_eq!(ns.counted().event(key, Open::Existing, true, false).unwrap_err(), NamedError::NotFound);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn counted(&self) -> Counted<'_> {
        Counted { ns: self }
    }

    /// Open or create the object `key` (`init`: its kind, and a new one's word and aux); a
    /// `counted` one is held by this process from here on (see [`Counted`]).
    #[inline(always)]
    fn open_object(
        &self,
        key: Key<'_>,
        init: (u32, u32, u32),
        how: Open,
        counted: bool,
    ) -> Result<(Found, bool), NamedError> {
        // The common case inline: an existing plain object by 64-bit key.
        let plain = !counted && how != Open::CreateNew && !key.named();
        if plain {
            let t = self.table();
            // (The grown case apart, so that the table is not built in memory for it first.)
            let found = if t.grew() { Found::unpack(self.lookup_grown(key)) } else { t.lookup_first(key) };
            if let Some(f) = found {
                return if f.kind == init.0 { Ok((f, true)) } else { Err(NamedError::Invalid) };
            }
        }
        self.open_object_slow(key, init, how, counted, plain)
    }

    /// [`Table::lookup`] in a namespace that grew, packed ([`Found::unpack`]).
    #[inline(never)]
    fn lookup_grown(&self, key: Key<'_>) -> u128 {
        self.table().lookup_grown(key)
    }

    /// [`Namespace::open_object`] for the rest (`looked`: the key was looked up, not found).
    #[inline(never)]
    fn open_object_slow(
        &self,
        key: Key<'_>,
        (kind, word, aux): (u32, u32, u32),
        how: Open,
        counted: bool,
        looked: bool,
    ) -> Result<(Found, bool), NamedError> {
        if let Key::Name(n) = key {
            if n.len() > NAME_MAX {
                return Err(NamedError::NameTooLong);
            }
        }
        if counted {
            return self.hold(key, (kind | COUNTED, word, aux), how);
        }
        // An open looks (unless it did); a create looks under the lock.
        if how == Open::Existing {
            let t = self.table();
            return match if looked { None } else { t.lookup(key) } {
                Some(f) if f.kind == kind => Ok((f, true)),
                Some(_) => Err(NamedError::Invalid),
                None => Err(NamedError::NotFound),
            };
        }
        let p = shared::process::proc()?;
        Ok(self.table().create(key, (kind, word, aux), how, p.me, p, &wake_all)?)
    }

    /// The counting semaphore `key`, opened or created (`initial`: a new one's count), and
    /// whether it existed. An existing one keeps its count (`initial` is then ignored).
    ///
    /// # Errors
    /// [`NamedError::NotFound`], [`NamedError::Exists`] as `how` says; [`NamedError::Invalid`]
    /// if the key's object is not a semaphore or `initial` > [`SEMAPHORE_MAX`];
    /// [`NamedError::NameTooLong`] for a name longer than [`NAME_MAX`]; [`NamedError::Full`]
    /// when the namespace cannot grow; `Shared(_)` if the shared table cannot be used.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-semaphore-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0400 + std::process::id() as u64;
    /// assert_eq!(ns.semaphore(key, Open::Existing, 0).unwrap_err(), NamedError::NotFound);
    /// let (sem, existed) = ns.semaphore(key, Open::Create, 2).unwrap();
    /// assert!(!existed);
    /// let (again, existed) = ns.semaphore(key, Open::Create, 9).unwrap();
    /// assert!(existed);
    /// assert_eq!(again.value(), Ok(2)); // the same semaphore: its count stays
    /// assert_eq!(ns.mutex(key, Open::Existing).unwrap_err(), NamedError::Invalid); // not a mutex
    /// assert_eq!(sem.try_wait(), Ok(true));
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn semaphore<'k>(
        &self,
        key: impl Into<Key<'k>>,
        how: Open,
        initial: u32,
    ) -> Result<(Semaphore<'_>, bool), NamedError> {
        self.open_semaphore(key.into(), how, initial, false)
    }

    /// [`Namespace::semaphore`], plain or `counted` (then this process holds it: see
    /// [`Namespace::counted`]; the caller lets go with [`Namespace::let_go`]).
    // (Inlined into the callers, lookup and all: a call boundary here cost lookups their
    // overlap — a loop of lookups over 31,900 keys ran 30 → 85 ns each, BENCHMARKS.md.)
    #[inline(always)]
    pub(crate) fn open_semaphore(
        &self,
        key: Key<'_>,
        how: Open,
        initial: u32,
        counted: bool,
    ) -> Result<(Semaphore<'_>, bool), NamedError> {
        if initial > SEMAPHORE_MAX {
            return Err(NamedError::Invalid);
        }
        let (f, existed) = self.open_object(key, (KIND_SEMAPHORE, initial, 0), how, counted)?;
        Ok((Semaphore { ns: self, slot: f.slot, gen: f.gen }, existed))
    }

    /// The raw 32-bit futex word `key` (a new one holds 0), opened or created, and whether it
    /// existed. Wait and wake on it with [`crate::shared`]; the namespace gives it no meaning.
    ///
    /// # Errors
    /// As [`Namespace::semaphore`] (`Invalid`: the key's object is not a 32-bit word).
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::Ordering;
    /// use ufutex::named::{Namespace, Open};
    /// use ufutex::shared::{self, SharedError};
    /// let name = format!("doc-word-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0500 + std::process::id() as u64;
    /// let (w, _) = ns.word(key, Open::CreateNew).unwrap();
    /// let word = w.get().unwrap();
    /// std::thread::scope(|s| {
    ///     // Sleeps while the word holds 0 (any process that opens the key may wake it).
    ///     let t = s.spawn(|| shared::wait(word, 0, None));
    ///     word.store(1, Ordering::Release);
    ///     shared::wake(word, 1).unwrap();
    ///     // Woken, or the store came first.
    ///     assert!(matches!(t.join().unwrap(), Ok(()) | Err(SharedError::WouldBlock)));
    /// });
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn word<'k>(&self, key: impl Into<Key<'k>>, how: Open) -> Result<(Word<'_>, bool), NamedError> {
        self.word_of(key, how)
    }

    /// The raw futex word `key` of `F`'s size — `AtomicU8`, `AtomicU16`, `AtomicU32` or
    /// `AtomicU64` (a new one holds 0) — opened or created, and whether it existed. A word's
    /// size is part of its kind: opening it at another size is [`NamedError::Invalid`].
    ///
    /// # Errors
    /// As [`Namespace::semaphore`] (`Invalid`: the key's object is not a word of `F`'s size).
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// use ufutex::shared::{self, SharedError};
    /// let name = format!("doc-word-of-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0600 + std::process::id() as u64;
    /// let (w, _) = ns.word_of::<AtomicU64>(key, Open::CreateNew).unwrap();
    /// w.get().unwrap().store(1 << 40, Ordering::Relaxed);
    /// assert_eq!(shared::wait(w.get().unwrap(), 0, None), Err(SharedError::WouldBlock));
    /// assert_eq!(ns.word_of::<AtomicU8>(key, Open::Existing).unwrap_err(), NamedError::Invalid);
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn word_of<'k, F: Futex>(&self, key: impl Into<Key<'k>>, how: Open) -> Result<(Word<'_, F>, bool), NamedError> {
        self.open_word(key.into(), how, false)
    }

    /// [`Namespace::word_of`], plain or `counted` (as [`Namespace::open_semaphore`]).
    pub(crate) fn open_word<F: Futex>(
        &self,
        key: Key<'_>,
        how: Open,
        counted: bool,
    ) -> Result<(Word<'_, F>, bool), NamedError> {
        let (f, existed) = self.open_object(key, (word_kind::<F>(), 0, 0), how, counted)?;
        Ok((Word::from_parts(self, f.slot, f.gen), existed))
    }

    /// The mutex `key`, opened or created (unowned), and whether it existed. An existing one
    /// keeps its owner.
    ///
    /// # Errors
    /// As [`Namespace::semaphore`] (`Invalid`: the key's object is not a mutex).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Acquired, Namespace, Open};
    /// let name = format!("doc-ns-mutex-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0700 + std::process::id() as u64;
    /// let (m, existed) = ns.mutex(key, Open::Create).unwrap();
    /// assert!(!existed);
    /// assert_eq!(m.lock(None), Ok(Acquired::Acquired));
    /// let (same, _) = ns.mutex(key, Open::Existing).unwrap();
    /// same.unlock().unwrap(); // one mutex: this thread held it
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn mutex<'k>(&self, key: impl Into<Key<'k>>, how: Open) -> Result<(Mutex<'_>, bool), NamedError> {
        self.open_mutex(key.into(), how, false)
    }

    /// [`Namespace::mutex`], plain or `counted` (as [`Namespace::open_semaphore`]).
    pub(crate) fn open_mutex(&self, key: Key<'_>, how: Open, counted: bool) -> Result<(Mutex<'_>, bool), NamedError> {
        let (f, existed) = self.open_object(key, (KIND_MUTEX, 0, 0), how, counted)?;
        Ok((Mutex { ns: self, slot: f.slot, gen: f.gen }, existed))
    }

    /// The event `key`, opened or created (`manual`: manual reset, else auto reset; `signaled`:
    /// a new one's state), and whether it existed (an existing one keeps its mode and state).
    ///
    /// # Errors
    /// As [`Namespace::semaphore`] (`Invalid`: the key's object is not an event).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-ns-event-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0800 + std::process::id() as u64;
    /// // Manual reset, created signaled: waits return at once until it is reset.
    /// let (ev, _) = ns.event(key, Open::CreateNew, true, true).unwrap();
    /// ev.wait(None).unwrap();
    /// ev.wait(None).unwrap();
    /// let (_, existed) = ns.event(key, Open::Create, false, false).unwrap(); // mode and state kept
    /// assert!(existed);
    /// ev.wait(None).unwrap();
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn event<'k>(
        &self,
        key: impl Into<Key<'k>>,
        how: Open,
        manual: bool,
        signaled: bool,
    ) -> Result<(Event<'_>, bool), NamedError> {
        self.open_event(key.into(), how, (manual, signaled), false)
    }

    /// [`Namespace::event`], plain or `counted` (as [`Namespace::open_semaphore`]).
    pub(crate) fn open_event(
        &self,
        key: Key<'_>,
        how: Open,
        (manual, signaled): (bool, bool),
        counted: bool,
    ) -> Result<(Event<'_>, bool), NamedError> {
        let mode = if manual { event::MANUAL } else { 0 };
        let (f, existed) = self.open_object(key, (KIND_EVENT, u32::from(signaled), mode), how, counted)?;
        Ok((Event { ns: self, slot: f.slot, gen: f.gen }, existed))
    }

    /// Remove the object `key` now (`IPC_RMID`): its handles fail with [`NamedError::Removed`]
    /// from here on, its waiters wake and see that, and the key is free for a new object.
    ///
    /// # Errors
    /// [`NamedError::NotFound`] if no object has the key; `Shared(_)` if the shared table cannot
    /// be used.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-remove-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0900 + std::process::id() as u64;
    /// let (sem, _) = ns.semaphore(key, Open::CreateNew, 0).unwrap();
    /// std::thread::scope(|s| {
    ///     let t = s.spawn(|| sem.wait(None));
    ///     ns.remove(key).unwrap();
    ///     // Woken by the removal, or it saw it before it slept.
    ///     assert_eq!(t.join().unwrap(), Err(NamedError::Removed));
    /// });
    /// assert_eq!(ns.remove(key), Err(NamedError::NotFound));
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn remove<'k>(&self, key: impl Into<Key<'k>>) -> Result<(), NamedError> {
        let p = shared::process::proc()?;
        Ok(self.table().remove(key.into(), p.me, p, &wake_all)?)
    }

    /// Remove the namespace `name`'s file (as `sem_unlink` does a name): processes that have it
    /// mapped keep using it; the next [`Namespace::open`] of the name makes a new, empty one.
    ///
    /// # Errors
    /// [`NamedError::Invalid`] for a bad name, [`NamedError::NotFound`] if there is none;
    /// `Shared(Access)` if the file cannot be removed for another reason; `Shared(_)` if the
    /// user's directory cannot be found.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-unlink-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// assert_eq!(Namespace::unlink(&name), Err(NamedError::NotFound));
    /// assert_eq!(Namespace::unlink("no/slash"), Err(NamedError::Invalid));
    /// // Still usable here, and gone for the next open.
    /// let (sem, _) = ns.semaphore(1, Open::CreateNew, 1).unwrap();
    /// assert_eq!(sem.try_wait(), Ok(true));
    /// ns.remove(1).unwrap();
    /// ```
    pub fn unlink(name: &str) -> Result<(), NamedError> {
        if !valid_name(name) {
            return Err(NamedError::Invalid);
        }
        let path = shared::file::user_file(&format!("ns-{name}"))?;
        std::fs::remove_file(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => NamedError::NotFound,
            _ => NamedError::Shared(SharedError::Access),
        })?;
        // Its ledgers: nobody finds them by this name any more.
        remove_ledgers(&path);
        Ok(())
    }

    /// How many objects the namespace can hold now (its slots; lookups stay short below half).
    /// It grows: when its newest level of slots is half used, a new one twice as large is added
    /// (objects stay where they are; lookups go on meanwhile). Not a limit: creating past half
    /// of it grows the namespace.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::Namespace;
    /// let name = format!("doc-capacity-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// assert!(ns.capacity() >= 32);
    /// assert!(ns.len() <= ns.capacity());
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn capacity(&self) -> usize {
        self.table().capacity()
    }

    /// The namespaces of this user (their names, sorted), for people who debug. A snapshot of
    /// the files: one unlinked meanwhile may still show.
    ///
    /// The list is empty when the user's directory does not exist.
    ///
    /// # Errors
    /// `Shared(Access)` if the user's directory cannot be read; `Shared(_)` if it cannot be
    /// found (see `ufutex.h` on where it is).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::Namespace;
    /// let name = format!("doc-list-{}", std::process::id());
    /// let _ns = Namespace::open(&name).unwrap();
    /// assert!(Namespace::list().unwrap().contains(&name));
    /// Namespace::unlink(&name).unwrap();
    /// assert!(!Namespace::list().unwrap().contains(&name));
    /// ```
    pub fn list() -> Result<Vec<String>, NamedError> {
        let probe = shared::file::user_file("ns-")?;
        let (dir, prefix) = probe.rsplit_once('/').ok_or(NamedError::Invalid)?;
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            // No directory, no namespace in it (opening one reports why it cannot be created).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(_) => return Err(NamedError::Shared(SharedError::Access)),
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|f| f.strip_prefix(prefix).map(str::to_string))
            .filter(|n| valid_name(n))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Every live object, in slot order (a snapshot, for people who debug: objects created or
    /// removed meanwhile may or may not show).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Kind, Namespace, Open};
    /// let name = format!("doc-objects-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0a00 + std::process::id() as u64;
    /// ns.semaphore(key, Open::CreateNew, 3).unwrap();
    /// let o = ns.objects().into_iter().find(|o| o.key == key).unwrap();
    /// assert_eq!((o.kind, o.word, o.name, o.holders), (Kind::Semaphore, 3, None, None));
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn objects(&self) -> Vec<Object> {
        let t = self.table();
        (0..t.capacity())
            .filter_map(|i| {
                let s = t.slot(i as u32)?;
                let key = s.key.load(Ordering::Relaxed);
                let name = t.name_of(i);
                let f = match &name {
                    Some(n) => t.lookup(Key::Name(n)),
                    None => t.lookup(Key::Id(key)),
                }
                .filter(|f| f.slot as usize == i)?;
                let kind = Kind::of(f.kind & !COUNTED)?;
                // (A mutex being taken from a dead owner shows its taker: `PENDING` masked.)
                let owner = s.owner.load(Ordering::Relaxed) & !mutex::PENDING;
                let abandoned = owner == mutex::ABANDONED;
                Some(Object {
                    key,
                    name,
                    kind,
                    generation: f.gen,
                    word: {
                        let lo = u64::from(s.word.load(Ordering::Relaxed));
                        match kind {
                            // (Little-endian: a small word is the low bytes of `word`.)
                            Kind::Word8 => lo & 0xff,
                            Kind::Word16 => lo & 0xffff,
                            Kind::Word64 => u64::from(s.word_hi.load(Ordering::Relaxed)) << 32 | lo,
                            _ => lo,
                        }
                    },
                    owner: (owner != 0 && !abandoned).then(|| ((owner as u32).wrapping_sub(1), (owner >> 32) as u32)),
                    abandoned,
                    aux: s.aux.load(Ordering::Relaxed),
                    holders: (f.kind & COUNTED != 0).then(|| s.holders.load(Ordering::Relaxed)),
                })
                // (Still the object looked up: else its fields may be another's.)
                .filter(|_| t.check(i as u32, f.gen).is_some())
            })
            .collect()
    }

    /// How many objects the namespace holds (live ones, of every process; counted ones too).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-len-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// ns.event(1, Open::CreateNew, false, false).unwrap();
    /// ns.mutex(2, Open::CreateNew).unwrap();
    /// assert_eq!(ns.len(), 2);
    /// ns.remove(1).unwrap();
    /// ns.remove(2).unwrap();
    /// assert_eq!(ns.len(), 0);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn len(&self) -> usize {
        self.map.header.live() as usize
    }

    /// Whether it holds none ([`Namespace::len`] is 0).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-is-empty-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// assert!(ns.is_empty());
    /// ns.word(1, Open::CreateNew).unwrap();
    /// assert!(!ns.is_empty());
    /// ns.remove(1).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object's slot, if the handle still names it.
    pub(crate) fn live(&self, slot: u32, gen: u32) -> Result<&'static Slot, NamedError> {
        self.table().check(slot, gen).ok_or(NamedError::Removed)
    }

    /// The kind of the object a handle names, while it lives (for handles that do not carry
    /// their kind: the C ABI's).
    ///
    /// # Errors
    /// [`NamedError::Removed`]; [`NamedError::Invalid`] for a kind this build does not know.
    pub(crate) fn kind(&self, slot: u32, gen: u32) -> Result<Kind, NamedError> {
        let s = self.live(slot, gen)?;
        let kind = Kind::of(s.kind.load(Ordering::Relaxed) & !(table::NAMED | COUNTED)).ok_or(NamedError::Invalid)?;
        // The kind was read after the state: still the same object?
        self.live(slot, gen)?;
        Ok(kind)
    }
}

/// The opens of counted objects ([`Namespace::counted`]): as [`Namespace`]'s, with a [`Held`]
/// handle that keeps the object alive. A counted object is of another kind than a plain one
/// of the same key: each open finds only its own.
///
/// # Examples
/// ```
/// use ufutex::named::{NamedError, Namespace, Open};
/// let name = format!("doc-counted-type-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_1400 + std::process::id() as u64;
/// let counted = ns.counted();
/// let (sem, _) = counted.semaphore(key, Open::CreateNew, 1).unwrap();
/// assert_eq!(ns.semaphore(key, Open::Existing, 0).unwrap_err(), NamedError::Invalid); // not plain
/// assert_eq!(sem.try_wait(), Ok(true));
/// drop(sem); // the last handle: it dies
/// Namespace::unlink(&name).unwrap();
/// ```
#[cfg(not(ufutex_loom))]
#[derive(Debug, Clone, Copy)]
pub struct Counted<'ns> {
    ns: &'ns Namespace,
}

#[cfg(not(ufutex_loom))]
impl<'ns> Counted<'ns> {
    fn held<T: Handle<'ns>>(&self, (handle, existed): (T, bool)) -> (Held<'ns, T>, bool) {
        (Held::new(handle, self.ns), existed)
    }

    /// The counted semaphore `key`, as [`Namespace::semaphore`].
    ///
    /// # Errors
    /// As [`Namespace::semaphore`] (`Invalid`: the key's object is not a counted semaphore);
    /// [`NamedError::Exists`] for [`Open::CreateNew`] also when this process holds it already;
    /// [`NamedError::Full`] also when this process holds [`HELD_MAX`] objects of the namespace.
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-counted-semaphore-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1500 + std::process::id() as u64;
    /// let (a, existed) = ns.counted().semaphore(key, Open::Create, 0).unwrap();
    /// assert!(!existed);
    /// let (b, existed) = ns.counted().semaphore(key, Open::Create, 0).unwrap();
    /// assert!(existed); // a second handle to it
    /// b.post(1).unwrap();
    /// assert_eq!(a.value(), Ok(1));
    /// drop((a, b)); // the last handles: it dies
    /// let gone = ns.counted().semaphore(key, Open::Existing, 0).unwrap_err();
    /// assert_eq!(gone, NamedError::NotFound);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn semaphore<'k>(
        &self,
        key: impl Into<Key<'k>>,
        how: Open,
        initial: u32,
    ) -> Result<(Held<'ns, Semaphore<'ns>>, bool), NamedError> {
        Ok(self.held(self.ns.open_semaphore(key.into(), how, initial, true)?))
    }

    /// The counted raw 32-bit word `key`, as [`Namespace::word`].
    ///
    /// # Errors
    /// As [`Counted::semaphore`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::Ordering;
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-counted-word-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1600 + std::process::id() as u64;
    /// let (w, _) = ns.counted().word(key, Open::CreateNew).unwrap();
    /// w.get().unwrap().store(1, Ordering::Release);
    /// assert_eq!(ufutex::shared::wake(w.get().unwrap(), 1), Ok(0));
    /// w.close().unwrap(); // the last handle: it dies
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn word<'k>(&self, key: impl Into<Key<'k>>, how: Open) -> Result<(Held<'ns, Word<'ns>>, bool), NamedError> {
        self.word_of(key, how)
    }

    /// The counted raw word `key` of `F`'s size, as [`Namespace::word_of`].
    ///
    /// # Errors
    /// As [`Counted::semaphore`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU16, AtomicU32};
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-counted-word-of-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1700 + std::process::id() as u64;
    /// let (w, _) = ns.counted().word_of::<AtomicU16>(key, Open::CreateNew).unwrap();
    /// let other = ns.counted().word_of::<AtomicU32>(key, Open::Existing).unwrap_err();
    /// assert_eq!(other, NamedError::Invalid); // another size
    /// drop(w);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn word_of<'k, F: Futex>(
        &self,
        key: impl Into<Key<'k>>,
        how: Open,
    ) -> Result<(Held<'ns, Word<'ns, F>>, bool), NamedError> {
        Ok(self.held(self.ns.open_word(key.into(), how, true)?))
    }

    /// The counted mutex `key`, as [`Namespace::mutex`]. Its death with the last handle does
    /// not wait for its owner to unlock it.
    ///
    /// # Errors
    /// As [`Counted::semaphore`].
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Acquired, Namespace, Open};
    /// let name = format!("doc-counted-mutex-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1800 + std::process::id() as u64;
    /// let (m, _) = ns.counted().mutex(key, Open::CreateNew).unwrap();
    /// assert_eq!(m.lock(None), Ok(Acquired::Acquired));
    /// m.unlock().unwrap();
    /// drop(m);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn mutex<'k>(&self, key: impl Into<Key<'k>>, how: Open) -> Result<(Held<'ns, Mutex<'ns>>, bool), NamedError> {
        Ok(self.held(self.ns.open_mutex(key.into(), how, true)?))
    }

    /// The counted event `key`, as [`Namespace::event`].
    ///
    /// # Errors
    /// As [`Counted::semaphore`].
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-counted-event-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1900 + std::process::id() as u64;
    /// let (ev, _) = ns.counted().event(key, Open::CreateNew, false, false).unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| ev.set().unwrap());
    ///     ev.wait(None).unwrap(); // until the set; takes the signal
    /// });
    /// drop(ev);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn event<'k>(
        &self,
        key: impl Into<Key<'k>>,
        how: Open,
        manual: bool,
        signaled: bool,
    ) -> Result<(Held<'ns, Event<'ns>>, bool), NamedError> {
        Ok(self.held(self.ns.open_event(key.into(), how, (manual, signaled), true)?))
    }
}

/// The handles a counted object's [`Held`] can hold: each names its object by slot and
/// generation.
macro_rules! counted_handle {
    ($($t:ident$(<$p:ident>)?),*) => {$(
        #[cfg(not(ufutex_loom))]
        impl$(<$p>)? counted::sealed::Sealed for $t<'_ $(, $p)?> {}
        #[cfg(not(ufutex_loom))]
        impl<'ns $(, $p)?> Handle<'ns> for $t<'ns $(, $p)?> {
            fn id(&self) -> (u32, u32) {
                (self.slot, self.gen)
            }
        }
    )*};
}
counted_handle!(Semaphore, Event, Mutex, Word<F>);

/// The kind of a raw word of `F`'s size.
fn word_kind<F: Futex>() -> u32 {
    match std::mem::size_of::<F>() {
        1 => KIND_WORD8,
        2 => KIND_WORD16,
        4 => KIND_WORD,
        _ => KIND_WORD64,
    }
}

/// What kind of object a key names ([`Object::kind`]); counted or not is in
/// [`Object::holders`]. Non-exhaustive: later versions may add kinds.
///
/// # Examples
/// ```
/// use ufutex::named::{Kind, Namespace, Open};
/// let name = format!("doc-kind-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_1a00 + std::process::id() as u64;
/// ns.word_of::<std::sync::atomic::AtomicU8>(key, Open::CreateNew).unwrap();
/// let o = ns.objects().into_iter().find(|o| o.key == key).unwrap();
/// assert_eq!(o.kind, Kind::Word8);
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A counting semaphore ([`Semaphore`]).
    Semaphore,
    /// A raw 32-bit word.
    Word,
    /// A mutex ([`Mutex`]).
    Mutex,
    /// An event ([`Event`]).
    Event,
    /// A raw 8-bit word.
    Word8,
    /// A raw 16-bit word.
    Word16,
    /// A raw 64-bit word.
    Word64,
}

impl Kind {
    /// The kind a slot's kind field (without the name bit) says.
    fn of(k: u32) -> Option<Kind> {
        Some(match k {
            KIND_SEMAPHORE => Kind::Semaphore,
            KIND_WORD => Kind::Word,
            KIND_WORD8 => Kind::Word8,
            KIND_WORD16 => Kind::Word16,
            KIND_WORD64 => Kind::Word64,
            KIND_MUTEX => Kind::Mutex,
            KIND_EVENT => Kind::Event,
            _ => return None,
        })
    }
}

/// One object, as [`Namespace::objects`] saw it: a copy, not a handle (it may be stale).
///
/// # Examples
/// ```
/// use ufutex::named::{Kind, Namespace, Open};
/// let name = format!("doc-object-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_1b00 + std::process::id() as u64;
/// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
/// m.lock(None).unwrap();
/// let o = ns.objects().into_iter().find(|o| o.key == key).unwrap();
/// assert_eq!(o.kind, Kind::Mutex);
/// assert!(o.owner.is_some() && !o.abandoned);
/// assert_eq!(o.aux, 1); // held once
/// m.unlock().unwrap();
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The key (for a named object: its name's hash).
    pub key: u64,
    /// The name, for an object made by name.
    pub name: Option<Vec<u8>>,
    /// What it is.
    pub kind: Kind,
    /// The slot's generation (handles carry it).
    pub generation: u32,
    /// Its futex word: a semaphore's count, an event's `(pulses << 1) | signaled`, a mutex's
    /// release count, a raw word's value.
    pub word: u64,
    /// A mutex's owner: its process's (slot, generation) in the user's shared table.
    pub owner: Option<(u32, u32)>,
    /// A mutex whose owner thread ended holding it: the next locker takes it as abandoned.
    pub abandoned: bool,
    /// A mutex's recursion count; an event's mode (1: manual reset).
    pub aux: u32,
    /// A counted object's holders (processes); `None` for an object that lives until removed.
    pub holders: Option<u32>,
}

/// Letters, digits, `.`, `_`, `-`; 1 to 64 bytes.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(not(ufutex_loom))]
/// Wake every waiter of a removed object's word (best effort: the removal stands either way,
/// and a waiter that misses this sees the removed mark when its own wait ends).
fn wake_all(w: &AtomicU32) {
    let _ = shared::wake(w, usize::MAX);
}

/// The namespace files this process has mapped, newest first (leaked, never freed: mappings are
/// never unmapped); a forked child inherits them with this list. Each is published with one
/// store, under [`MAPPING`].
#[cfg(not(ufutex_loom))]
static MAPPED: std::sync::atomic::AtomicPtr<Mapped> = std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// Mappers of namespace files, one at a time: a lock a forked child takes over from a thread of
/// the parent's that held it at the fork (`once.rs`), whose mapping then is not in the list.
#[cfg(not(ufutex_loom))]
static MAPPING: crate::once::SetupLock = crate::once::SetupLock::new();

/// One mapped namespace file: its (device, inode), its mapping, and the one mapped before it.
#[cfg(not(ufutex_loom))]
struct Mapped {
    id: (u64, u64),
    map: &'static Mapping,
    before: *const Mapped,
}

/// The mapping of the file `id` in [`MAPPED`], if this process has one.
#[cfg(not(ufutex_loom))]
fn mapped_already(id: (u64, u64)) -> Option<&'static Mapping> {
    // Acquire: pairs with the Release that published the entry.
    let mut e = MAPPED.load(std::sync::atomic::Ordering::Acquire).cast_const();
    // SAFETY: every entry in the list is leaked and never freed, published whole.
    while let Some(m) = unsafe { e.as_ref() } {
        if m.id == id {
            return Some(m.map);
        }
        e = m.before;
    }
    None
}

#[cfg(not(ufutex_loom))]
/// One namespace file, mapped: its header, its levels of slots (each mapped when first used),
/// the descriptor they are mapped from (kept open), and its counted objects' references.
struct Mapping {
    header: &'static Header,
    fd: libc::c_int,
    /// log2 of level 0's slots.
    order: u32,
    /// Where each level's slots are mapped (null: not here yet); its name slots follow them.
    levels: [std::sync::atomic::AtomicPtr<u8>; MAX_LEVELS as usize],
    /// The level hints (`Table::hints`), between the header page and level 0.
    hints: &'static [AtomicU16],
    /// Mappers of levels, one at a time: a lock a forked child takes over from a thread of the
    /// parent's that held it at the fork (`once.rs`); a level is published with one store, so
    /// such a thread left at most a mapping nobody uses.
    mapping: crate::once::SetupLock,
    holders: &'static counted::Holders,
}

#[cfg(not(ufutex_loom))]
impl Mapping {
    /// Where level `k` is in the file, and its length (slots and name slots).
    fn span(&self, k: u32) -> (usize, usize) {
        let n = 1usize << self.order;
        (first_level(self.order) + 128 * table::level_start(n, k), 128 * (n << k))
    }

    /// Map level `k` if the file has it.
    #[cold]
    fn map_level(&self, k: u32) -> Option<*mut u8> {
        let _g = self.mapping.lock();
        let at = self.levels.get(k as usize)?;
        let p = at.load(Ordering::Acquire);
        if !p.is_null() {
            return Some(p);
        }
        let (off, len) = self.span(k);
        if self.order + k > 28 {
            return None;
        }
        // One `fstat` for the size and the noted key.
        let st = shared::file::status(self.fd).ok()?;
        // (A file too short for its header's levels is corrupt: no such level, never SIGBUS.)
        if (st.st_size as usize) < off + len {
            return None;
        }
        // (The span's offset is a multiple of 128 × 32 bytes: page-aligned.)
        let p = shared::file::map_shared(self.fd, len, off).ok()?;
        let _ = shared::known::note_file(p as usize, len, self.fd, Some(&st), off as u64); // never unmapped
        at.store(p, Ordering::Release);
        Some(p)
    }
}

#[cfg(not(ufutex_loom))]
impl Levels for Mapping {
    fn level(&self, k: u32) -> Option<(&[Slot], &[NameSlot])> {
        let p = self.levels.get(k as usize)?.load(Ordering::Acquire);
        let p = if p.is_null() {
            if k >= self.header.levels() {
                return None;
            }
            self.map_level(k)?
        } else {
            p
        };
        let n = 1usize << (self.order + k);
        // SAFETY: `p` is a leaked mapping of level k: n slots then n name slots of 64 bytes,
        // page-aligned, all atomics (any bit pattern is valid); it is never unmapped.
        Some(unsafe {
            (
                std::slice::from_raw_parts(p as *const Slot, n),
                std::slice::from_raw_parts(p.add(64 * n) as *const NameSlot, n),
            )
        })
    }

    fn make(&self, k: u32) -> bool {
        let (off, len) = self.span(k);
        if self.order + k > 28 || k >= MAX_LEVELS {
            return false;
        }
        // The file grows (zeroes) to hold the level; a maker that died after this left the same.
        let short = shared::file::file_size(self.fd).is_ok_and(|s| s < off + len);
        if short && shared::file::set_len(self.fd, off + len).is_err() {
            return false;
        }
        self.map_level(k).is_some()
    }

    fn hints(&self) -> &[AtomicU16] {
        self.hints
    }
}

#[cfg(not(ufutex_loom))]
/// How many level hints a namespace whose level 0 has `2^order` slots has: 64 per level-0
/// slot (8 MiB of the file by default, touched only once it grew), at most 2^22 — four per
/// object at a million. At one per object, a lookup of an absent key still found the bits of
/// others in its hint 60 % of the time, and looked there: 146 ns; at four, 22 ns.
fn hint_count(order: u32) -> usize {
    (64usize << order).clamp(1 << 12, 1 << 22)
}

#[cfg(not(ufutex_loom))]
/// Where level 0 is in a namespace file (after the header page and the hints; page-aligned).
fn first_level(order: u32) -> usize {
    PAGE + 2 * hint_count(order)
}

#[cfg(not(ufutex_loom))]
/// The mapping of the namespace file `fd` at `path` (under its flock; `st`, its status from
/// before): this process's earlier one for the same file, or a new one.
fn mapped(fd: libc::c_int, st: &libc::stat, path: &str) -> Result<&'static Mapping, SharedError> {
    let id = (st.st_dev, st.st_ino);
    let _g = MAPPING.lock();
    if let Some(map) = mapped_already(id) {
        return Ok(map);
    }
    let (base, order, fresh) = map_namespace(fd)?;
    // Never unmapped: its words' identity is known from now on.
    let _ = shared::known::note_file(base as usize, first_level(order) + (128 << order), fd, Some(st), 0);
    if fresh {
        // Ledgers of an earlier namespace of this name (another nonce: never read again).
        remove_ledgers(path);
    }
    // Our own descriptor of the file, for mapping the levels it grows (kept for good), and
    // its read lock on the first byte: the file is in use while we live.
    // SAFETY: `fd` is open; F_DUPFD_CLOEXEC has no memory arguments.
    let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if own < 0 {
        return Err(SharedError::from_errno(shared::segment::errno()));
    }
    let mut fl = first_byte(libc::F_RDLCK);
    // SAFETY: `fl` is a valid flock; OFD locks need l_pid 0. (Our flock on the file keeps a
    // remaker out, so this does not fail for a conflict; if it fails anyway the namespace
    // works, and only a remake could miss us.)
    unsafe { libc::fcntl(own, libc::F_OFD_SETLK, &mut fl) };
    // SAFETY: `base` maps the namespace: its first page is the header (atomics).
    let header = unsafe { &*(base as *const Header) };
    // SAFETY: the hints follow the header page in the same mapping (`first_level`), all
    // atomics (any bit pattern is valid); the mapping is never unmapped.
    let hints = unsafe { std::slice::from_raw_parts(base.add(PAGE) as *const AtomicU16, hint_count(order)) };
    let nonce = header.nonce.load(Ordering::Relaxed);
    let holders = Box::leak(Box::new(counted::Holders::new(format!("{path}+{nonce:016x}."), nonce)));
    let map: &'static Mapping = Box::leak(Box::new(Mapping {
        header,
        fd: own,
        order,
        levels: std::array::from_fn(|_| std::sync::atomic::AtomicPtr::new(std::ptr::null_mut())),
        hints,
        mapping: crate::once::SetupLock::new(),
        holders,
    }));
    // SAFETY: level 0 follows the header page and the hints in the same mapping.
    map.levels[0].store(unsafe { base.add(first_level(order)) }, Ordering::Release);
    let before = MAPPED.load(Ordering::Relaxed); // (changed only under MAPPING)
    let e = Box::leak(Box::new(Mapped { id, map, before }));
    // Release: the entry (and the mapping) before the pointer to it.
    MAPPED.store(e, Ordering::Release);
    Ok(map)
}

#[cfg(not(ufutex_loom))]
/// Map a namespace file (under its flock): create it if new (or if its creator died before
/// publishing it, or if it is of another version or corrupt and unused), else check its header.
/// Its base, slot order, and whether it was made now.
fn map_namespace(fd: libc::c_int) -> Result<(*mut u8, u32, bool), SharedError> {
    let size = shared::file::file_size(fd)?;
    let (mut published, mut order, mut version) = (false, 0, 0);
    if size >= PAGE {
        // The header's magic, version and order (`Header`'s first 16 bytes), read, not mapped:
        // the creator published it under the flock we hold, so a read sees all of it.
        let mut h = [0u8; 16];
        shared::file::read_at(fd, &mut h, 0)?;
        published = shared::file::u64_at(&h, 0) == MAGIC;
        version = shared::file::u32_at(&h, 8);
        order = shared::file::u32_at(&h, 12);
    }
    if published {
        let ok = version == VERSION && (5..=28).contains(&order) && size >= first_level(order) + (128 << order);
        if ok {
            return Ok((shared::file::map_shared(fd, first_level(order) + (128 << order), 0)?, order, false));
        }
        // Of another version, or corrupt: made afresh if no process has it mapped (each holds
        // a read lock on its first byte while it lives), else an error.
        if !unused(fd) {
            return Err(SharedError::NotRecoverable);
        }
    }
    // New (or never published, or unusable and unused): size it and publish the header last.
    let order = std::env::var("UFUTEX_NAMED_SLOTS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| n.is_power_of_two() && (2..=1 << 28).contains(n))
        .map_or(DEFAULT_ORDER, |n| n.trailing_zeros().max(5));
    let len = first_level(order) + (128usize << order);
    // (Zeroed: nothing of what a dead creator left stays.)
    shared::file::set_len_zeroed(fd, len)?;
    let base = shared::file::map_shared(fd, len, 0)?;
    // SAFETY: as for the probe: the header is at the start of the fresh mapping.
    let h = unsafe { &*(base as *const Header) };
    h.version.store(VERSION, Ordering::Relaxed);
    h.order.store(order, Ordering::Relaxed);
    h.nonce.store(nonce(), Ordering::Relaxed);
    h.levels.store(1, Ordering::Relaxed);
    h.magic.store(MAGIC, Ordering::Release);
    Ok((base, order, true))
}

#[cfg(not(ufutex_loom))]
/// Remove the ledger files of the namespace file at `path` (`<path>+<nonce>.<n>`, any nonce).
fn remove_ledgers(path: &str) {
    let Some((dir, stem)) = path.rsplit_once('/') else { return };
    let ledger = format!("{stem}+");
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name().to_str().is_some_and(|f| f.starts_with(&ledger)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(not(ufutex_loom))]
/// A lock of a namespace file's first byte: readers are its users.
fn first_byte(ty: libc::c_int) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value of the plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_len = 1;
    fl
}

#[cfg(not(ufutex_loom))]
/// Whether no process has the namespace file `fd` mapped (none holds its first byte).
fn unused(fd: libc::c_int) -> bool {
    let mut fl = first_byte(libc::F_WRLCK);
    // SAFETY: `fl` is a valid flock the kernel overwrites with a conflicting lock, if any.
    let r = unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl) };
    r == 0 && fl.l_type == libc::F_UNLCK as libc::c_short
}

#[cfg(not(ufutex_loom))]
/// A random 64-bit number (the time and the pid if the kernel will not give one).
fn nonce() -> u64 {
    let mut n = 0u64;
    // SAFETY: `n` is 8 writable bytes for the call.
    let got = unsafe { libc::getrandom(std::ptr::from_mut(&mut n).cast(), 8, 0) };
    if got != 8 {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        n = t ^ u64::from(std::process::id()).rotate_left(32);
    }
    n | 1 // (never 0: a ledger's nonce 0 is "none")
}

#[cfg(not(ufutex_loom))]
/// A counting semaphore of a namespace (SysV's `semop` ±n): a handle by slot and generation,
/// so a removed semaphore's handle fails with [`NamedError::Removed`] even if its key was
/// reused. Waiters are not served in order.
///
/// # Examples
/// ```
/// use ufutex::named::{Namespace, Open};
/// let name = format!("doc-sem-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_0b00 + std::process::id() as u64;
/// let (sem, _) = ns.semaphore(key, Open::CreateNew, 0).unwrap();
/// std::thread::scope(|s| {
///     s.spawn(|| sem.wait(None).unwrap()); // sleeps until the post
///     sem.post(1).unwrap();
/// });
/// assert_eq!(sem.value(), Ok(0));
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Semaphore<'ns> {
    pub(crate) ns: &'ns Namespace,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

#[cfg(not(ufutex_loom))]
impl Semaphore<'_> {
    /// Add `n` to the count and wake up to `n` waiters (`semop` +n). All or nothing: a post
    /// that would pass [`SEMAPHORE_MAX`] adds nothing.
    ///
    /// # Errors
    /// [`NamedError::Removed`]; [`NamedError::Range`] past [`SEMAPHORE_MAX`]; `Shared(_)` if the
    /// wake cannot use the shared table (the count was added).
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-sem-post-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0c00 + std::process::id() as u64;
    /// let (sem, _) = ns.semaphore(key, Open::CreateNew, 0).unwrap();
    /// sem.post(3).unwrap();
    /// assert_eq!(sem.value(), Ok(3));
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn post(&self, n: u32) -> Result<(), NamedError> {
        let s = self.ns.live(self.slot, self.gen)?;
        // Release: a waiter that takes the count sees what we did before posting.
        s.update_word(self.gen, Ordering::Release, Ordering::Relaxed, |c| {
            c.checked_add(n).filter(|&v| v <= SEMAPHORE_MAX)
        })
        .map_err(|e| if e == Unchanged::Gone { NamedError::Removed } else { NamedError::Range })?;
        shared::wake(&s.word, n as usize)?;
        Ok(())
    }

    /// Take one from the count if it is above 0: whether it was. Never sleeps.
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{Namespace, Open};
    /// let name = format!("doc-sem-try-wait-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0d00 + std::process::id() as u64;
    /// let (sem, _) = ns.semaphore(key, Open::CreateNew, 1).unwrap();
    /// assert_eq!(sem.try_wait(), Ok(true));
    /// assert_eq!(sem.try_wait(), Ok(false)); // at 0
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn try_wait(&self) -> Result<bool, NamedError> {
        let s = self.ns.live(self.slot, self.gen)?;
        match s.update_word(self.gen, Ordering::Acquire, Ordering::Relaxed, |c| c.checked_sub(1)) {
            Ok(_) => Ok(true),
            Err(Unchanged::Declined(_)) => Ok(false), // at 0
            Err(Unchanged::Gone) => Err(NamedError::Removed),
        }
    }

    /// Take one from the count, sleeping while it is 0, until `deadline` (`semop` −1). Takes
    /// nothing when it fails.
    ///
    /// # Errors
    /// [`NamedError::Removed`] (also when removed while waiting); `Shared(TimedOut)`,
    /// `Shared(Interrupted)`; another `Shared(_)` if the shared table cannot be used.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// use ufutex::shared::SharedError;
    /// let name = format!("doc-sem-wait-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0e00 + std::process::id() as u64;
    /// let (sem, _) = ns.semaphore(key, Open::CreateNew, 1).unwrap();
    /// sem.wait(None).unwrap(); // 1 → 0
    /// let now = Some(Duration::ZERO.into()); // a deadline that has passed
    /// assert_eq!(sem.wait(now), Err(NamedError::Shared(SharedError::TimedOut)));
    /// ns.remove(key).unwrap();
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn wait(&self, deadline: Option<Deadline>) -> Result<(), NamedError> {
        loop {
            if self.try_wait()? {
                return Ok(());
            }
            // Expecting 0 of this object (not of a successor in its slot: `Slot::watched`).
            let (word, empty) = self.ns.live(self.slot, self.gen)?.watched(self.gen, 0);
            match shared::wait(word, empty, deadline) {
                Ok(()) | Err(SharedError::WouldBlock) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The count now (it may have changed by the time the caller looks).
    ///
    /// # Errors
    /// [`NamedError::Removed`].
    ///
    /// # Examples
    /// ```
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-sem-value-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_0f00 + std::process::id() as u64;
    /// let (sem, _) = ns.semaphore(key, Open::CreateNew, 4).unwrap();
    /// assert_eq!(sem.value(), Ok(4));
    /// ns.remove(key).unwrap();
    /// assert_eq!(sem.value(), Err(NamedError::Removed));
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn value(&self) -> Result<u32, NamedError> {
        self.ns.live(self.slot, self.gen)?.read_word(self.gen, Ordering::Relaxed).ok_or(NamedError::Removed)
    }
}

#[cfg(not(ufutex_loom))]
/// A raw futex word of a namespace (32 bits unless made with [`Namespace::word_of`]), for
/// [`crate::shared`]'s operations. The namespace never writes it, except that a
/// removal stores all ones in it and wakes its waiters.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU16, Ordering};
/// use ufutex::named::{Namespace, Open, Word};
/// let name = format!("doc-word-type-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_1100 + std::process::id() as u64;
/// let (w, _): (Word<'_, AtomicU16>, _) = ns.word_of(key, Open::CreateNew).unwrap();
/// w.get().unwrap().fetch_add(1, Ordering::Relaxed);
/// assert_eq!(ufutex::shared::wake(w.get().unwrap(), 1), Ok(0)); // nobody waits
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug)]
pub struct Word<'ns, F = AtomicU32> {
    pub(crate) ns: &'ns Namespace,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    size: PhantomData<F>,
}

#[cfg(not(ufutex_loom))]
impl<F> Clone for Word<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}

#[cfg(not(ufutex_loom))]
impl<F> Copy for Word<'_, F> {}

#[cfg(not(ufutex_loom))]
impl<'ns, F> Word<'ns, F> {
    /// The handle of the live raw word `(slot, gen)` of `F`'s size (the caller checked its kind).
    pub(crate) fn from_parts(ns: &'ns Namespace, slot: u32, gen: u32) -> Word<'ns, F> {
        Word { ns, slot, gen, size: PhantomData }
    }
}

#[cfg(not(ufutex_loom))]
impl<F: Futex> Word<'_, F> {
    /// The word, while the object lives. The reference outlives a removal: check with `get`
    /// again (a removed word holds all ones, which a live one may hold too).
    ///
    /// # Errors
    /// [`NamedError::Removed`]: the object was removed (its word then holds all ones, and
    /// waiters on it were woken).
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::Ordering;
    /// use ufutex::named::{NamedError, Namespace, Open};
    /// let name = format!("doc-word-get-{}", std::process::id());
    /// let ns = Namespace::open(&name).unwrap();
    /// let key = 0x5eed_1200 + std::process::id() as u64;
    /// let (w, _) = ns.word(key, Open::CreateNew).unwrap();
    /// w.get().unwrap().store(7, Ordering::Relaxed);
    /// assert_eq!(w.get().unwrap().load(Ordering::Relaxed), 7);
    /// ns.remove(key).unwrap();
    /// assert_eq!(w.get().unwrap_err(), NamedError::Removed);
    /// Namespace::unlink(&name).unwrap();
    /// ```
    pub fn get(&self) -> Result<&F, NamedError> {
        let s = self.ns.live(self.slot, self.gen)?;
        let at = std::ptr::from_ref(&s.word).cast::<F>();
        // SAFETY: the slot's `word` is 8-aligned with `word_hi` after it (`table.rs` asserts
        // it), so an atomic of 1, 2, 4 or 8 bytes (the only `Futex` types) fits there, aligned;
        // the slot lives in the namespace's mapping, which outlives `self.ns`'s borrow. The
        // object was made at `F`'s size (its kind says so), so nothing of ours accesses it at
        // another size.
        Ok(unsafe { &*at })
    }
}

/// One object of a [`wait_any`]: how it is waited on and what being ready takes.
///
/// # Examples
/// ```
/// use std::sync::atomic::Ordering;
/// use ufutex::named::{wait_any, Namespace, Open, Waitable};
/// let name = format!("doc-waitable-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_0000_0000 + 16 * std::process::id() as u64;
/// let (sem, _) = ns.semaphore(key, Open::CreateNew, 0).unwrap();
/// let (w, _) = ns.word(key + 1, Open::CreateNew).unwrap();
/// w.get().unwrap().store(5, Ordering::Relaxed);
/// // The word no longer holds 0: ready.
/// assert_eq!(wait_any(&[Waitable::Semaphore(&sem), Waitable::Word(&w, 0)], None), Ok(1));
/// ns.remove(key).unwrap();
/// ns.remove(key + 1).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[cfg(not(ufutex_loom))]
#[derive(Debug, Clone, Copy)]
pub enum Waitable<'a> {
    /// Ready when one can be taken from its count (and it is taken).
    Semaphore(&'a Semaphore<'a>),
    /// Ready when signaled (an auto-reset event's signal is taken) or pulsed.
    Event(&'a Event<'a>),
    /// Ready when it can be locked (it is then held; check [`Acquired`] with
    /// [`Mutex::try_lock`]'s rules: an abandoned one is taken too).
    Mutex(&'a Mutex<'a>),
    /// Ready when the raw word no longer holds the value.
    Word(&'a Word<'a>, u32),
    /// A raw word of 8 bits, ready when it no longer holds the value.
    Word8(&'a Word<'a, AtomicU8>, u8),
    /// A raw word of 16 bits, ready when it no longer holds the value.
    Word16(&'a Word<'a, AtomicU16>, u16),
    /// A raw word of 64 bits, ready when it no longer holds the value.
    Word64(&'a Word<'a, AtomicU64>, u64),
}

/// Wait until one of `objects` (1 to [`crate::WAITV_MAX`], any kinds) is ready, taking it
/// (a semaphore's count, an auto event's signal, a mutex's ownership); its index — the lowest
/// ready one. Sleeps on all of their words at once (`shared::waitv`). Takes one object only;
/// an error takes none.
///
/// # Errors
/// [`NamedError::Removed`] if one of them was removed (also while waiting);
/// [`NamedError::Invalid`] for no objects or too many; `Shared(TimedOut)`, `Shared(Interrupted)`;
/// as [`Mutex::try_lock`] for a mutex; another `Shared(_)` if the shared table cannot be used.
///
/// # Examples
/// ```
/// use ufutex::named::{wait_any, Namespace, Open, Waitable};
/// let name = format!("doc-wait-any-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_0000_0000 + 16 * std::process::id() as u64;
/// let (sem, _) = ns.semaphore(key, Open::CreateNew, 0).unwrap();
/// let (ev, _) = ns.event(key + 1, Open::CreateNew, false, false).unwrap();
/// ev.set().unwrap();
/// // The event is ready: its auto-reset signal is taken, the semaphore is left alone.
/// assert_eq!(wait_any(&[Waitable::Semaphore(&sem), Waitable::Event(&ev)], None), Ok(1));
/// sem.post(1).unwrap();
/// assert_eq!(wait_any(&[Waitable::Semaphore(&sem), Waitable::Event(&ev)], None), Ok(0));
/// assert_eq!(sem.value(), Ok(0));
/// assert_eq!(wait_any(&[], None), Err(ufutex::named::NamedError::Invalid));
/// ns.remove(key).unwrap();
/// ns.remove(key + 1).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[cfg(not(ufutex_loom))]
pub fn wait_any(objects: &[Waitable<'_>], deadline: Option<Deadline>) -> Result<usize, NamedError> {
    wait_any_acquired(objects, deadline).map(|(i, _)| i)
}

/// [`wait_any`], and how it took the object at the index: [`Acquired::Abandoned`] for a mutex
/// taken from an owner that died holding it (as [`Mutex::lock`] would say), else
/// [`Acquired::Acquired`]. A mutex held by another is asked about its owner's life at least every
/// 20 ms while the call sleeps, as [`Mutex::lock`] does.
///
/// # Errors
/// As [`wait_any`].
///
/// # Examples
/// ```
/// use ufutex::named::{wait_any_acquired, Acquired, Namespace, Open, Waitable};
/// let name = format!("doc-wait-any-acquired-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_1300 + std::process::id() as u64;
/// let (m, _) = ns.mutex(key, Open::CreateNew).unwrap();
/// // A thread ends holding it.
/// std::thread::scope(|s| s.spawn(|| m.lock(None).unwrap()).join().unwrap());
/// assert_eq!(wait_any_acquired(&[Waitable::Mutex(&m)], None), Ok((0, Acquired::Abandoned)));
/// m.unlock().unwrap();
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[cfg(not(ufutex_loom))]
pub fn wait_any_acquired(
    objects: &[Waitable<'_>],
    deadline: Option<Deadline>,
) -> Result<(usize, Acquired), NamedError> {
    if objects.is_empty() || objects.len() > crate::WAITV_MAX {
        return Err(NamedError::Invalid);
    }
    // An event counts as ready once pulsed after this call began: its pulse sequence then.
    let mut began: Vec<Option<u32>> = vec![None; objects.len()];
    loop {
        // Each object's word and the value it was seen with, before trying it: a change after
        // the look makes the sleep below return. A word that holds all ones at its size was
        // removed.
        let mut entries: Vec<crate::WaitEntry<'_>> = Vec::with_capacity(objects.len());
        // Whether a mutex is held by another: its owner may die without a release to wake us.
        let mut held = false;
        for (i, o) in objects.iter().enumerate() {
            // A raw word may hold all ones and live: it was removed only if its handle fails
            // after the load (a removal marks all ones, then the handle fails).
            fn raw<'w, F: Futex>(h: &Word<'w, F>, w: &'w F, seen: F::Value, now: F::Value) -> Seen<'w> {
                let removed = h.get().is_err();
                Seen { entry: crate::WaitEntry::new(w, now), ready: now != seen && !removed, removed }
            }
            macro_rules! raw_seen {
                ($h:expr, $v:expr) => {{
                    let w = $h.get()?;
                    raw($h, w, *$v, w.load(Ordering::Acquire))
                }};
            }
            let seen = match o {
                Waitable::Semaphore(s) => {
                    let slot = s.ns.live(s.slot, s.gen)?;
                    let ready = s.try_wait()?;
                    object(slot, s.gen, ready)
                }
                Waitable::Event(e) => {
                    let slot = e.ns.live(e.slot, e.gen)?;
                    let start = *began[i].get_or_insert(slot.word.load(Ordering::Acquire));
                    let ready = e.try_wait(start)?;
                    object(slot, e.gen, ready)
                }
                Waitable::Mutex(m) => {
                    let slot = m.ns.live(m.slot, m.gen)?;
                    if let Some(how) = m.try_lock()? {
                        return Ok((i, how));
                    }
                    held = true;
                    object(slot, m.gen, false)
                }
                // (One body for four word types: the atomics' loads are not a trait's.)
                Waitable::Word(h, v) => raw_seen!(h, v),
                Waitable::Word8(h, v) => raw_seen!(h, v),
                Waitable::Word16(h, v) => raw_seen!(h, v),
                Waitable::Word64(h, v) => raw_seen!(h, v),
            };
            if seen.ready {
                return Ok((i, Acquired::Acquired));
            }
            if seen.removed {
                return Err(NamedError::Removed);
            }
            entries.push(seen.entry);
        }
        let until = if held { Some(mutex::probe(deadline)) } else { deadline };
        match shared::waitv(&entries, until) {
            Ok(_) | Err(SharedError::WouldBlock) => {}
            Err(SharedError::TimedOut) if !deadline.is_some_and(mutex::expired) => {} // a probe
            Err(e) => return Err(e.into()),
        }
    }
}

/// One object of a [`wait_any`] as looked at: the entry to sleep on, and whether it is ready
/// or was removed.
#[cfg(not(ufutex_loom))]
struct Seen<'w> {
    entry: crate::WaitEntry<'w>,
    ready: bool,
    removed: bool,
}

/// The semaphore's, event's or mutex's word of generation `gen` in `s` (tried already:
/// `ready`), seen now. The entry sleeps on the word with its generation (`Slot::watched`), so a
/// successor made in the slot ends the sleep; the kernel's `futex_waitv` (`UFUTEX_SHARED=kernel`)
/// takes 32-bit words only, and there it sleeps on the word alone: a waiter that lost the race
/// to a removal and a new object made at once in the slot then sleeps until the new object's
/// word changes or its deadline (its next look answers `Removed`).
#[cfg(not(ufutex_loom))]
fn object(s: &Slot, gen: u32, ready: bool) -> Seen<'_> {
    let now = s.word.load(Ordering::Acquire);
    let entry = match shared::mode() {
        shared::Mode::Table => {
            let (word, seen) = s.watched(gen, now);
            crate::WaitEntry::new(word, seen)
        }
        shared::Mode::Kernel => crate::WaitEntry::new(&s.word, now),
    };
    Seen { entry, ready, removed: now == REMOVED }
}
