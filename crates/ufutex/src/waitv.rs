//! Waiting on any of many words (futex_waitv), of any sizes mixed.

use crate::deadline::Timeout;
use crate::engine::Want;
use crate::error::WaitError;
use crate::key::Key;
use crate::membarrier::Pays;
use crate::parker::{Park, ParkTimeout, Watch};
use crate::primitive::AtomicU32;
use crate::private_table::{await_unparks, register};
use crate::table::Node;
use crate::tables::Tables;
use crate::thread::{with_thread, ThreadData};
use crate::waiter::{enqueue_all, take_back, try_collect, Unqueued, Why};
use crate::word::{word_of, Futex, Size, WordRef};
use crate::MATCH_ANY;
use std::marker::PhantomData;

/// The most entries one [`waitv`](crate::waitv()) takes (the kernel takes 128); more panics.
///
/// # Examples
/// ```
/// use std::sync::atomic::AtomicU8;
/// use ufutex::{waitv, WaitEntry, WaitError, WAITV_MAX};
/// let w = AtomicU8::new(1);
/// let entries = vec![WaitEntry::new(&w, 0); WAITV_MAX];
/// assert_eq!(waitv(&entries, None), Err(WaitError::WouldBlock));
/// ```
pub const WAITV_MAX: usize = 1024;

/// One word of a [`waitv`](crate::waitv()): the word, the value it must hold, and a wake mask.
///
/// It borrows the word for its lifetime. Entries of different widths mix freely in one call.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
/// use ufutex::{waitv, WaitEntry};
/// let (a, b) = (AtomicU8::new(0), AtomicU32::new(0));
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         // Woken through `b`, the entry at index 1.
///         while b.load(Ordering::Acquire) == 0 {
///             let _ = waitv(&[WaitEntry::new(&a, 0), WaitEntry::new(&b, 0)], None);
///         }
///     });
///     b.store(1, Ordering::Release);
///     ufutex::wake(&b, 1);
/// });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WaitEntry<'a> {
    // 32 bytes, two entries a cache line: the scan of a long vector (`any_changed`) reads the
    // address, the value and the size of each. (The word as a `WordRef` and the key beside it,
    // which repeated the address, made 48.)
    /// The word's address; with `size`, the word ([`WaitEntry::word`]).
    addr: usize,
    expected: u64,
    mask: u64,
    /// The node of the entry's key ([`Key::node`]; `NO_NODE`: the plain table).
    node: u32,
    size: Size,
    _borrow: PhantomData<&'a ()>,
}

