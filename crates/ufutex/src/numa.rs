//! NUMA: futex words followed by a node word, one table per node.
//!
//! A NUMA futex is a pair `{word, node}` of two atomics of the same size, aligned to twice the
//! size. Every operation first *resolves* the pair to a key (the kernel's `get_futex_key` with
//! `FUTEX2_NUMA` / `FUTEX2_MPOL`), in this order:
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
//!
//! Node count: `/sys/devices/system/node/possible` (the kernel accepts possible nodes), or N
//! virtual nodes with `UFUTEX_NUMA_NODES=N` (read once) or [`crate::DomainConfig::virtual_nodes`].
//! With virtual nodes the current node is the current CPU modulo N and tables are not bound.
//!
//! Memory policy (`mpol`): userspace cannot read a policy's home node, so a `MPOL_PREFERRED`
//! policy gives its node, and `MPOL_BIND` / `MPOL_PREFERRED_MANY` give the node the word's page
//! is on (where such a policy with a home node puts it); other policies give none.

use crate::deadline::Deadline;
use crate::domain::Domain;
use crate::error::WaitError;
use crate::key::Key;
use crate::primitive::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use crate::waitv::{WaitEntry, WAITV_MAX};
use crate::word::{word_of, Futex, Size, WordRef};
use crate::MATCH_ANY;
use std::fmt;
use std::sync::OnceLock;

/// The most nodes a domain has (the kernel's `MAX_NUMNODES` at its largest).
pub(crate) const MAX_NODES: usize = 1024;

/// Which nodes exist, and whether they are the machine's (tables are then bound to them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    /// `valid[n]`: node id `n` may be named by a node word.
    valid: Vec<bool>,
    real: bool,
}

impl Topology {
    /// The process's topology: `UFUTEX_NUMA_NODES=N` virtual nodes, else the machine's.
    pub(crate) fn system() -> &'static Topology {
        static SYSTEM: OnceLock<Topology> = OnceLock::new();
        SYSTEM.get_or_init(|| {
            let forced = std::env::var("UFUTEX_NUMA_NODES").ok().and_then(|v| v.trim().parse::<usize>().ok());
            match forced {
                Some(n) if (1..=MAX_NODES).contains(&n) => Topology::virtual_nodes(n),
                _ => Topology::from_sysfs(),
            }
        })
    }

    /// `n` virtual nodes, 0..n.
    pub(crate) fn virtual_nodes(n: usize) -> Topology {
        Topology { valid: vec![true; n.clamp(1, MAX_NODES)], real: false }
    }

    fn from_sysfs() -> Topology {
        let read = |f: &str| std::fs::read_to_string(format!("/sys/devices/system/node/{f}")).ok();
        match read("possible").or_else(|| read("online")).and_then(|s| parse_node_list(&s)) {
            Some(valid) => Topology { valid, real: true },
            // No NUMA support in the kernel: one node, nothing to bind.
            None => Topology { valid: vec![true], real: false },
        }
    }

    /// Node ids run 0..count (some may be holes).
    pub(crate) fn count(&self) -> usize {
        self.valid.len()
    }

    pub(crate) fn is_real(&self) -> bool {
        self.real
    }

    pub(crate) fn is_valid(&self, node: u64) -> bool {
        usize::try_from(node).ok().and_then(|n| self.valid.get(n).copied()).unwrap_or(false)
    }

    /// The node the calling thread runs on.
    pub(crate) fn current_node(&self) -> u32 {
        let (cpu, node) = getcpu();
        if self.real && self.is_valid(node.into()) {
            node
        } else {
            cpu % self.count() as u32
        }
    }

    /// Map a node reported by the kernel (a memory policy's) into this topology.
    fn map_kernel_node(&self, node: u32) -> Option<u32> {
        match self.real {
            true => self.is_valid(node.into()).then_some(node),
            false => Some(node % self.count() as u32),
        }
    }
}

/// Parse a sysfs node list such as `0-3,5` into the set of ids; `None` if malformed or empty.
pub(crate) fn parse_node_list(s: &str) -> Option<Vec<bool>> {
    let mut valid = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?),
            None => {
                let n = part.trim().parse::<usize>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi >= MAX_NODES {
            return None;
        }
        if valid.len() <= hi {
            valid.resize(hi + 1, false);
        }
        valid[lo..=hi].iter_mut().for_each(|v| *v = true);
    }
    (!valid.is_empty()).then_some(valid)
}

/// The calling thread's (cpu, node).
fn getcpu() -> (u32, u32) {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two u32s through valid pointers; the third argument is unused.
    let r = unsafe {
        libc::syscall(libc::SYS_getcpu, &mut cpu as *mut u32, &mut node as *mut u32, std::ptr::null_mut::<u8>())
    };
    if r == 0 {
        (cpu, node)
    } else {
        (0, 0)
    }
}

