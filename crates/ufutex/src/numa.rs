//! NUMA futexes, the public face: a futex word followed by its node word ([`NumaFutex`]), and
//! the NUMA operations of a [`Domain`]. The node word picks the node's table (`resolve.rs`);
//! the operations themselves are the plain ones on the key it gives.

use crate::deadline::Deadline;
use crate::domain::Domain;
use crate::key::Key;
use crate::membarrier::Pays;
use crate::primitive::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
use crate::resolve::{resolve, NumaError, Purpose};
use crate::tables::Tables;
use crate::wait::Wakers;
use crate::waitv::{WaitEntry, WAITV_MAX};
use crate::wake::Report;
use crate::word::{word_of, Futex, WordRef};
use crate::MATCH_ANY;
use std::fmt;

mod sealed {
    pub trait Sealed {}
}

/// A futex word type that can be half of a [`NumaFutex`]: `AtomicU8`, `AtomicU16`,
/// `AtomicU32`, `AtomicU64`. Sealed. The node word has the same width, so it holds nodes up
/// to the width's maximum less one (all ones is "no node").
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU64, AtomicU8};
/// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, NumaWord};
/// fn wake_all<F: NumaWord>(d: &Domain, f: &NumaFutex<F>) -> Result<usize, NumaError> {
///     d.wake_numa(f, usize::MAX)
/// }
/// let d = Domain::new(DomainConfig::new().numa(true))?;
/// assert_eq!(wake_all(&d, &NumaFutex::<AtomicU8>::new(0)), Ok(0));
/// assert_eq!(wake_all(&d, &NumaFutex::<AtomicU64>::new(0)), Ok(0));
/// # Ok::<(), std::io::Error>(())
/// ```
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
    /// A pair holding `value`, with no node yet (-1): the first operation on it writes its
    /// caller's node (or a memory policy's, with [`crate::DomainConfig::mpol`]) there.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU8, Ordering};
    /// use ufutex::NumaFutex;
    /// let f = NumaFutex::<AtomicU8>::new(7);
    /// assert_eq!(f.word().load(Ordering::Relaxed), 7);
    /// assert_eq!(f.node().load(Ordering::Relaxed), u8::MAX);
    /// ```
    pub fn new(value: F::Value) -> Self {
        Self::with_node(value, F::NO_NODE)
    }

    /// A pair holding `value`, bound to `node`. Not checked here: an operation on a pair whose
    /// node the domain does not have fails [`NumaError::InvalidNode`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU32>::with_node(0, 4096); // more nodes than any domain has
    /// assert_eq!(d.wake_numa(&f, 1), Err(NumaError::InvalidNode(4096)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_node(value: F::Value, node: F::Value) -> Self {
        NumaFutex { _align: [], word: F::new_word(value), node: F::new_word(node) }
    }

    /// The futex word: change it, then wake, as with a plain word. A plain operation on it
    /// ([`crate::wait`], [`Domain::wake`]) never meets a NUMA one (different tables).
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, WaitError};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU32>::new(0);
    /// f.word().store(1, Ordering::Release);
    /// assert_eq!(d.wait_numa(&f, 0, None), Err(NumaError::Wait(WaitError::WouldBlock)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn word(&self) -> &F {
        &self.word
    }

    /// The node word: -1 (all ones) until an operation writes a node there; then that node
    /// picks the table, until the caller stores another.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU16, Ordering};
    /// use ufutex::{Domain, DomainConfig, NumaFutex};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU16>::new(0);
    /// d.wake_numa(&f, 0).unwrap(); // even a wake of 0 writes the node back
    /// let node = f.node().load(Ordering::Relaxed);
    /// assert_ne!(node, u16::MAX);
    /// d.wake_numa(&f, 1).unwrap();
    /// assert_eq!(f.node().load(Ordering::Relaxed), node); // only read from now on
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn node(&self) -> &F {
        &self.node
    }

    #[inline]
    fn resolve(&self, tables: &Tables, purpose: Purpose) -> Result<(WordRef, Key), NumaError> {
        let word = word_of(&self.word);
        let key = resolve(tables, word, Some(word_of(&self.node)), tables.numa_mpol(), purpose)?;
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
/// It borrows the pair for its lifetime; pairs of different widths and nodes mix freely.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
/// use ufutex::{Domain, DomainConfig, NumaFutex, NumaWaitEntry};
/// let d = Domain::new(DomainConfig::new().numa(true))?;
/// let (a, b) = (NumaFutex::<AtomicU8>::new(0), NumaFutex::<AtomicU32>::new(0));
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         while b.word().load(Ordering::Acquire) == 0 {
///             let _ = d.waitv_numa(&[NumaWaitEntry::new(&a, 0), NumaWaitEntry::new(&b, 0)], None);
///         }
///     });
///     b.word().store(1, Ordering::Release);
///     d.wake_numa(&b, 1).unwrap();
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
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
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU64;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, NumaWaitEntry, WaitError};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU64>::new(3);
    /// let r = d.waitv_numa(&[NumaWaitEntry::new(&f, 2)], None);
    /// assert_eq!(r, Err(NumaError::Wait(WaitError::WouldBlock)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new<F: NumaWord>(f: &'a NumaFutex<F>, expected: F::Value) -> Self {
        NumaWaitEntry {
            word: word_of(&f.word),
            node: word_of(&f.node),
            expected: F::value_bits(expected),
            mask: MATCH_ANY,
            _borrow: std::marker::PhantomData,
        }
    }

    /// Only wakes whose mask shares a bit with `mask` count for this entry (a mask of 0 is never
    /// woken). The value check does not depend on the mask.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use std::time::Duration;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, NumaWaitEntry, WaitError};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU32>::new(0);
    /// let entry = NumaWaitEntry::new(&f, 0).with_mask(0b01);
    /// let r = d.waitv_numa(&[entry], Some(Duration::from_millis(1).into()));
    /// assert_eq!(r, Err(NumaError::Wait(WaitError::TimedOut)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_mask(mut self, mask: u64) -> Self {
        self.mask = mask;
        self
    }
}