const _: () = assert!(std::mem::size_of::<WaitEntry<'static>>() == 32);

impl<'a> WaitEntry<'a> {
    /// Wait on `f` while it holds `expected`, woken by any mask.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::AtomicU64;
    /// use ufutex::{waitv, WaitEntry, WaitError};
    /// let w = AtomicU64::new(5);
    /// let timeout = Some(std::time::Duration::from_millis(1).into());
    /// assert_eq!(waitv(&[WaitEntry::new(&w, 5)], timeout), Err(WaitError::TimedOut));
    /// ```
    pub fn new<F: Futex>(f: &'a F, expected: F::Value) -> Self {
        WaitEntry::of(word_of(f), F::value_bits(expected), MATCH_ANY)
    }

    /// Only wakes whose mask shares a bit with `mask` count for this entry (a mask of 0 is never
    /// woken). The value check does not depend on the mask.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use ufutex::{waitv, WaitEntry};
    /// let w = AtomicU32::new(0);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while w.load(Ordering::Acquire) == 0 {
    ///             let _ = waitv(&[WaitEntry::new(&w, 0).with_mask(0b01)], None);
    ///         }
    ///     });
    ///     w.store(1, Ordering::Release);
    ///     ufutex::wake_bitset(&w, 1, 0b11); // shares bit 0 with the entry's mask
    /// });
    /// ```
    pub fn with_mask(mut self, mask: u64) -> Self {
        self.mask = mask;
        self
    }

    /// An entry from validated raw parts (the C ABI).
    pub(crate) fn from_raw(word: WordRef, expected: u64, mask: u64) -> WaitEntry<'static> {
        WaitEntry::of(word, expected, mask)
    }

    /// An entry of `word` in the plain table.
    fn of<'w>(word: WordRef, expected: u64, mask: u64) -> WaitEntry<'w> {
        let (addr, size) = (word.addr(), word.size());
        WaitEntry { addr, expected, mask, node: Key::private(addr).node(), size, _borrow: PhantomData }
    }

    /// The entry's word.
    #[inline(always)]
    fn word(&self) -> WordRef {
        // SAFETY: the address and the size are those of a `WordRef` (`of`), unchanged since:
        // `new`'s borrows its word for the entry's lifetime, and `from_raw`'s is one the C ABI
        // validated for its call, which the entry does not outlive.
        unsafe { WordRef::from_raw(self.addr, self.size) }
    }

    /// The entry's word as a 32-bit atomic, if it is one ([`WordRef::as_u32`]), borrowed with
    /// the entry.
    fn word_u32(&self) -> Option<&AtomicU32> {
        // SAFETY: as `word`'s, the word is a live, aligned atomic of `size` while the entry is
        // used; of 32 bits here (just compared).
        (self.size == Size::U32).then(|| unsafe { &*(self.addr as *const AtomicU32) })
    }

    /// The word, the expected value and the mask (the process-shared operations).
    #[cfg_attr(ufutex_loom, allow(dead_code))]
    pub(crate) fn parts(&self) -> (WordRef, u64, u64) {
        (self.word(), self.expected, self.mask)
    }

    /// Its word for the kernel to watch (see [`AlsoKernel`]), if 32-bit: a private futex.
    pub(crate) fn watch(&self) -> Option<Watch<'_>> {
        Some(Watch { word: self.word_u32()?, val: self.expected as u32, shared: false })
    }

    /// Whether the word no longer holds the expected value (a wait on it would mismatch).
    #[inline(always)]
    pub(crate) fn changed(&self) -> bool {
        self.word().load() != self.expected
    }

    /// Whether any entry's word no longer holds its expected value.
    ///
    /// The first entry here, the others out of line ([`Self::any_changed_after`]): a waitv that
    /// fails on its first entry, or has one, costs its front end no call (one entry: ~3.4 →
    /// ~1.9 ns; BENCHMARKS.md, fifty-seventh session), and the loops for the rest, four sizes
    /// of them, stay out of every front end.
    #[inline(always)]
    pub(crate) fn any_changed(entries: &[WaitEntry<'_>]) -> bool {
        match entries {
            [] => false,
            [first, rest @ ..] => first.changed() || (!rest.is_empty() && Self::any_changed_after(rest)),
        }
    }

    /// [`Self::any_changed`] of the entries after the first. Each run of entries of one size goes
    /// through a loop of its own that loads at that size ([`Self::changed_in_run`]), where
    /// [`WordRef::load`]'s tests of the size per entry took a second branch an entry (128
    /// entries failing on the last, Rust path: ~110 → ~70 ns; BENCHMARKS.md, fifty-sixth
    /// session).
    #[inline(never)]
    fn any_changed_after(entries: &[WaitEntry<'_>]) -> bool {
        let mut rest = entries;
        while let Some(first) = rest.first() {
            let (changed, run) = first.size.known(|size| Self::changed_in_run(rest, size));
            if changed {
                return true;
            }
            rest = &rest[run..];
        }
        false
    }

    /// The leading run of `entries` whose words are of `size`: whether one of them changed, and
    /// how many entries were looked at (the run's length when none changed).
    ///
    /// Two entries a turn while both hold, then the one that ends the run (if any) told apart:
    /// one taken branch for two entries, and no index kept in the loop (the C ABI's scan does
    /// the same: `ffi/validate.rs`).
    #[inline(always)]
    fn changed_in_run(entries: &[WaitEntry<'_>], size: Size) -> (bool, usize) {
        // An entry the run passes over: of `size`, its word holding its value.
        let holds = |e: &WaitEntry<'_>| e.word().load_if(size) == Some(e.expected);
        let mut rest = entries;
        while let [a, b, tail @ ..] = rest {
            if !(holds(a) && holds(b)) {
                break;
            }
            rest = tail;
        }
        // One by one from the pair that stopped (or the odd last entry), to the end if need be.
        let passed = entries.len() - rest.len();
        for (k, e) in rest.iter().enumerate() {
            if !holds(e) {
                // Of `size`: it changed; else the run ends before it.
                return (e.size == size, passed + k);
            }
        }
        (false, entries.len())
    }

    /// The entry's key (its node picks the table).
    #[cfg_attr(ufutex_loom, allow(dead_code))]
    pub(crate) fn key(&self) -> Key {
        Key::private(self.addr).on_node(self.node)
    }

    /// The same entry with its key given, a key of its word: the key's node picks the table
    /// (NUMA, `numa.rs`).
    pub(crate) fn with_key(mut self, key: Key) -> Self {
        debug_assert_eq!(key.word, self.addr as u64, "a key of another word");
        self.node = key.node();
        self
    }
}

/// Why [`try_waitv_entries`] returned without a wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitvError {
    /// As a wait ends without a wake.
    Wait(WaitError),
    /// No memory for the waiters (the C ABI's `ENOMEM`); nothing was queued.
    NoMemory,
}

impl From<WaitError> for WaitvError {
    fn from(e: WaitError) -> Self {
        WaitvError::Wait(e)
    }
}

/// The untyped waitv the Rust front ends call: as [`try_waitv_entries`], and, as a `Vec` that
/// cannot grow, the process aborts if memory for the waiters cannot be had (`WaitError` has no
/// such outcome; the C ABI answers `ENOMEM` instead).
///
/// Its early mismatch is inlined into the front ends, as a wait's is (`wait.rs`): a waitv that
/// fails at once costs its scan and no call (one entry: ~3.4 → ~1.9 ns; BENCHMARKS.md,
/// fifty-seventh session). The rest, which looks again, is out of line.
#[inline]
pub(crate) fn waitv_entries(
    tables: &Tables,
    entries: &[WaitEntry<'_>],
    timeout: Option<Timeout>,
) -> Result<usize, WaitError> {
    // (A vector of a wrong length goes on to the rest, which refuses it.)
    if entries.len() <= WAITV_MAX && WaitEntry::any_changed(entries) {
        return Err(WaitError::WouldBlock);
    }
    waitv_entries_slow(tables, entries, timeout)
}

/// [`waitv_entries`] after its early mismatch.
#[inline(never)]
fn waitv_entries_slow(
    tables: &Tables,
    entries: &[WaitEntry<'_>],
    timeout: Option<Timeout>,
) -> Result<usize, WaitError> {
    try_waitv_entries(tables, entries, timeout).map_err(|e| match e {
        WaitvError::Wait(e) => e,
        WaitvError::NoMemory => std::alloc::handle_alloc_error(std::alloc::Layout::new::<Node>()),
    })
}

/// The untyped waitv every front end calls.
pub(crate) fn try_waitv_entries(
    tables: &Tables,
    entries: &[WaitEntry<'_>],
    timeout: Option<Timeout>,
) -> Result<usize, WaitvError> {
    try_waitv_watching(tables, entries, &AlsoKernel::default(), timeout)
}

/// What else ends a waitv of the preload library, besides ufutex's wakes: the kernel's own wakes
/// of 32-bit words (see `wait::Wakers::AlsoKernel`; a raw-syscall waker, the kernel's wake of a
/// thread-id word, a process that is not preloaded). The thread sleeps on those words in the
/// kernel too, and a kernel wake of one, or a change of its value, ends the waitv with that
/// word's index although no waker of ours dequeued it (a spurious wakeup, which the kernel's
/// futex allows).
#[derive(Default)]
pub(crate) struct AlsoKernel<'a> {
    /// The entries' own 32-bit words are watched.
    pub(crate) own: bool,
    /// Each entry's index in the caller's vector, ascending (`entries[k]` is `index[k]`); none:
    /// `k`.
    pub(crate) index: Option<&'a [usize]>,
    /// Words that only the kernel wakes, not queued here (process-shared words that the preload
    /// library leaves to the kernel): their index in the caller's vector, and their value.
    pub(crate) kernel_only: &'a [(usize, WordRef, u32)],
}

impl AlsoKernel<'_> {
    /// The caller's index of `entries[k]`.
    fn index(&self, k: usize) -> usize {
        self.index.map_or(k, |ix| ix[k])
    }

    /// The words to watch, each with its index in the caller's vector: those that only the
    /// kernel wakes first (past [`crate::parker::MAX_WATCH`], a word is looked at between
    /// slices only, and the entries' own words are reached by ufutex's wakes too).
    fn watch<'w>(&self, entries: &'w [WaitEntry<'_>]) -> Option<(Vec<Watch<'w>>, Vec<usize>)>
    where
        Self: 'w,
    {
        let own = entries.iter().enumerate().filter(|_| self.own);
        let own = own.filter_map(|(k, e)| Some((e.watch()?, self.index(k))));
        let kernel_only = self
            .kernel_only
            .iter()
            .filter_map(|(i, word, val)| word.as_u32().map(|w| (Watch { word: w, val: *val, shared: true }, *i)));
        let (mut watch, mut index) = (Vec::new(), Vec::new());
        let n = own.clone().count() + self.kernel_only.len();
        watch.try_reserve_exact(n).ok()?;
        index.try_reserve_exact(n).ok()?;
        for (w, i) in kernel_only.chain(own) {
            watch.push(w);
            index.push(i);
        }
        Some((watch, index))
    }

    /// Whether a word that only the kernel wakes no longer holds its value.
    fn kernel_only_changed(&self) -> bool {
        self.kernel_only.iter().any(|(_, word, val)| word.load() != u64::from(*val))
    }
}

/// [`try_waitv_entries`], also ended by the kernel's wakes that `also` names.
pub(crate) fn try_waitv_watching(
    tables: &Tables,
    entries: &[WaitEntry<'_>],
    also: &AlsoKernel<'_>,
    timeout: Option<Timeout>,
) -> Result<usize, WaitvError> {
    assert!(
        !entries.is_empty() && entries.len() <= WAITV_MAX,
        "waitv takes 1..={WAITV_MAX} entries, got {}",
        entries.len()
    );
    // Early exit without touching a bucket: linearisable at the load that saw the mismatch.
    if WaitEntry::any_changed(entries) || also.kernel_only_changed() {
        return Err(WaitError::WouldBlock.into());
    }
    // As a wait (`wait.rs`): not from a handler that interrupted a wait or a critical section.
    let Some(_episode) = crate::reentry::episode() else {
        return Err(WaitError::Interrupted.into());
    };
    with_thread(|td| waitv_queued(tables, td, entries, also, timeout))
}

fn waitv_queued(
    tables: &Tables,
    td: &ThreadData,
    entries: &[WaitEntry<'_>],
    also: &AlsoKernel<'_>,
    timeout: Option<Timeout>,
) -> Result<usize, WaitvError> {
    register(tables, td);
    // A deadline already passed: timed out now, as a wait (`wait.rs`), once the memory for the
    // waiters is had, which the kernel's waitv allocates (ENOMEM) before it looks at its timer.
    if timeout.is_some_and(|t| t.expired()) {
        also.watch(entries).ok_or(WaitvError::NoMemory)?;
        // SAFETY: this thread is between episodes, as below; the nodes stay unused.
        let nodes = unsafe { td.waitv_nodes(entries.len()) }.ok_or(WaitvError::NoMemory)?;
        wants(entries, nodes)?;
        return Err(WaitError::TimedOut.into());
    }
    // Spin before queueing, as a wait does (`wait.rs`): a change is a mismatch.
    if td.parker.spin_for(|| WaitEntry::any_changed(entries) || also.kernel_only_changed()) {
        return Err(WaitError::WouldBlock.into());
    }
    let (watch, watched) = also.watch(entries).ok_or(WaitvError::NoMemory)?;
    // SAFETY: this thread is between episodes: the previous one ended with every node dequeued
    // and every owed unpark received (`finish`).
    let nodes = unsafe { td.waitv_nodes(entries.len()) }.ok_or(WaitvError::NoMemory)?;
    match enqueue_all(tables, &wants(entries, nodes)?, Pays::Waiter) {
        Ok(()) => {}
        Err(Unqueued { why: Why::NoMemory, .. }) => return Err(WaitvError::NoMemory),
        Err(Unqueued { queued, why: Why::Changed }) => {
            return Ok(finish(tables, td, &nodes[..queued], also, Err(WaitError::WouldBlock))?);
        }
        Err(Unqueued { why: Why::Table(never), .. }) => match never {},
    }
    let parked = match td.parker.park(1, timeout.as_ref(), None, &watch, false) {
        Ok(()) => Ok(None),
        Err(ParkTimeout::Watched(j)) => Ok(Some(watched[j])),
        Err(e) => Err(WaitError::from(e)),
    };
    Ok(finish(tables, td, nodes, also, parked)?)
}

/// What [`enqueue_all`] queues for `entries`, node `i` for entry `i`.
fn wants<'n>(entries: &[WaitEntry<'_>], nodes: &'n [Node]) -> Result<Vec<Want<'n, Tables>>, WaitvError> {
    let wants = entries.iter().zip(nodes).map(|(e, node)| Want {
        waiter: node,
        word: e.word(),
        expected: e.expected,
        key: e.key(),
        mask: e.mask,
    });
    try_collect(wants).ok_or(WaitvError::NoMemory)
}

/// Take every still-queued node out; if wakers dequeued any, wait for all their unparks and
/// return the highest woken index (the caller's, `also`), else `otherwise`: an error, or the
/// index of a word the kernel woke.
fn finish(
    tables: &Tables,
    td: &ThreadData,
    nodes: &[Node],
    also: &AlsoKernel<'_>,
    otherwise: Result<Option<usize>, WaitError>,
) -> Result<usize, WaitError> {
    match (settle(tables, td, nodes.iter()).map(|k| also.index(k)), otherwise) {
        (Some(i), _) => Ok(i),
        (None, Ok(Some(i))) => Ok(i),
        (None, Err(e)) => Err(e),
        (None, Ok(None)) => unreachable!("an unpark without a dequeued node"),
    }
}

/// End a waitv episode over `nodes` (each queued once in it): take the still-queued ones out,
/// wait for every unpark owed by wakers that took the others, and return the highest index a
/// waker took, if any. The nodes are idle again afterwards.
pub(crate) fn settle<'n>(
    tables: &Tables,
    td: &ThreadData,
    nodes: impl Iterator<Item = &'n Node> + Clone,
) -> Option<usize> {
    let s = take_back(tables, nodes.clone());
    if let Some(never) = s.failed {
        match never {}
    }
    await_unparks(&td.parker, s.woken);
    for node in nodes {
        // SAFETY: every node is out of its queue (dequeued by us or by a waker) and every
        // waker's unpark has arrived (`await_unparks`): no other thread references them.
        unsafe { node.reclaim() };
    }
    s.best
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::WaitEntry;
    use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8};

    /// A run's loop (two entries a turn, then one by one) ends where the run ends, or at the
    /// changed entry, for runs of every length up to 9 with the change at every place, and
    /// with a word of another size after them or not.
    #[test]
    fn a_run_ends_at_its_last_entry_or_at_the_changed_one() {
        use crate::word::Size;
        let words: Vec<AtomicU32> = (0..9).map(AtomicU32::new).collect();
        let other = AtomicU16::new(7);
        for n in 0..=9 {
            let run: Vec<WaitEntry<'_>> = words[..n].iter().zip(0..).map(|(w, v)| WaitEntry::new(w, v)).collect();
            for tail in [&[][..], &[WaitEntry::new(&other, 7)][..]] {
                let entries = [&run[..], tail].concat();
                assert_eq!(
                    WaitEntry::changed_in_run(&entries, Size::U32),
                    (false, n),
                    "{n} entries, then {}",
                    tail.len()
                );
                for k in 0..n {
                    let mut v = entries.clone();
                    v[k].expected += 1;
                    assert_eq!(WaitEntry::changed_in_run(&v, Size::U32), (true, k), "{n} entries, {k} changed");
                    assert!(WaitEntry::any_changed(&v));
                }
            }
        }
    }

    #[test]
    fn a_changed_word_is_found_in_every_run_of_sizes() {
        let (a8, b8, a16) = (AtomicU8::new(1), AtomicU8::new(2), AtomicU16::new(3));
        let (a32, b32, a64, b64) = (AtomicU32::new(4), AtomicU32::new(5), AtomicU64::new(6), AtomicU64::new(7));
        // Runs of two, runs of one, and the first size again at the end.
        let entries = [
            WaitEntry::new(&a8, 1),
            WaitEntry::new(&b8, 2),
            WaitEntry::new(&a32, 4),
            WaitEntry::new(&b32, 5),
            WaitEntry::new(&a64, 6),
            WaitEntry::new(&a16, 3),
            WaitEntry::new(&b64, 7),
            WaitEntry::new(&a8, 1),
        ];
        assert!(!WaitEntry::any_changed(&entries), "every word holds its value");
        for i in 0..entries.len() {
            let mut v = entries;
            v[i].expected += 1;
            assert!(WaitEntry::any_changed(&v), "entry {i}'s word changed");
            assert!(!WaitEntry::any_changed(&v[..i]), "not among the entries before {i}");
            assert!(!WaitEntry::any_changed(&v[i + 1..]), "nor after it");
        }
    }
}
