//! Which table a key goes to: a futex word with a node word (`UFUTEX_NUMA`), or under a memory
//! policy (`UFUTEX_MPOL`), resolves to the key of one node's table (the kernel's
//! `get_futex_key` with `FUTEX2_NUMA` / `FUTEX2_MPOL`), in this order:
//! 1. read the node word; a value other than -1 (all ones at the word's width) must name a
//!    node of the domain, else the operation fails (`EINVAL`) before touching anything;
//! 2. if it is -1 and memory-policy lookup is on, take the node of a preferred or home-node
//!    policy covering the futex word, if there is one;
//! 3. if it is still -1, take the caller's current node;
//! 4. write the chosen node back with a compare-exchange from -1 (so a concurrent writer's node
//!    wins, and is then used and validated).
//!
//! Steps 2–4 run whenever the node word holds -1, for every operation: a wake of 0 waiters and
//! a wait that fails `WouldBlock` included. The node then picks the node's table; the key
//! within it is still the address. Two operations meet only if they resolve to the same node:
//! a NUMA operation never meets a plain one on the same address (different tables).

use crate::error::WaitError;
use crate::key::Key;
use crate::primitive::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use crate::tables::Tables;
use crate::topology::mpol_node;
use crate::word::{Size, WordRef};
use std::fmt;

/// Why a NUMA operation failed. Every variant but `Wait` is reported before the value is
/// compared, with nothing queued, woken or moved.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU32;
/// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex};
/// let d = Domain::new(DomainConfig::new())?; // no NUMA
/// let e = d.wake_numa(&NumaFutex::<AtomicU32>::new(0), 1).unwrap_err();
/// assert_eq!(e, NumaError::NotNuma);
/// assert_eq!(e.errno(), libc::EOPNOTSUPP);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaError {
    /// The operation ran and failed as its plain form would.
    Wait(WaitError),
    /// The node word names no node of the domain (`EINVAL`); nothing was queued or woken.
    InvalidNode(u64),
    /// The domain was built without [`crate::DomainConfig::numa`] (`EOPNOTSUPP`).
    NotNuma,
    /// The node's table, allocated on the node's first use, could not be allocated
    /// (`ENOMEM`); nothing was queued or woken.
    NoMemory,
}

impl NumaError {
    /// The errno the C ABI returns for this error (positive): `Wait`'s own, `EINVAL`,
    /// `EOPNOTSUPP` or `ENOMEM`.
    ///
    /// # Examples
    /// ```
    /// use ufutex::{NumaError, WaitError};
    /// assert_eq!(NumaError::Wait(WaitError::TimedOut).errno(), libc::ETIMEDOUT);
    /// assert_eq!(NumaError::InvalidNode(9999).errno(), libc::EINVAL);
    /// assert_eq!(NumaError::NoMemory.errno(), libc::ENOMEM);
    /// ```
    pub fn errno(self) -> i32 {
        match self {
            NumaError::Wait(e) => e.errno(),
            NumaError::InvalidNode(_) => libc::EINVAL,
            NumaError::NotNuma => libc::EOPNOTSUPP,
            NumaError::NoMemory => libc::ENOMEM,
        }
    }
}

impl From<WaitError> for NumaError {
    fn from(e: WaitError) -> Self {
        NumaError::Wait(e)
    }
}

impl fmt::Display for NumaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumaError::Wait(e) => write!(f, "{e:?}"),
            NumaError::InvalidNode(n) => write!(f, "node word names no node of the domain: {n}"),
            NumaError::NotNuma => write!(f, "the domain has no NUMA tables"),
            NumaError::NoMemory => write!(f, "no memory for the node's wait-queue table"),
        }
    }
}

impl std::error::Error for NumaError {}

/// Resolve `word` to its key in `tables` (the C ABI's `UFUTEX_NUMA` / `UFUTEX_MPOL`): the plain
/// key with neither, else the key of the node chosen as in the module docs, writing the node
/// word back when it held -1.
///
/// - `node_word`: `Some` with `UFUTEX_NUMA` — the same-size atomic right after the word (the
///   caller checked the pair's alignment to twice the size); it must also be writable.
/// - `mpol`: with `UFUTEX_MPOL`.
///
/// For [`Purpose::Queue`] the node's table is allocated on the node's first use, so the key
/// can be queued on; a wake needs none (no table, no waiter).
///
/// # Errors
/// [`NumaError::NotNuma`] if the domain has no NUMA (either flag set); [`NumaError::InvalidNode`]
/// if the node word names no node of the domain; [`NumaError::NoMemory`] if the node's first
/// table cannot be allocated.
#[inline]
pub(crate) fn resolve(
    tables: &Tables,
    word: WordRef,
    node_word: Option<WordRef>,
    mpol: bool,
    purpose: Purpose,
) -> Result<Key, NumaError> {
    let key = resolve_node(tables, word, node_word, mpol)?;
    if purpose == Purpose::Queue {
        tables.ensure_table(&key).map_err(|_| NumaError::NoMemory)?;
    }
    Ok(key)
}