/// NUMA operations: the word's node word picks the node's table (module docs of `numa`).
impl Domain {
    /// [`Domain::wait`] on a NUMA pair: the node word is resolved (and written back if it held
    /// -1) before the value is compared. Only NUMA operations on the same pair wake it.
    ///
    /// # Errors
    /// Before the value is compared: [`NumaError::NotNuma`] if the domain has no NUMA,
    /// [`NumaError::InvalidNode`] if the node word names no node of the domain,
    /// [`NumaError::NoMemory`] if the node's first table cannot be allocated. Then
    /// [`NumaError::Wait`] with the wait's own [`WaitError`](crate::WaitError), as for
    /// [`crate::wait`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{Domain, DomainConfig, NumaFutex};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU32>::new(0);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while f.word().load(Ordering::Acquire) == 0 {
    ///             let _ = d.wait_numa(&f, 0, None);
    ///         }
    ///     });
    ///     f.word().store(1, Ordering::Release);
    ///     d.wake_numa(&f, 1).unwrap();
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait_numa<F: NumaWord>(
        &self,
        f: &NumaFutex<F>,
        expected: F::Value,
        deadline: Option<Deadline>,
    ) -> Result<(), NumaError> {
        self.wait_bitset_numa(f, expected, MATCH_ANY, deadline)
    }