const MPOL_PREFERRED: i32 = 1;
const MPOL_BIND: i32 = 2;
const MPOL_PREFERRED_MANY: i32 = 5;
const MPOL_F_NODE: libc::c_ulong = 1;
const MPOL_F_ADDR: libc::c_ulong = 2;
/// Mode flags the kernel ORs into the mode (`MPOL_F_STATIC_NODES` and friends).
const MPOL_MODE_FLAGS: i32 = 0xff00;

/// The node a preferred or home-node memory policy covering `addr` names, if any.
pub(crate) fn mpol_node(addr: usize) -> Option<u32> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0 as libc::c_ulong; 2 * MAX_NODES / 64];
    // SAFETY:
    // - `mode` and `mask` are writable and big enough for `maxnode` = MAX_NODES + 1 bits;
    // - with MPOL_F_ADDR the kernel only looks up the mapping covering `addr` (EFAULT if none).
    let r = unsafe {
        libc::syscall(libc::SYS_get_mempolicy, &mut mode, mask.as_mut_ptr(), MAX_NODES + 1, addr, MPOL_F_ADDR)
    };
    if r != 0 {
        return None;
    }
    match mode & !MPOL_MODE_FLAGS {
        MPOL_PREFERRED => {
            let word = mask.iter().position(|&w| w != 0)?;
            Some((word * 64) as u32 + mask[word].trailing_zeros())
        }
        MPOL_BIND | MPOL_PREFERRED_MANY => {
            let mut node: libc::c_int = -1;
            // SAFETY: as above; with MPOL_F_NODE | MPOL_F_ADDR the kernel writes the node of the
            // page at `addr` into `node` and needs no mask.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_get_mempolicy,
                    &mut node,
                    std::ptr::null_mut::<libc::c_ulong>(),
                    0usize,
                    addr,
                    MPOL_F_NODE | MPOL_F_ADDR,
                )
            };
            (r == 0 && node >= 0).then_some(node as u32)
        }
        _ => None,
    }
}

/// Why a NUMA operation failed.
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
    /// The errno the C ABI returns for this error.
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