/// What a resolved key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Waiters may be queued on it (wait, waitv, requeue): its table must exist.
    Queue,
    /// Only woken: no table needed.
    Wake,
}

/// [`resolve`] up to the key, without the table.
#[inline]
fn resolve_node(tables: &Tables, word: WordRef, node_word: Option<WordRef>, mpol: bool) -> Result<Key, NumaError> {
    let key = Key::private(word.addr());
    match node_word {
        None if !mpol => Ok(key),
        // The common case: the node word already names a node of the domain. Only read it.
        Some(nw) => match (nw.load(), tables.numa_nodes()) {
            (stored, Some(nodes)) if stored != word.size().max() && nodes.topology.is_valid(stored) => {
                Ok(key.on_node(stored as u32))
            }
            _ => resolve_slow(tables, word, node_word, mpol),
        },
        None => resolve_slow(tables, word, node_word, mpol),
    }
}

/// [`resolve`] for a node word of -1 or naming no node, or `mpol` without a node word.
#[cold]
#[inline(never)]
fn resolve_slow(tables: &Tables, word: WordRef, node_word: Option<WordRef>, mpol: bool) -> Result<Key, NumaError> {
    let key = Key::private(word.addr());
    let topology = &tables.numa_nodes().ok_or(NumaError::NotNuma)?.topology;
    let none = word.size().max();
    debug_assert!(node_word.is_none_or(|n| n.size() == word.size()));
    // The node word's value; -1 (`none`) also without a node word.
    let stored = node_word.map_or(none, |nw| nw.load());
    if stored != none && !topology.is_valid(stored) {
        return Err(NumaError::InvalidNode(stored));
    }
    let mut node = stored;
    if node == none && mpol {
        if let Some(n) = mpol_node(word.addr()).and_then(|n| topology.map_kernel_node(n)) {
            node = n.into();
        }
    }
    if let Some(nw) = node_word.filter(|_| stored == none) {
        if node == none {
            node = topology.current_node().into();
        }
        if node >= none {
            return Err(NumaError::InvalidNode(node)); // does not fit the node word
        }
        // Write back only over -1 (a word that holds a node is only read: no shared write on
        // the common path): a node another thread wrote meanwhile wins.
        if let Err(theirs) = compare_exchange(nw, none, node) {
            if !topology.is_valid(theirs) {
                return Err(NumaError::InvalidNode(theirs));
            }
            node = theirs;
        }
    }
    if node == none {
        return Ok(key); // mpol without a policy node and without a node word: the plain table
    }
    Ok(key.on_node(node as u32))
}

/// `compare_exchange(current, new)` on the atomic `w` at its width; `Ok` if it held `current`
/// (then stored `new`), else `Err(what it held)`.
fn compare_exchange(w: WordRef, current: u64, new: u64) -> Result<(), u64> {
    // SeqCst: the node word is part of the futex's identity; keep it as strong as the word.
    let (s, f) = (Ordering::SeqCst, Ordering::SeqCst);
    // SAFETY:
    // - `w` is a node word: from a borrowed `NumaFutex` (an atomic of its size, writable
    //   through `&`), or built by the C ABI with `WordRef::from_raw`, whose contract plus
    //   `resolve`'s (writable) make it an aligned, live, writable atomic of `w.size()` bytes.
    // - the values fit the width: `current` is the width's all-ones, `new` < it (checked).
    unsafe {
        match w.size() {
            Size::U8 => (*(w.addr() as *const AtomicU8))
                .compare_exchange(current as u8, new as u8, s, f)
                .map(drop)
                .map_err(u64::from),
            Size::U16 => (*(w.addr() as *const AtomicU16))
                .compare_exchange(current as u16, new as u16, s, f)
                .map(drop)
                .map_err(u64::from),
            Size::U32 => (*(w.addr() as *const AtomicU32))
                .compare_exchange(current as u32, new as u32, s, f)
                .map(drop)
                .map_err(u64::from),
            Size::U64 => (*(w.addr() as *const AtomicU64)).compare_exchange(current, new, s, f).map(drop),
        }
    }
}