    /// [`Domain::wait_bitset`] on a NUMA pair: woken only by NUMA wakes whose mask shares a
    /// bit with `mask`.
    ///
    /// # Errors
    /// As [`Domain::wait_numa`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU16;
    /// use std::time::Duration;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, WaitError};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let f = NumaFutex::<AtomicU16>::new(0);
    /// let r = d.wait_bitset_numa(&f, 0, 0b1, Some(Duration::from_millis(1).into()));
    /// assert_eq!(r, Err(NumaError::Wait(WaitError::TimedOut)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wait_bitset_numa<F: NumaWord>(
        &self,
        f: &NumaFutex<F>,
        expected: F::Value,
        mask: u64,
        deadline: Option<Deadline>,
    ) -> Result<(), NumaError> {
        let (word, key) = f.resolve(self.tables(), Purpose::Queue)?;
        let timeout = deadline.map(Into::into);
        Ok(crate::wait::wait_key(
            self.tables(),
            word,
            key,
            F::value_bits(expected),
            mask,
            timeout,
            Wakers::Ufutex,
            Pays::Waiter,
        )?)
    }

    /// [`Domain::wake`] on a NUMA pair (resolving, and writing back, the node even for `n == 0`);
    /// returns how many were woken. Allocates no table: a node without one has no waiters.
    ///
    /// # Errors
    /// [`NumaError::NotNuma`] if the domain has no NUMA; [`NumaError::InvalidNode`] if the node
    /// word names no node of the domain. Nothing is woken then.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// assert_eq!(d.wake_numa(&NumaFutex::<AtomicU32>::new(0), 1), Ok(0));
    /// let bad = NumaFutex::<AtomicU32>::with_node(0, 5000);
    /// assert_eq!(d.wake_numa(&bad, 1).unwrap_err().errno(), libc::EINVAL);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wake_numa<F: NumaWord>(&self, f: &NumaFutex<F>, n: usize) -> Result<usize, NumaError> {
        self.wake_bitset_numa(f, n, MATCH_ANY)
    }

    /// [`Domain::wake_bitset`] on a NUMA pair: wakes up to `n` waiters whose mask shares a bit
    /// with `mask`; returns how many.
    ///
    /// # Errors
    /// As [`Domain::wake_numa`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU64;
    /// use ufutex::{Domain, DomainConfig, NumaFutex};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// assert_eq!(d.wake_bitset_numa(&NumaFutex::<AtomicU64>::new(0), 1, 0b10), Ok(0));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn wake_bitset_numa<F: NumaWord>(&self, f: &NumaFutex<F>, n: usize, mask: u64) -> Result<usize, NumaError> {
        let (_, key) = f.resolve(self.tables(), Purpose::Wake)?;
        Ok(crate::wake::wake_private(self.tables(), key, n, mask, Report::Count, Pays::Waiter).count)
    }

    /// [`Domain::requeue`] between two NUMA pairs, which may be on different nodes. Both node
    /// words are resolved (source first) before the value is compared; returns woken + moved.
    ///
    /// # Errors
    /// [`NumaError::NotNuma`], [`NumaError::InvalidNode`] or [`NumaError::NoMemory`] as for
    /// [`Domain::wait_numa`], for either pair (nothing is woken or moved then);
    /// [`NumaError::Wait`] with [`WaitError::WouldBlock`](crate::WaitError::WouldBlock) if
    /// `from`'s word does not hold `expected`.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, WaitError};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let (from, to) = (NumaFutex::<AtomicU32>::new(1), NumaFutex::<AtomicU32>::new(0));
    /// assert_eq!(d.requeue_numa(&from, 1, &to, 1, usize::MAX), Ok(0));
    /// let r = d.requeue_numa(&from, 2, &to, 1, usize::MAX);
    /// assert_eq!(r, Err(NumaError::Wait(WaitError::WouldBlock)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn requeue_numa<F: NumaWord>(
        &self,
        from: &NumaFutex<F>,
        expected: F::Value,
        to: &NumaFutex<F>,
        nr_wake: usize,
        nr_requeue: usize,
    ) -> Result<usize, NumaError> {
        let (word, k1) = from.resolve(self.tables(), Purpose::Queue)?;
        let (_, k2) = to.resolve(self.tables(), Purpose::Queue)?;
        Ok(crate::requeue::requeue_keys(
            self.tables(),
            k1,
            k2,
            Some((word, F::value_bits(expected))),
            nr_wake,
            nr_requeue,
            Pays::Waiter, // as this domain's waits
        )?)
    }

    /// [`Domain::waitv`] on NUMA pairs; every node word is resolved, in order, before any
    /// value is compared. Returns the index of a woken entry (which one, when several are
    /// woken, is not promised).
    ///
    /// # Errors
    /// As [`Domain::wait_numa`]: the first entry that fails to resolve fails the call before
    /// anything is queued; then [`NumaError::Wait`] as for [`crate::waitv`].
    ///
    /// # Panics
    /// If `entries` is empty or longer than [`WAITV_MAX`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, AtomicU8};
    /// use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, NumaWaitEntry};
    /// let d = Domain::new(DomainConfig::new().numa(true))?;
    /// let a = NumaFutex::<AtomicU8>::new(0);
    /// let bad = NumaFutex::<AtomicU32>::with_node(0, 4096);
    /// let entries = [NumaWaitEntry::new(&a, 0), NumaWaitEntry::new(&bad, 0)];
    /// assert_eq!(d.waitv_numa(&entries, None), Err(NumaError::InvalidNode(4096)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn waitv_numa(&self, entries: &[NumaWaitEntry<'_>], deadline: Option<Deadline>) -> Result<usize, NumaError> {
        assert!(!entries.is_empty() && entries.len() <= WAITV_MAX, "waitv takes 1..={WAITV_MAX} entries");
        let resolved = entries
            .iter()
            .map(|e| {
                let key = resolve(self.tables(), e.word, Some(e.node), self.tables().numa_mpol(), Purpose::Queue)?;
                Ok(WaitEntry::from_raw(e.word, e.expected, e.mask).with_key(key))
            })
            .collect::<Result<Vec<_>, NumaError>>()?;
        Ok(crate::waitv::waitv_entries(self.tables(), &resolved, deadline.map(Into::into))?)
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_aligned_to_twice_the_size() {
        use std::mem::{align_of, size_of};
        use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};
        assert_eq!((size_of::<NumaFutex<AtomicU8>>(), align_of::<NumaFutex<AtomicU8>>()), (2, 2));
        assert_eq!((size_of::<NumaFutex<AtomicU16>>(), align_of::<NumaFutex<AtomicU16>>()), (4, 4));
        assert_eq!((size_of::<NumaFutex<AtomicU32>>(), align_of::<NumaFutex<AtomicU32>>()), (8, 8));
        assert_eq!((size_of::<NumaFutex<AtomicU64>>(), align_of::<NumaFutex<AtomicU64>>()), (16, 16));
    }
}