/// Resolve `word` to its key in `domain` (the C ABI's `UFUTEX_NUMA` / `UFUTEX_MPOL`): the plain
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
    domain: &Domain,
    word: WordRef,
    node_word: Option<WordRef>,
    mpol: bool,
    purpose: Purpose,
) -> Result<Key, NumaError> {
    let key = resolve_node(domain, word, node_word, mpol)?;
    if purpose == Purpose::Queue {
        domain.ensure_table(&key).map_err(|_| NumaError::NoMemory)?;
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
fn resolve_node(domain: &Domain, word: WordRef, node_word: Option<WordRef>, mpol: bool) -> Result<Key, NumaError> {
    let key = Key::private(word.addr());
    match node_word {
        None if !mpol => Ok(key),
        // The common case: the node word already names a node of the domain. Only read it.
        Some(nw) => match (nw.load(), domain.numa_nodes()) {
            (stored, Some(nodes)) if stored != word.size().max() && nodes.topology.is_valid(stored) => {
                Ok(key.on_node(stored as u32))
            }
            _ => resolve_slow(domain, word, node_word, mpol),
        },
        None => resolve_slow(domain, word, node_word, mpol),
    }
}

/// [`resolve`] for a node word of -1 or naming no node, or `mpol` without a node word.
#[cold]
#[inline(never)]
fn resolve_slow(domain: &Domain, word: WordRef, node_word: Option<WordRef>, mpol: bool) -> Result<Key, NumaError> {
    let key = Key::private(word.addr());
    let topology = &domain.numa_nodes().ok_or(NumaError::NotNuma)?.topology;
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

mod sealed {
    pub trait Sealed {}
}

/// A futex word type that can be half of a [`NumaFutex`]: `AtomicU8`, `AtomicU16`,
/// `AtomicU32`, `AtomicU64`. Sealed.
pub trait NumaWord: Futex + sealed::Sealed {
    /// A zero-sized type aligned to twice the word's size.
    #[doc(hidden)]
    type PairAlign: Copy + fmt::Debug;
    #[doc(hidden)]
    const PAIR_ALIGN: Self::PairAlign;
    #[doc(hidden)]
    fn new_word(v: Self::Value) -> Self;
    /// -1 at the word's width: "no node yet".
    #[doc(hidden)]
    const NO_NODE: Self::Value;
}

macro_rules! numa_word {
    ($atomic:ty, $value:ty, $align:ident, $n:literal) => {
        #[doc(hidden)]
        #[derive(Debug, Clone, Copy)]
        #[repr(align($n))]
        pub struct $align;
        impl sealed::Sealed for $atomic {}
        impl NumaWord for $atomic {
            type PairAlign = $align;
            const PAIR_ALIGN: $align = $align;
            fn new_word(v: $value) -> Self {
                <$atomic>::new(v)
            }
            const NO_NODE: $value = <$value>::MAX;
        }
    };
}

numa_word!(AtomicU8, u8, Align2, 2);
numa_word!(AtomicU16, u16, Align4, 4);
numa_word!(AtomicU32, u32, Align8, 8);
numa_word!(AtomicU64, u64, Align16, 16);

/// A futex word followed by its node word, aligned to twice the word's size (the C ABI's
/// `UFUTEX_NUMA` layout): use it with [`Domain::wait_numa`] and friends on a NUMA domain.
///
/// The node word holds the node whose table the futex lives in, or -1 (all ones, the
/// `NO_NODE` of the width) until the first operation writes its caller's node there.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use ufutex::{Domain, DomainConfig, NumaFutex};
/// let d = Domain::new(DomainConfig::new().numa(true))?;
/// let f = NumaFutex::<AtomicU32>::new(0);
/// assert_eq!(f.node().load(Ordering::Relaxed), u32::MAX); // no node yet
/// assert_eq!(d.wake_numa(&f, 1), Ok(0));
/// assert_ne!(f.node().load(Ordering::Relaxed), u32::MAX); // the waker's node, written back
/// # Ok::<(), std::io::Error>(())
/// ```
#[repr(C)]
pub struct NumaFutex<F: NumaWord> {
    _align: [F::PairAlign; 0],
    word: F,
    node: F,
}

impl<F: NumaWord> NumaFutex<F> {
    /// A pair holding `value`, with no node yet (-1).
    pub fn new(value: F::Value) -> Self {
        Self::with_node(value, F::NO_NODE)
    }

    /// A pair holding `value`, bound to `node` (checked by each operation).
    pub fn with_node(value: F::Value, node: F::Value) -> Self {
        NumaFutex { _align: [], word: F::new_word(value), node: F::new_word(node) }
    }

    /// The futex word.
    pub fn word(&self) -> &F {
        &self.word
    }

    /// The node word.
    pub fn node(&self) -> &F {
        &self.node
    }

    #[inline]
    fn resolve(&self, domain: &Domain, purpose: Purpose) -> Result<(WordRef, Key), NumaError> {
        let word = word_of(&self.word);
        let key = resolve(domain, word, Some(word_of(&self.node)), domain.numa_mpol(), purpose)?;
        Ok((word, key))
    }
}

impl<F: NumaWord> fmt::Debug for NumaFutex<F>
where
    F: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NumaFutex").field("word", &self.word).field("node", &self.node).finish()
    }
}

/// One pair of a [`Domain::waitv_numa`]: the pair, the value its word must hold, and a mask.
#[derive(Debug, Clone, Copy)]
pub struct NumaWaitEntry<'a> {
    word: WordRef,
    node: WordRef,
    expected: u64,
    mask: u64,
    _borrow: std::marker::PhantomData<&'a ()>,
}

impl<'a> NumaWaitEntry<'a> {
    /// Wait on `f`'s word while it holds `expected`, woken by any mask.
    pub fn new<F: NumaWord>(f: &'a NumaFutex<F>, expected: F::Value) -> Self {
        NumaWaitEntry {
            word: word_of(&f.word),
            node: word_of(&f.node),
            expected: F::value_bits(expected),
            mask: MATCH_ANY,
            _borrow: std::marker::PhantomData,
        }
    }

    /// Only wakes whose mask shares a bit with `mask` count for this entry.
    pub fn with_mask(mut self, mask: u64) -> Self {
        self.mask = mask;
        self
    }
}

/// NUMA operations: the word's node word picks the node's table (module docs of `numa`).
impl Domain {
    /// [`Domain::wait`] on a NUMA pair.
    ///
    /// # Errors
    /// [`NumaError::InvalidNode`], [`NumaError::NotNuma`] (before the value is compared), or
    /// the wait's own [`WaitError`].
    pub fn wait_numa<F: NumaWord>(
        &self,
        f: &NumaFutex<F>,
        expected: F::Value,
        deadline: Option<Deadline>,
    ) -> Result<(), NumaError> {
        self.wait_bitset_numa(f, expected, MATCH_ANY, deadline)
    }

    /// [`Domain::wait_bitset`] on a NUMA pair.
    ///
    /// # Errors
    /// As [`Domain::wait_numa`].
    pub fn wait_bitset_numa<F: NumaWord>(
        &self,
        f: &NumaFutex<F>,
        expected: F::Value,
        mask: u64,
        deadline: Option<Deadline>,
    ) -> Result<(), NumaError> {
        let (word, key) = f.resolve(self, Purpose::Queue)?;
        Ok(crate::wait::wait_key(self, word, key, F::value_bits(expected), mask, deadline.map(Into::into))?)
    }

    /// [`Domain::wake`] on a NUMA pair (resolving, and writing back, the node even for `n == 0`).
    ///
    /// # Errors
    /// [`NumaError::InvalidNode`], [`NumaError::NotNuma`].
    pub fn wake_numa<F: NumaWord>(&self, f: &NumaFutex<F>, n: usize) -> Result<usize, NumaError> {
        self.wake_bitset_numa(f, n, MATCH_ANY)
    }

    /// [`Domain::wake_bitset`] on a NUMA pair.
    ///
    /// # Errors
    /// As [`Domain::wake_numa`].
    pub fn wake_bitset_numa<F: NumaWord>(&self, f: &NumaFutex<F>, n: usize, mask: u64) -> Result<usize, NumaError> {
        let (_, key) = f.resolve(self, Purpose::Wake)?;
        Ok(crate::wake::wake_key(self, key, n, mask))
    }

    /// [`Domain::requeue`] between two NUMA pairs, which may be on different nodes. Both node
    /// words are resolved (source first) before the value is compared.
    ///
    /// # Errors
    /// As [`Domain::wake_numa`], or [`WaitError::WouldBlock`].
    pub fn requeue_numa<F: NumaWord>(
        &self,
        from: &NumaFutex<F>,
        expected: F::Value,
        to: &NumaFutex<F>,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, NumaError> {
        let (word, k1) = from.resolve(self, Purpose::Queue)?;
        let (_, k2) = to.resolve(self, Purpose::Queue)?;
        Ok(crate::requeue::requeue_keys(self, word, k1, F::value_bits(expected), k2, nr_wake, nr_requeue)?)
    }

    /// [`Domain::waitv`] on NUMA pairs; every node word is resolved, in order, before any
    /// value is compared.
    ///
    /// # Errors
    /// As [`Domain::wait_numa`].
    ///
    /// # Panics
    /// If `entries` is empty or longer than [`WAITV_MAX`].
    pub fn waitv_numa(&self, entries: &[NumaWaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, NumaError> {
        assert!(!entries.is_empty() && entries.len() <= WAITV_MAX, "waitv takes 1..={WAITV_MAX} entries");
        let resolved = entries
            .iter()
            .map(|e| {
                let key = resolve(self, e.word, Some(e.node), self.numa_mpol(), Purpose::Queue)?;
                Ok(WaitEntry::from_raw(e.word, e.expected, e.mask).with_key(key))
            })
            .collect::<Result<Vec<_>, NumaError>>()?;
        Ok(crate::waitv::waitv_entries(self, &resolved, deadline.map(Into::into))?)
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn parses_sysfs_node_lists() {
        assert_eq!(parse_node_list("0\n"), Some(vec![true]));
        assert_eq!(parse_node_list("0-3,5\n"), Some(vec![true, true, true, true, false, true]));
        assert_eq!(parse_node_list("2"), Some(vec![false, false, true]));
        assert_eq!(parse_node_list(""), None);
        assert_eq!(parse_node_list("3-1"), None);
        assert_eq!(parse_node_list("x"), None);
        assert_eq!(parse_node_list("0-5000"), None);
    }

    #[test]
    fn topology_validates_holes() {
        let t = Topology { valid: parse_node_list("0,2").unwrap(), real: true };
        assert_eq!(t.count(), 3);
        assert!(t.is_valid(0) && !t.is_valid(1) && t.is_valid(2) && !t.is_valid(3) && !t.is_valid(u64::MAX));
    }

    #[test]
    fn pairs_are_aligned_to_twice_the_size() {
        use std::mem::{align_of, size_of};
        use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
        assert_eq!((size_of::<NumaFutex<AtomicU8>>(), align_of::<NumaFutex<AtomicU8>>()), (2, 2));
        assert_eq!((size_of::<NumaFutex<AtomicU16>>(), align_of::<NumaFutex<AtomicU16>>()), (4, 4));
        assert_eq!((size_of::<NumaFutex<AtomicU32>>(), align_of::<NumaFutex<AtomicU32>>()), (8, 8));
        assert_eq!((size_of::<NumaFutex<AtomicU64>>(), align_of::<NumaFutex<AtomicU64>>()), (16, 16));
    }

    #[test]
    fn real_tables_are_bound_to_their_node() {
        // This machine's node 0 is real: a table placed on it carries a preferred policy for 0.
        if !Topology::from_sysfs().is_real() {
            return;
        }
        let t = crate::table::Table::new_on(64, 0, 0, true).expect("64 buckets");
        assert_eq!(mpol_node(t.base_addr()), Some(0));
        let heap = crate::table::Table::new(64, 0).expect("64 buckets");
        assert_eq!(mpol_node(heap.base_addr()), None, "a heap table has the default policy");
    }
}
