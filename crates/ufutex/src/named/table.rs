//! A namespace's object table: open addressing (linear probing) over power-of-two arrays of
//! slots (levels: the table grows by adding one twice as large), keyed by a 64-bit key. Lookups take no lock and make no system call; creating and
//! removing take the namespace's robust lock (`shared::lock`), so at most one changes the table
//! at a time and a dead changer is taken over.
//!
//! A slot's `state` is `(generation << 8) | phase`:
//!
//! ```text
//!   Empty --create--> Busy(g) --publish--> Live(g) --remove--> Dead(g+1) --create--> Busy(g+1) ...
//! ```
//!
//! A reader is a seqlock reader: it reads `state` (Acquire), the key and kind, then `state`
//! again after an Acquire fence; equal states mean a consistent slot, and every transition
//! changes the state (the phase, or the generation on removal), so no change can hide. A
//! writer stores `Busy` and a Release fence before it writes the fields, and publishes `Live`
//! with a Release store. Empty ends a probe; Dead (a tombstone) and Busy do not, and a create
//! reuses the first Dead slot of the probe.
//!
//! Crash consistency: the changer writes the slot it is changing to the header's `progress`
//! first, and ends by clearing it and counting the object in (or out) in one store. Whoever takes
//! the lock over from a dead changer finishes the job: a Busy slot becomes Dead (never counted),
//! and a Dead slot's word is marked removed, its waiters woken and it is counted out (a removal
//! whose waker died).
//!
//! A handle is (slot, generation): an operation checks the slot is still `Live` with that
//! generation, so a handle to a removed object fails (`Removed`) even after its key was reused.

use crate::primitive::{fence, prefetch, AtomicU16, AtomicU32, AtomicU64, Ordering};
use crate::shared::fault::{point, Point};
use crate::shared::lock::{self, Life, Liveness, Owner, Taken};
use crate::shared::SharedError;

pub(crate) const EMPTY: u64 = 0;
pub(crate) const BUSY: u64 = 1;
pub(crate) const LIVE: u64 = 2;
pub(crate) const DEAD: u64 = 3;
const PHASE: u64 = 0xff;

/// What a removed object's word holds: a value no semaphore reaches, so that a waiter that
/// expected a count sees it change.
pub(crate) const REMOVED: u32 = u32::MAX;

/// A mutex's `owner` when its owner thread ended holding it (`mutex.rs`); its low half names no
/// process. (The owner word is here because a removed mutex keeps its slot while a living
/// process holds it.)
pub(crate) const ABANDONED: u64 = u64::MAX << 32;

/// `owner` bit: a mutex being taken from a dead owner (`mutex.rs`, 4). A process's slot + 1
/// stays below it.
pub(crate) const PENDING: u64 = 1 << 31;

/// The process an `owner` word names (`(gen << 32) | (slot + 1)`, maybe `PENDING`).
pub(crate) fn owner_of(w: u64) -> Owner {
    Owner { slot: ((w & (PENDING - 1)) as u32).wrapping_sub(1), gen: (w >> 32) as u32 }
}

fn name_len(key: &Key<'_>) -> u64 {
    match key {
        Key::Name(n) => n.len() as u64,
        Key::Id(_) => 0,
    }
}

pub(crate) fn pack(gen: u32, phase: u64) -> u64 {
    (u64::from(gen) << 8) | phase
}

fn gen_of(state: u64) -> u32 {
    (state >> 8) as u32
}

/// The generation of the live object in `s`, if one lives there.
pub(crate) fn live_gen(s: &Slot) -> Option<u32> {
    let st = s.state.load(Ordering::Acquire);
    (st & PHASE == LIVE).then_some(gen_of(st))
}

/// One object.
#[repr(C, align(64))]
pub(crate) struct Slot {
    pub(crate) state: AtomicU64,
    pub(crate) key: AtomicU64,
    pub(crate) kind: AtomicU32,
    /// A mutex's owning thread (its kernel thread id).
    pub(crate) tid: AtomicU32,
    /// The object's futex word: a semaphore's count, an event's state, a mutex's release
    /// sequence, or a raw word (a raw word of 8 or 16 bits is its first bytes; one of 64 bits
    /// is it and `word_hi`, 8-aligned).
    pub(crate) word: AtomicU32,
    /// The upper half of a 64-bit raw word; a semaphore's, an event's or a mutex's generation's
    /// tag (their operations change the word only while it is theirs: [`Slot::update_word`]); 0 for
    /// other raw words.
    pub(crate) word_hi: AtomicU32,
    /// A mutex's owner: `(gen << 32) | (slot + 1)` of its process in the shared table, 0 free.
    pub(crate) owner: AtomicU64,
    /// A mutex's recursion count; an event's mode (1: manual reset).
    pub(crate) aux: AtomicU32,
    /// A counted object's holders: the processes that have a handle to it (`counted.rs`).
    pub(crate) holders: AtomicU32,
}

// A 64-bit raw word is `word` and `word_hi` read as one: 8-aligned and adjacent. (Loom's
// atomics are models of another size; the models use 32-bit objects only.)
#[cfg(not(ufutex_loom))]
const _: () = assert!(std::mem::offset_of!(Slot, word) % 8 == 0);
#[cfg(not(ufutex_loom))]
const _: () = assert!(std::mem::offset_of!(Slot, word_hi) == std::mem::offset_of!(Slot, word) + 4);

/// The raw words' kinds, by size; [`KIND_WORD`] is the 32-bit one.
pub(crate) const KIND_WORD: u32 = 2;
pub(crate) const KIND_WORD8: u32 = 5;
pub(crate) const KIND_WORD16: u32 = 6;
pub(crate) const KIND_WORD64: u32 = 7;

/// Mark a removed object's word with all ones at the size its waiters use (a raw word's own
/// size, else 32 bits): a value no semaphore reaches, so that a waiter that expected anything
/// else sees it change. Then its waiters are woken (by address: every size meets there).
pub(crate) fn mark_removed(s: &Slot) {
    // (Under loom the atomics are models, not memory to view at other sizes; the models use
    // 32-bit objects only.)
    #[cfg(not(ufutex_loom))]
    {
        use std::sync::atomic::{AtomicU16, AtomicU8};
        let at = std::ptr::from_ref(&s.word);
        // SAFETY: `word` is 8-aligned with `word_hi` right after it (asserted above), in a slot
        // of a mapping that lives as long as the namespace; every view below lies within those
        // 8 bytes and is aligned to its size.
        unsafe {
            match s.kind.load(Ordering::Relaxed) & !(NAMED | COUNTED) {
                KIND_WORD8 => return (*at.cast::<AtomicU8>()).store(u8::MAX, Ordering::Release),
                KIND_WORD16 => return (*at.cast::<AtomicU16>()).store(u16::MAX, Ordering::Release),
                KIND_WORD64 => return (*at.cast::<AtomicU64>()).store(u64::MAX, Ordering::Release),
                _ => {}
            }
        }
    }
    s.word.store(REMOVED, Ordering::Release);
}

/// Whether objects of `kind` are raw words (whose every bit is the program's), not semaphores,
/// events or mutexes (whose word has the object's generation beside it: [`Slot::update_word`]).
pub(crate) fn is_raw(kind: u32) -> bool {
    matches!(kind & !(NAMED | COUNTED), KIND_WORD | KIND_WORD8 | KIND_WORD16 | KIND_WORD64)
}

/// What `word_hi` holds beside a semaphore's, an event's or a mutex's word of generation `gen`:
/// the generation with its top bit set, so that it is never a fresh raw word's 0 (a stale
/// handle of generation 0 must not match a raw word made in its slot). Generations `2^31`
/// apart share a tag; a stale operation would have to outlast 2^31 reuses of its slot.
/// (A raw 64-bit word's upper half is the program's: a program that stores a removed
/// object's tag there, while that object's stale handle is between its check and its
/// compare-and-swap, is the one case the tag cannot tell apart.)
pub(crate) fn word_tag(gen: u32) -> u32 {
    gen | 1 << 31
}

/// `word` and `word_hi` as the one 64-bit value they are read and written as (`word` is the low
/// half: it comes first in memory, on a little-endian machine).
#[cfg(not(ufutex_loom))]
fn pair(word: u32, hi: u32) -> u64 {
    u64::from(hi) << 32 | u64::from(word)
}

/// The word in the pair `v`, while it is the object of generation `gen`'s: its tag beside it and
/// not the removed mark.
#[cfg(not(ufutex_loom))]
fn word_of(v: u64, gen: u32) -> Option<u32> {
    ((v >> 32) as u32 == word_tag(gen) && v as u32 != REMOVED).then_some(v as u32)
}

/// Why [`Slot::update_word`] changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unchanged {
    /// The object is not the handle's any more (removed; maybe another one made in its slot).
    Gone,
    /// The change declined this word.
    Declined(u32),
}

#[cfg(not(ufutex_loom))]
impl Slot {
    /// A new object's word and `word_hi`, in one store. A stale handle's
    /// [`Slot::update_word`] sees either the removed object's pair (its mark, [`REMOVED`]) or
    /// the new one's (another tag): never the new word beside the old tag, which it would take
    /// for its own object's. (Two stores, word first, left that window open: a stale `set`
    /// signaled the new event.)
    pub(crate) fn start_word(&self, word: u32, hi: u32) {
        self.word_and_gen().store(pair(word, hi), Ordering::Relaxed);
    }

    /// What a waiter on the object of generation `gen` whose word it saw hold `w` sleeps on: the
    /// word and its generation's tag as one 64-bit futex word, and the value that expects. The
    /// sleep ends when the word changes, and also when the object is removed (its mark) or
    /// another is made in its slot (another tag) — so a waiter that checked its handle before a
    /// removal, then lost the race to the removal's wake and to a new object in the slot, does
    /// not sleep on the new object. The wakes of the 32-bit word reach it: wakes go by address,
    /// where words of every size meet.
    pub(crate) fn watched(&self, gen: u32, w: u32) -> (&std::sync::atomic::AtomicU64, u64) {
        (self.word_and_gen(), pair(w, word_tag(gen)))
    }

    /// `word` with `word_hi` (a semaphore's, an event's or a mutex's: the object's generation's
    /// tag, [`word_tag`]).
    fn word_and_gen(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: `word` is 8-aligned with `word_hi` right after it (asserted above), both
        // atomics of the same slot: their 8 bytes are one valid, aligned `AtomicU64`.
        unsafe { &*std::ptr::from_ref(&self.word).cast::<std::sync::atomic::AtomicU64>() }
    }

    /// The word of the object of generation `gen` (not a raw word), read with `order`; `None`
    /// once it is not that object's (removed, or another one made in the slot).
    pub(crate) fn read_word(&self, gen: u32, order: Ordering) -> Option<u32> {
        word_of(self.word_and_gen().load(order), gen)
    }

    /// Change the word of the object of generation `gen` (not a raw word) from `w` to `f(w)`
    /// (`None`: leave it), with `set` ordering when it changes and `seen` otherwise: the word
    /// it changed. An operation checks its handle and then changes the word; between the two
    /// the object may be removed and a new one made in its slot — so the change is made only
    /// if `word_hi` still holds the generation, in the same compare-and-swap, and fails
    /// (`Gone`) otherwise, as it does on a removed object's mark.
    pub(crate) fn update_word(
        &self,
        gen: u32,
        set: Ordering,
        seen: Ordering,
        mut f: impl FnMut(u32) -> Option<u32>,
    ) -> Result<u32, Unchanged> {
        let both = self.word_and_gen();
        let mut v = both.load(seen);
        loop {
            let w = word_of(v, gen).ok_or(Unchanged::Gone)?;
            let next = f(w).ok_or(Unchanged::Declined(w))?;
            match both.compare_exchange_weak(v, pair(next, word_tag(gen)), set, seen) {
                Ok(_) => return Ok(w),
                Err(now) => v = now,
            }
        }
    }
}

#[cfg(ufutex_loom)]
impl Slot {
    /// A new object's word and `word_hi` (the models' atomics are separate 32-bit objects, and
    /// the models do not use `update_word`): the upper half first, while the word still holds a
    /// removed object's mark.
    pub(crate) fn start_word(&self, word: u32, hi: u32) {
        self.word_hi.store(hi, Ordering::Relaxed);
        self.word.store(word, Ordering::Relaxed);
    }
}

impl Slot {
    /// An empty slot (a mapping's slots start as zeroes: the same).
    #[cfg(test)]
    pub(crate) fn empty() -> Slot {
        Slot {
            state: AtomicU64::new(0),
            key: AtomicU64::new(0),
            kind: AtomicU32::new(0),
            tid: AtomicU32::new(0),
            word: AtomicU32::new(0),
            word_hi: AtomicU32::new(0),
            owner: AtomicU64::new(0),
            aux: AtomicU32::new(0),
            holders: AtomicU32::new(0),
        }
    }
}

impl Header {
    /// A header of nothing yet (unit tests and models).
    #[cfg(test)]
    pub(crate) fn empty() -> Header {
        Header {
            magic: AtomicU64::new(0),
            version: AtomicU32::new(0),
            order: AtomicU32::new(0),
            lock: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            ref_intent: AtomicU64::new(0),
            ref_before: AtomicU32::new(0),
            nonce: AtomicU64::new(0),
            ledgers: AtomicU32::new(0),
            used: std::array::from_fn(|_| AtomicU32::new(0)),
            _line: [0],
            levels: AtomicU32::new(0),
        }
    }
}

impl NameSlot {
    /// An empty name slot.
    #[cfg(test)]
    pub(crate) fn empty() -> NameSlot {
        NameSlot { len: AtomicU64::new(0), words: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

/// The namespace's header (its first page).
#[repr(C)]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    /// log2 of the slot count.
    pub(crate) order: AtomicU32,
    /// The robust lock of creators and removers (`shared::lock`).
    pub(crate) lock: AtomicU64,
    /// `(slot being changed + 1) << 32 | removing << 31 | live objects`: the intent (which slot,
    /// creation or removal) and the count, changed together at the end of each change.
    pub(crate) progress: AtomicU64,
    /// The reference change under way (a counted object's holder taken or given back):
    /// `(ledger + 1) << 32 | entry`, 0 when none.
    pub(crate) ref_intent: AtomicU64,
    /// That object's holder count before the change.
    pub(crate) ref_before: AtomicU32,
    /// Random, set when the namespace is made: its ledgers carry it (`counted.rs`).
    pub(crate) nonce: AtomicU64,
    /// 1 once some process kept a ledger of counted objects here: until then there is nothing
    /// to reap (`counted.rs`), and opening the namespace reads no directory.
    pub(crate) ledgers: AtomicU32,
    /// Per level, the slots ever taken from Empty (tombstones included): a level half used
    /// makes the next.
    pub(crate) used: [AtomicU32; MAX_LEVELS as usize],
    _line: [u32; 1],
    /// How many levels of slots the namespace has (0 is read as 1). Every lookup reads it, so it
    /// has a cache line of its own: the changers' lock and counts above are written by every
    /// create and remove.
    pub(crate) levels: AtomicU32,
}

#[cfg(not(ufutex_loom))]
const _: () = assert!(std::mem::offset_of!(Header, levels) == 128 && std::mem::size_of::<Header>() <= 192);

/// The most levels a namespace has: level `k` has `n << k` slots (`n`: level 0's), so a
/// namespace grows to `n * (2^16 - 1)` slots.
pub(crate) const MAX_LEVELS: u32 = 16;

impl Header {
    /// How many levels there are (published with Release when one is made).
    pub(crate) fn levels(&self) -> u32 {
        self.levels.load(Ordering::Acquire).clamp(1, MAX_LEVELS)
    }

    /// Live objects.
    pub(crate) fn live(&self) -> u32 {
        self.progress.load(Ordering::Relaxed) as u32 & !REMOVING
    }

    /// The change under way, if any: the slot, and whether it is a removal (else a creation).
    fn intent(&self) -> Option<(u32, bool)> {
        let p = self.progress.load(Ordering::Relaxed);
        let slot = ((p >> 32) as u32).checked_sub(1)?;
        Some((slot, p as u32 & REMOVING != 0))
    }

    /// Say `slot` is being created (or removed), the count unchanged.
    fn begin(&self, slot: u32, removing: bool) {
        let live = self.live() | if removing { REMOVING } else { 0 };
        self.progress.store((u64::from(slot) + 1) << 32 | u64::from(live), Ordering::Relaxed);
    }

    fn end(&self, delta: i32) {
        let live = self.live().wrapping_add_signed(delta);
        self.progress.store(u64::from(live), Ordering::Relaxed);
    }
}

/// What a lookup found: a live object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    /// Its kind, with [`COUNTED`] if it is.
    pub(crate) kind: u32,
}

impl Found {
    /// As one value (0: none), returned in two registers: an `Option<Found>` comes back from a
    /// call through memory, in pieces that the caller then reads whole — on the path of every
    /// lookup once the two paths merge (a store-forwarding stall: 3.8 → 8.6 ns a lookup).
    fn pack(self) -> u128 {
        1 << 96 | u128::from(self.kind) << 64 | u128::from(self.gen) << 32 | u128::from(self.slot)
    }

    #[inline(always)]
    pub(crate) fn unpack(v: u128) -> Option<Found> {
        (v != 0).then_some(Found { slot: v as u32, gen: (v >> 32) as u32, kind: (v >> 64) as u32 })
    }

    /// The object a ledger entry names (its kind unknown: 0).
    fn of(e: &Entry) -> Found {
        Found { slot: e.slot.load(Ordering::Relaxed), gen: e.gen.load(Ordering::Relaxed), kind: 0 }
    }
}

/// How a create goes when the key exists or not (semget's flags). Whichever it is, the answer
/// is atomic: of two processes that create one key, one creates and the other opens (or gets
/// `Exists`).
///
/// # Examples
/// ```
/// use ufutex::named::{NamedError, Namespace, Open};
/// let name = format!("doc-open-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let key = 0x5eed_2c00 + std::process::id() as u64;
/// assert_eq!(ns.word(key, Open::Existing).unwrap_err(), NamedError::NotFound);
/// assert!(!ns.word(key, Open::Create).unwrap().1); // made now
/// assert!(ns.word(key, Open::Create).unwrap().1); // it existed
/// assert_eq!(ns.word(key, Open::CreateNew).unwrap_err(), NamedError::Exists);
/// ns.remove(key).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// Open an existing object; absent → `NotFound` (semget without `IPC_CREAT`).
    Existing,
    /// Open it, or create it if absent (`IPC_CREAT`).
    Create,
    /// Create it; present → `Exists` (`IPC_CREAT | IPC_EXCL`).
    CreateNew,
}

/// Why a table operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableError {
    NotFound,
    Exists,
    WrongKind,
    Full,
    Shared(SharedError),
}

/// The longest byte-string name of an object (a [`Key::Name`]); a longer one is
/// [`NamedError::NameTooLong`](super::NamedError::NameTooLong). Not the limit of a
/// namespace's own name (64 bytes).
///
/// # Examples
/// ```
/// use ufutex::named::{NamedError, Namespace, Open, NAME_MAX};
/// let name = format!("doc-name-max-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// let longest = "x".repeat(NAME_MAX);
/// ns.semaphore(longest.as_str(), Open::CreateNew, 0).unwrap();
/// let longer = format!("{longest}x");
/// let err = ns.semaphore(longer.as_str(), Open::Create, 0).unwrap_err();
/// assert_eq!(err, NamedError::NameTooLong);
/// ns.remove(longest.as_str()).unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
pub const NAME_MAX: usize = 56;

/// `progress` bit: the change under way is a removal.
const REMOVING: u32 = 1 << 31;

/// `kind` bit: the slot's key is the hash of the name in its name slot.
pub(crate) const NAMED: u32 = 1 << 31;

/// `kind` bit: the object lives while processes hold it, and dies with its last holder
/// (reference-counted lifetime, `counted.rs`); it is part of the kind a handle opens.
pub(crate) const COUNTED: u32 = 1 << 30;

/// One reference of a process to a counted object, in that process's ledger (`counted.rs`):
/// the object's slot and generation, and where the reference stands.
#[repr(C)]
pub(crate) struct Entry {
    pub(crate) slot: AtomicU32,
    pub(crate) gen: AtomicU32,
    pub(crate) state: AtomicU32,
    pub(crate) _pad: AtomicU32,
}

/// An [`Entry`]'s states: unused; being counted in (the object's holders may or may not
/// include it yet); counted in; being counted out.
pub(crate) const E_FREE: u32 = 0;
pub(crate) const E_ADDING: u32 = 1;
pub(crate) const E_HELD: u32 = 2;
pub(crate) const E_DROPPING: u32 = 3;

/// The processes' ledgers of a namespace, by ledger number (a process slot of the shared
/// table), for finishing a reference change whose changer died.
pub(crate) trait Ledgers {
    fn entries(&self, ledger: u32) -> Option<&[Entry]>;
}

/// No ledgers (a table nobody holds counted objects in: unit tests and models).
#[cfg(test)]
pub(crate) struct NoLedgers;

#[cfg(test)]
impl Ledgers for NoLedgers {
    fn entries(&self, _ledger: u32) -> Option<&[Entry]> {
        None
    }
}

/// A reference to take or give back under the changers' lock: entry `index` of ledger
/// `ledger`, whose entries are `entries`.
#[derive(Clone, Copy)]
pub(crate) struct Ref<'e> {
    pub(crate) ledger: u32,
    pub(crate) entries: &'e [Entry],
    pub(crate) index: u32,
}

impl Ref<'_> {
    fn entry(&self) -> &Entry {
        &self.entries[self.index as usize]
    }

    fn intent(&self) -> u64 {
        (u64::from(self.ledger) + 1) << 32 | u64::from(self.index)
    }
}

/// A slot's name (for objects made by name): its length and bytes, beside the slot.
#[repr(C, align(64))]
pub(crate) struct NameSlot {
    pub(crate) len: AtomicU64,
    pub(crate) words: [AtomicU64; NAME_MAX / 8],
}

/// What identifies an object in a namespace: a 64-bit key, or a byte-string name of at most
/// [`NAME_MAX`] bytes. The two never meet (the key 5 and a name that hashes to 5 are two
/// objects). Opens take anything that converts: a `u64`, a `&str` or a `&[u8]`.
///
/// # Examples
/// ```
/// use ufutex::named::{Key, Namespace, Open};
/// let id = 0x5eed_2d00 + std::process::id() as u64;
/// assert_eq!(Key::from(id), Key::Id(id));
/// assert_eq!(Key::from("a name"), Key::Name(b"a name"));
/// let name = format!("doc-key-{}", std::process::id());
/// let ns = Namespace::open(&name).unwrap();
/// ns.semaphore(id, Open::CreateNew, 1).unwrap();
/// ns.semaphore("a name", Open::CreateNew, 2).unwrap(); // another object
/// let (by_bytes, _) = ns.semaphore(&b"a name"[..], Open::Existing, 0).unwrap();
/// assert_eq!(by_bytes.value(), Ok(2));
/// ns.remove(id).unwrap();
/// ns.remove("a name").unwrap();
/// Namespace::unlink(&name).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'k> {
    /// A 64-bit key (SysV's `key_t`, wider).
    Id(u64),
    /// A byte-string name (any bytes; at most [`NAME_MAX`]).
    Name(&'k [u8]),
}

impl From<u64> for Key<'static> {
    fn from(k: u64) -> Self {
        Key::Id(k)
    }
}

impl<'k> From<&'k [u8]> for Key<'k> {
    fn from(n: &'k [u8]) -> Self {
        Key::Name(n)
    }
}

impl<'k> From<&'k str> for Key<'k> {
    fn from(n: &'k str) -> Self {
        Key::Name(n.as_bytes())
    }
}

impl Key<'_> {
    /// The slot key: the id, or the name's FNV-1a hash.
    #[inline]
    fn hash(&self) -> u64 {
        match self {
            Key::Id(k) => *k,
            Key::Name(n) => {
                n.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
            }
        }
    }

    pub(crate) fn named(&self) -> bool {
        matches!(self, Key::Name(_))
    }

    /// The name as the name slot stores it: little-endian words, zero-padded.
    fn words(&self) -> [u64; NAME_MAX / 8] {
        let mut w = [0u64; NAME_MAX / 8];
        if let Key::Name(n) = self {
            for (i, b) in n.iter().enumerate().take(NAME_MAX) {
                w[i / 8] |= u64::from(*b) << (8 * (i % 8));
            }
        }
        w
    }
}

/// Where a namespace's slots are. They come in levels: level 0 is made with the namespace, and
/// each later one — made when the newest is half used — is twice the one before. Objects never
/// move (handles, and sleepers on their words, hold their place), so the table grows by adding
/// a level, and a lookup goes through every level (newest first), never stopped.
pub(crate) trait Levels {
    /// Level `k`'s slots and name slots, if there is such a level (mapped here on first use).
    fn level(&self, k: u32) -> Option<(&[Slot], &[NameSlot])>;
    /// Make level `k` (under the changers' lock, the header still saying `k` levels): whether it
    /// was made. The caller publishes it.
    fn make(&self, k: u32) -> bool;
    /// The namespace's level hints ([`Table::hints`]); none: every level is looked in.
    fn hints(&self) -> &[AtomicU16] {
        &[]
    }
}

/// One level of slots in memory (unit tests and models): it cannot grow.
#[cfg(test)]
pub(crate) struct OneLevel {
    pub(crate) slots: Vec<Slot>,
    pub(crate) names: Vec<NameSlot>,
}

#[cfg(test)]
impl OneLevel {
    pub(crate) fn new(n: usize) -> OneLevel {
        OneLevel { slots: (0..n).map(|_| Slot::empty()).collect(), names: (0..n).map(|_| NameSlot::empty()).collect() }
    }
}

#[cfg(test)]
impl Levels for OneLevel {
    fn level(&self, k: u32) -> Option<(&[Slot], &[NameSlot])> {
        (k == 0).then_some((&self.slots, &self.names))
    }
    fn make(&self, _k: u32) -> bool {
        false
    }
}

/// Levels made on demand (unit tests and models): level `k` has `first << k` slots, up to
/// `levels` levels, level 0 made; with `hints` level hints.
#[cfg(test)]
pub(crate) struct Growing {
    levels: Vec<OneLevel>,
    made: AtomicU32,
    pub(crate) hints: Vec<AtomicU16>,
}

#[cfg(test)]
impl Growing {
    pub(crate) fn new(first: usize, levels: u32, hints: usize) -> Growing {
        Growing {
            levels: (0..levels).map(|k| OneLevel::new(first << k)).collect(),
            made: AtomicU32::new(1),
            hints: (0..hints).map(|_| AtomicU16::new(0)).collect(),
        }
    }
}

#[cfg(test)]
impl Levels for Growing {
    fn level(&self, k: u32) -> Option<(&[Slot], &[NameSlot])> {
        // Acquire: pairs with `make`'s Release (a model's reader sees the level's slots made).
        (k < self.made.load(Ordering::Acquire))
            .then(|| (&self.levels[k as usize].slots[..], &self.levels[k as usize].names[..]))
    }
    fn make(&self, k: u32) -> bool {
        let ok = (k as usize) < self.levels.len();
        if ok {
            self.made.store(k + 1, Ordering::Release);
        }
        ok
    }
    fn hints(&self) -> &[AtomicU16] {
        &self.hints
    }
}

/// A view of a namespace's header and slots (a mapping, or a loom model's heap).
pub(crate) struct Table<'a> {
    pub(crate) header: &'a Header,
    /// Level 0, at hand: a lookup in a namespace that never grew reads the header's `levels`
    /// and the slots it probes, nothing else (with keys spread over many pages, each other page
    /// read is a TLB miss).
    pub(crate) first: (&'a [Slot], &'a [NameSlot]),
    pub(crate) levels: &'a dyn Levels,
    /// The ledgers of counted objects' holders (for finishing a dead changer's reference change).
    pub(crate) ledgers: &'a dyn Ledgers,
    /// Once the namespace has more than one level, which levels a key may be in: entry
    /// [`hint_of`] of its hash has bit `k` set if level `k` holds (or held) an object of a key
    /// with that hint. A lookup looks in those levels only (about one, with as many entries as
    /// keys), a miss mostly in none: without them it went through every level, 4 cache misses
    /// for a hit and 6 for a miss at 10^6 keys. Bits are only ever set: a creator sets its
    /// level's before it publishes the object (Relaxed, before the Release that publishes it),
    /// and the hints of level 0's objects are written before a second level is published
    /// (Release on `levels`, read with Acquire by every lookup), so a lookup that should see an
    /// object sees its bit. A removed object's bit stays (a wasted look, never a wrong answer).
    pub(crate) hints: &'a [AtomicU16],
}

/// A key's entry in the level hints (`len`: theirs, a power of two; 0: none).
fn hint_of(hash: u64, len: usize) -> usize {
    if len <= 1 {
        return if len == 1 { 0 } else { usize::MAX };
    }
    // Other bits than [`home`]'s: keys of one home slot spread over the hints.
    (hash.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - len.trailing_zeros())) as usize
}

/// The first slot number of level `k` (level 0 has `n` slots).
pub(crate) fn level_start(n: usize, k: u32) -> usize {
    n * ((1usize << k) - 1)
}

/// What a key looks for: its hash, and a name's bytes (small and copied by value: a lookup
/// stores little, so that a CPU keeps several in flight).
#[derive(Clone, Copy)]
struct Wanted<'k> {
    hash: u64,
    name: Option<&'k [u8]>,
}

impl<'k> Wanted<'k> {
    #[inline(always)]
    fn of(key: Key<'k>) -> Wanted<'k> {
        let name = match key {
            Key::Name(n) => Some(n),
            Key::Id(_) => None,
        };
        Wanted { hash: key.hash(), name }
    }
}

/// Whether name slot `ns` holds the name `name` (read as a seqlock reader reads: the caller
/// checks the slot's state around it).
#[cold]
fn name_is(ns: Option<&NameSlot>, name: &[u8]) -> bool {
    let Some(ns) = ns else { return false };
    let words = Key::Name(name).words();
    ns.len.load(Ordering::Relaxed) == name.len() as u64
        && ns.words.iter().zip(&words).all(|(a, b)| a.load(Ordering::Relaxed) == *b)
}

/// Where a key's probe starts (Fibonacci hashing of the key).
fn home(key: u64, len: usize) -> usize {
    if len <= 1 {
        return 0;
    }
    let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - len.trailing_zeros())) as usize & (len - 1)
}

impl<'a> Table<'a> {
    /// The table of `levels` (level 0 taken from it).
    #[cfg(test)]
    pub(crate) fn new(header: &'a Header, levels: &'a dyn Levels, ledgers: &'a dyn Ledgers) -> Table<'a> {
        let first = levels.level(0).expect("a namespace has level 0");
        Table { header, first, levels, ledgers, hints: levels.hints() }
    }

    /// Level 0's size (a power of two).
    fn base(&self) -> usize {
        self.first.0.len().max(1)
    }

    /// Level `k`'s slots and name slots, if there is such a level.
    fn level(&self, k: u32) -> Option<(&'a [Slot], &'a [NameSlot])> {
        if k == 0 {
            return Some(self.first);
        }
        self.levels.level(k)
    }

    /// Slot number `g` (of every level): the slot, and its name slot.
    #[inline]
    fn at(&self, g: u32) -> Option<(&'a Slot, Option<&'a NameSlot>)> {
        let (slots, names) = self.first;
        if let Some(s) = slots.get(g as usize) {
            return Some((s, names.get(g as usize)));
        }
        self.at_later(g)
    }

    /// The level of slot number `g`.
    fn level_of(&self, g: u32) -> u32 {
        let n = self.base(); // (a power of two)
        (((g as usize) >> n.trailing_zeros()) + 1).ilog2()
    }

    /// [`Table::at`] past level 0.
    #[cold]
    fn at_later(&self, g: u32) -> Option<(&'a Slot, Option<&'a NameSlot>)> {
        let n = self.base();
        let k = self.level_of(g);
        let (slots, names) = self.level(k)?;
        let i = g as usize - level_start(n, k);
        Some((slots.get(i)?, names.get(i)))
    }

    /// The live object of `key`, if any: no lock, no system call. (A lookup is a few dozen
    /// instructions and a cache miss or two: the fewer instructions, the more lookups a CPU
    /// keeps in flight, and the more of their misses overlap.)
    #[inline(always)]
    pub(crate) fn lookup(&self, key: Key<'_>) -> Option<Found> {
        if !self.grew() {
            return self.lookup_first(key);
        }
        Found::unpack(self.lookup_grown(key))
    }

    /// Whether the namespace has more than level 0 (then lookups go by the hints). Acquire: a
    /// second level is published after level 0's hints were written.
    #[inline(always)]
    pub(crate) fn grew(&self) -> bool {
        self.header.levels.load(Ordering::Acquire) > 1
    }

    /// [`Table::lookup`] once [`Table::grew`] said yes, its answer packed ([`Found::unpack`]).
    #[inline(always)]
    pub(crate) fn lookup_grown(&self, key: Key<'_>) -> u128 {
        self.lookup_hinted(Wanted::of(key))
    }

    /// [`Table::lookup`] in level 0 only: the whole lookup once [`Table::grew`] said no.
    #[inline(always)]
    pub(crate) fn lookup_first(&self, key: Key<'_>) -> Option<Found> {
        self.lookup_in(self.first.0, self.first.1, Wanted::of(key))
    }

    /// [`Table::lookup`], not inlined: for the changers (one copy of the code, fewer
    /// instruction-cache lines on a create).
    #[inline(never)]
    fn lookup_once(&self, key: Key<'_>) -> Option<Found> {
        self.lookup(key)
    }

    /// [`Table::lookup`] in a namespace that grew: in the levels the key's hint names, newest
    /// first (the largest). (Not `cold`: every miss, and so every create, comes here; code
    /// placed apart is an instruction-cache miss after the kernel ran.)
    #[inline(never)]
    fn lookup_hinted(&self, want: Wanted<'_>) -> u128 {
        let n = self.base();
        // The newest level holds about half the keys: its home slot is sent for while the hint
        // is read, so that for those keys the two memory reads overlap instead of adding up.
        let top = self.header.levels() - 1;
        if let Some((slots, _)) = self.levels.level(top) {
            prefetch(std::ptr::from_ref(&slots[home(want.hash, slots.len())]).cast());
        }
        let mut bits = match self.hints.get(hint_of(want.hash, self.hints.len())) {
            // Relaxed: see `hints`.
            Some(h) => u32::from(h.load(Ordering::Relaxed)),
            None => u32::MAX >> (32 - MAX_LEVELS), // no hints: every level
        };
        while bits != 0 {
            let k = 31 - bits.leading_zeros();
            bits &= !(1 << k);
            let Some((slots, names)) = self.level(k) else { continue };
            if let Some(f) = self.lookup_in(slots, names, want) {
                return Found::pack(Found { slot: (level_start(n, k) + f.slot as usize) as u32, ..f });
            }
        }
        0
    }

    /// Under the lock, before slot `g`'s new object of key `hash` is published: its level's bit
    /// in the key's hint (once the namespace has grown; until then lookups look in level 0).
    fn hint(&self, hash: u64, g: u32) {
        if self.grew() {
            self.set_hint(hash, self.level_of(g));
        }
    }

    /// Under the lock, as the namespace grows past level 0 (before the new level is published):
    /// the hints of level 0's live objects. (A dead changer's Busy slot was buried when the
    /// lock was taken; a Dead one needs none.)
    #[cold]
    fn hint_first_level(&self) {
        for s in self.first.0 {
            if s.state.load(Ordering::Relaxed) & PHASE == LIVE {
                self.set_hint(s.key.load(Ordering::Relaxed), 0);
            }
        }
    }

    /// Under the lock: bit `level` in the hint of key `hash`.
    fn set_hint(&self, hash: u64, level: u32) {
        if let Some(h) = self.hints.get(hint_of(hash, self.hints.len())) {
            // (A load and a store: under the lock no one else writes the hints.)
            h.store(h.load(Ordering::Relaxed) | 1 << level, Ordering::Relaxed);
        }
    }

    /// [`Table::lookup`] in one level: the slot's number there.
    #[inline(always)]
    fn lookup_in(&self, slots: &[Slot], names: &[NameSlot], want: Wanted<'_>) -> Option<Found> {
        let len = slots.len();
        let hash = want.hash;
        let mut i = home(hash, len);
        let mut probed = 0;
        while probed < len {
            let s = &slots[i];
            let st = s.state.load(Ordering::Acquire);
            match st & PHASE {
                EMPTY => return None,
                LIVE => {
                    let (k, kind) = (s.key.load(Ordering::Relaxed), s.kind.load(Ordering::Relaxed));
                    // A name is compared only where the key and the kind say it may match.
                    let same_name = match want.name {
                        Some(name) if k == hash && kind & NAMED != 0 => name_is(names.get(i), name),
                        _ => false,
                    };
                    fence(Ordering::Acquire); // the fields are read before the state again
                    if s.state.load(Ordering::Relaxed) != st {
                        continue; // changed under us: look at this slot again
                    }
                    let found = if want.name.is_some() { same_name } else { k == hash && kind & NAMED == 0 };
                    if found {
                        return Some(Found { slot: i as u32, gen: gen_of(st), kind: kind & !NAMED });
                    }
                }
                _ => {} // Busy or Dead: the key may be further on
            }
            i = (i + 1) & (len - 1);
            probed += 1;
        }
        None
    }

    /// How many slots the published levels have.
    pub(crate) fn capacity(&self) -> usize {
        level_start(self.base(), self.header.levels())
    }

    /// Slot number `g`, if there is one (for people who debug).
    pub(crate) fn slot(&self, g: u32) -> Option<&'a Slot> {
        self.at(g).map(|(s, _)| s)
    }

    /// The name in slot `g`'s name slot, if the slot is a named object's (for people who debug).
    pub(crate) fn name_of(&self, g: usize) -> Option<Vec<u8>> {
        let (s, ns) = self.at(u32::try_from(g).ok()?)?;
        if s.kind.load(Ordering::Relaxed) & NAMED == 0 {
            return None;
        }
        let ns = ns?;
        let n = (ns.len.load(Ordering::Relaxed) as usize).min(NAME_MAX);
        let bytes: Vec<u8> = ns.words.iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect();
        Some(bytes[..n].to_vec())
    }

    /// Take the changers' lock as `me`; finish what a dead changer left (`wake` wakes every
    /// waiter of a removed object's word).
    fn lock(&self, me: Owner, live: &(impl Liveness + ?Sized), wake: &impl Fn(&AtomicU32)) -> Result<(), TableError> {
        if lock::lock(&self.header.lock, me, live).map_err(TableError::Shared)? == Taken::FromDead {
            self.recover(wake);
        }
        Ok(())
    }

    fn unlock(&self) {
        lock::unlock(&self.header.lock);
    }

    /// Run `f` under the changers' lock (taken as `me`, finishing a dead changer's change first).
    pub(crate) fn locked<T>(
        &self,
        me: Owner,
        live: &(impl Liveness + ?Sized),
        wake: &impl Fn(&AtomicU32),
        f: impl FnOnce() -> T,
    ) -> Result<T, TableError> {
        self.lock(me, live, wake)?;
        let r = f();
        self.unlock();
        Ok(r)
    }

    /// After a changer died holding the lock: a slot it was creating becomes Dead; a slot it was
    /// removing gets its removal finished (the word marked, its waiters woken).
    #[cold]
    pub(crate) fn recover(&self, wake: &impl Fn(&AtomicU32)) {
        self.recover_object(wake);
        self.recover_ref(wake);
    }

    /// The creation or removal a dead changer left (see [`Table::recover`]).
    fn recover_object(&self, wake: &impl Fn(&AtomicU32)) {
        let Some((s, removing)) = self.header.intent().and_then(|(i, r)| Some((self.slot(i)?, r))) else {
            self.header.end(0); // nothing under way (or a stray intent: corrupt)
            return;
        };
        let st = s.state.load(Ordering::Relaxed);
        match (removing, st & PHASE) {
            // A creation never published: bury it (it was never counted in).
            (false, BUSY) => {
                s.state.store(pack(gen_of(st).wrapping_add(1), DEAD), Ordering::Release);
                mark_removed(s);
                wake(&s.word);
                self.header.end(0);
            }
            // A creation published but not ended: count it in.
            (false, LIVE) => self.header.end(1),
            // A removal that marked the slot but did not end: finish it, count the object out.
            (true, DEAD) => {
                mark_removed(s);
                wake(&s.word);
                self.header.end(-1);
            }
            // A creation that had not marked its slot, a removal that had not marked it (the
            // object lives on): nothing happened.
            _ => self.header.end(0),
        }
    }

    /// The reference change a dead changer left (after its object change, if any, was
    /// finished): under the lock only the changer changed the object's holders, so they are
    /// either the count before or the count after, and that tells whether it happened.
    fn recover_ref(&self, wake: &impl Fn(&AtomicU32)) {
        let intent = self.header.ref_intent.load(Ordering::Relaxed);
        if intent == 0 {
            return;
        }
        let (ledger, index) = (((intent >> 32) as u32).wrapping_sub(1), intent as u32);
        let entries = self.ledgers.entries(ledger);
        if let Some(entries) = entries.filter(|e| (index as usize) < e.len()) {
            let r = Ref { ledger, entries, index };
            let e = r.entry();
            let before = self.header.ref_before.load(Ordering::Relaxed);
            let object = self.counted(e.slot.load(Ordering::Relaxed), e.gen.load(Ordering::Relaxed));
            match e.state.load(Ordering::Relaxed) {
                E_ADDING => {
                    let counted_in =
                        object.is_some_and(|s| s.holders.load(Ordering::Relaxed) == before.wrapping_add(1));
                    e.state.store(if counted_in { E_HELD } else { E_FREE }, Ordering::Relaxed);
                }
                // Not yet counted out: do it now. (Counted out, or the object died — with its
                // last holder's removal finished above — and the entry is done with.)
                E_DROPPING => match object {
                    Some(s) if s.holders.load(Ordering::Relaxed) == before => self.drop_ref(r, wake),
                    _ => e.state.store(E_FREE, Ordering::Relaxed),
                },
                _ => {}
            }
        }
        self.header.ref_intent.store(0, Ordering::Relaxed);
    }

    /// The live counted object `(slot, gen)`, if it still is.
    fn counted(&self, slot: u32, gen: u32) -> Option<&'a Slot> {
        self.check(slot, gen).filter(|s| s.kind.load(Ordering::Relaxed) & COUNTED != 0)
    }

    /// Under the lock: count entry `r`'s process in as a holder of the live counted object `f`.
    pub(crate) fn add_ref(&self, r: Ref<'_>, f: Found) {
        let Some(s) = self.counted(f.slot, f.gen) else { return };
        let e = r.entry();
        e.slot.store(f.slot, Ordering::Relaxed);
        e.gen.store(f.gen, Ordering::Relaxed);
        e.state.store(E_ADDING, Ordering::Relaxed);
        let before = s.holders.load(Ordering::Relaxed);
        self.header.ref_before.store(before, Ordering::Relaxed);
        self.header.ref_intent.store(r.intent(), Ordering::Relaxed);
        point(Point::Holding);
        s.holders.store(before.wrapping_add(1), Ordering::Relaxed);
        e.state.store(E_HELD, Ordering::Relaxed);
        self.header.ref_intent.store(0, Ordering::Relaxed);
    }

    /// Under the lock: count entry `r`'s process out of its object's holders (if the object
    /// still lives), removing the object when that was the last, and free the entry.
    pub(crate) fn drop_ref(&self, r: Ref<'_>, wake: &impl Fn(&AtomicU32)) {
        let e = r.entry();
        let f = Found::of(e);
        if let Some(s) = self.counted(f.slot, f.gen).filter(|_| e.state.load(Ordering::Relaxed) != E_FREE) {
            let before = s.holders.load(Ordering::Relaxed);
            e.state.store(E_DROPPING, Ordering::Relaxed);
            self.header.ref_before.store(before, Ordering::Relaxed);
            self.header.ref_intent.store(r.intent(), Ordering::Relaxed);
            point(Point::Releasing);
            let now = before.saturating_sub(1);
            // The last holder: removed first, so that a live object never shows no holders.
            if now == 0 {
                self.remove_found(f, wake);
            }
            s.holders.store(now, Ordering::Relaxed);
        }
        e.state.store(E_FREE, Ordering::Relaxed);
        self.header.ref_intent.store(0, Ordering::Relaxed);
    }

    /// Open or create the object `key` of `kind` under the changers' lock (a new one's word
    /// starts at `word`): what it is, and whether it existed.
    pub(crate) fn create(
        &self,
        key: Key<'_>,
        (kind, word, aux): (u32, u32, u32),
        how: Open,
        me: Owner,
        live: &(impl Liveness + ?Sized),
        wake: &impl Fn(&AtomicU32),
    ) -> Result<(Found, bool), TableError> {
        // (Callers look the key up without the lock first: most opens find their object.)
        self.locked(me, live, wake, || self.create_locked(key, (kind, word, aux), how, None, live))?
    }

    /// Under the lock: open or create the object `key` as [`Table::create`] does; a counted
    /// one (`kind` has [`COUNTED`]) is made with `holder` (a free ledger entry) as its holder,
    /// counted in from its birth. (An existing one's holder is the caller's to add.)
    pub(crate) fn create_locked(
        &self,
        key: Key<'_>,
        (kind, word, aux): (u32, u32, u32),
        how: Open,
        holder: Option<Ref<'_>>,
        live: &(impl Liveness + ?Sized),
    ) -> Result<(Found, bool), TableError> {
        if let Some(f) = self.lookup_once(key) {
            return match (how, f.kind == kind) {
                (Open::CreateNew, _) => Err(TableError::Exists),
                (_, false) => Err(TableError::WrongKind),
                (_, true) => Ok((f, true)),
            };
        }
        if how == Open::Existing {
            return Err(TableError::NotFound);
        }
        let i = self.free_slot(key.hash(), live).ok_or(TableError::Full)?;
        let (s, name) = self.at(i).ok_or(TableError::Full)?;
        self.hint(key.hash(), i);
        let gen = gen_of(s.state.load(Ordering::Relaxed));
        let holder = holder.filter(|_| kind & COUNTED != 0);
        if let Some(r) = holder {
            self.first_holder(r, i, gen);
        }
        self.header.begin(i, false);
        s.state.store(pack(gen, BUSY), Ordering::Relaxed);
        fence(Ordering::Release); // Busy before the fields, for a reader that saw Live before
        point(Point::Creating);
        if let (Key::Name(_), Some(ns)) = (&key, name) {
            ns.len.store(name_len(&key), Ordering::Relaxed);
            for (w, v) in ns.words.iter().zip(key.words()) {
                w.store(v, Ordering::Relaxed);
            }
        }
        s.key.store(key.hash(), Ordering::Relaxed);
        s.kind.store(if key.named() { kind | NAMED } else { kind }, Ordering::Relaxed);
        // A raw word's upper half (of 64 bits) starts at 0; another object's is its generation's
        // tag. Both halves change at once: see `Slot::start_word`.
        s.start_word(word, if is_raw(kind) { 0 } else { word_tag(gen) });
        s.owner.store(0, Ordering::Relaxed);
        s.tid.store(0, Ordering::Relaxed);
        s.aux.store(aux, Ordering::Relaxed);
        s.holders.store(u32::from(holder.is_some()), Ordering::Relaxed);
        s.state.store(pack(gen, LIVE), Ordering::Release);
        self.header.end(1);
        if let Some(r) = holder {
            self.first_holder_in(r);
        }
        Ok((Found { slot: i, gen, kind }, false))
    }

    /// A counted object's creation, first: its creator's reference recorded (a changer that
    /// dies from here on leaves an intent whose entry names this slot and generation, counted
    /// in only if the object went live).
    #[cold]
    fn first_holder(&self, r: Ref<'_>, i: u32, gen: u32) {
        let e = r.entry();
        e.slot.store(i, Ordering::Relaxed);
        e.gen.store(gen, Ordering::Relaxed);
        e.state.store(E_ADDING, Ordering::Relaxed);
        self.header.ref_before.store(0, Ordering::Relaxed);
        self.header.ref_intent.store(r.intent(), Ordering::Relaxed);
    }

    /// A counted object's creation, last: live, with its creator counted in.
    #[cold]
    fn first_holder_in(&self, r: Ref<'_>) {
        r.entry().state.store(E_HELD, Ordering::Relaxed);
        self.header.ref_intent.store(0, Ordering::Relaxed);
    }

    /// Remove the object `key` now: its handles fail from here on, and its waiters are woken
    /// to find it removed.
    pub(crate) fn remove(
        &self,
        key: Key<'_>,
        me: Owner,
        live: &(impl Liveness + ?Sized),
        wake: &impl Fn(&AtomicU32),
    ) -> Result<(), TableError> {
        self.locked(me, live, wake, || match self.lookup_once(key) {
            None => Err(TableError::NotFound),
            Some(f) => {
                self.remove_found(f, wake);
                Ok(())
            }
        })?
    }

    /// Under the lock: remove the live object `f`.
    fn remove_found(&self, f: Found, wake: &impl Fn(&AtomicU32)) {
        let Some(s) = self.check(f.slot, f.gen) else { return };
        self.header.begin(f.slot, true);
        s.state.store(pack(f.gen.wrapping_add(1), DEAD), Ordering::Release);
        point(Point::Removing);
        mark_removed(s);
        wake(&s.word);
        self.header.end(-1);
    }

    /// The slot of a handle, if its object is still the live one it named.
    pub(crate) fn check(&self, slot: u32, gen: u32) -> Option<&'a Slot> {
        let s = self.slot(slot)?;
        (s.state.load(Ordering::Acquire) == pack(gen, LIVE)).then_some(s)
    }

    /// Under the lock: a slot for a new object of key `hash`, Empty or a tombstone: in the
    /// newest level, after making a new level if that one is half used; else in any level.
    fn free_slot(&self, hash: u64, live: &(impl Liveness + ?Sized)) -> Option<u32> {
        let n = self.base();
        let mut levels = self.header.levels();
        let newest = levels - 1;
        let used = |k: u32| self.header.used[k as usize].load(Ordering::Relaxed) as usize;
        if let Some((slots, _)) = self.level(newest) {
            if used(newest) + 1 > slots.len() / 2 && levels < MAX_LEVELS && self.levels.make(levels) {
                if levels == 1 {
                    self.hint_first_level();
                }
                self.header.levels.store(levels + 1, Ordering::Release);
                levels += 1;
            }
        }
        // The newest level first (where growth puts room), then the others.
        let order = std::iter::once(levels - 1).chain((0..levels - 1).rev());
        for k in order {
            let Some((slots, _)) = self.level(k) else { continue };
            let len = slots.len();
            let mut i = home(hash, len);
            for _ in 0..len {
                let phase = slots[i].state.load(Ordering::Relaxed) & PHASE;
                // A removed mutex that a thread of a living process still holds keeps its slot
                // until it lets go (`mutex.rs`, "Removal"): whatever it still writes lands there.
                let held = || match slots[i].owner.load(Ordering::Relaxed) {
                    0 | ABANDONED => false,
                    w => live.life(owner_of(w)) == Life::Alive,
                };
                if phase == EMPTY || (phase == DEAD && !held()) {
                    if phase == EMPTY {
                        self.header.used[k as usize].store(used(k) as u32 + 1, Ordering::Relaxed);
                    }
                    return Some((level_start(n, k) + i) as u32);
                }
                i = (i + 1) & (len - 1);
            }
        }
        None
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use crate::shared::lock::Life;

    struct Alive;
    impl Liveness for Alive {
        fn life(&self, _o: Owner) -> Life {
            Life::Alive
        }
    }

    const ME: Owner = Owner { slot: 0, gen: 1 };

    fn table(n: usize) -> (Header, OneLevel) {
        (Header::empty(), OneLevel::new(n))
    }

    #[test]
    fn create_open_exclusive_remove_and_reuse() {
        let (h, l) = table(8);
        let s = &l.slots;
        let t = Table::new(&h, &l, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        assert_eq!(t.create(Key::Id(7), (1, 3, 0), Open::Existing, ME, &Alive, &nowake), Err(TableError::NotFound));
        let (a, existed) = t.create(Key::Id(7), (1, 3, 0), Open::Create, ME, &Alive, &nowake).unwrap();
        assert!(!existed);
        assert_eq!(t.create(Key::Id(7), (1, 0, 0), Open::Create, ME, &Alive, &nowake), Ok((a, true)));
        assert_eq!(t.create(Key::Id(7), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake), Err(TableError::Exists));
        assert_eq!(t.create(Key::Id(7), (2, 0, 0), Open::Create, ME, &Alive, &nowake), Err(TableError::WrongKind));
        assert_eq!(t.lookup(Key::Id(7)), Some(a));
        assert!(t.check(a.slot, a.gen).is_some());
        t.remove(Key::Id(7), ME, &Alive, &nowake).unwrap();
        assert_eq!(t.lookup(Key::Id(7)), None);
        assert!(t.check(a.slot, a.gen).is_none(), "a removed object's handle fails");
        assert_eq!(s[a.slot as usize].word.load(Ordering::Relaxed), REMOVED);
        // The key again: a new object, maybe in the same slot, with a new generation.
        let (b, _) = t.create(Key::Id(7), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_ne!((b.slot, b.gen), (a.slot, a.gen));
        assert!(t.check(a.slot, a.gen).is_none());
        assert_eq!(t.remove(Key::Id(8), ME, &Alive, &nowake), Err(TableError::NotFound));
    }

    #[test]
    fn names_and_ids_are_apart_and_names_compare_whole() {
        let (h, l) = table(8);
        let t = Table::new(&h, &l, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        let (a, _) = t.create(Key::Name(b"alpha"), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(t.lookup(Key::Name(b"alpha")), Some(a));
        assert_eq!(t.lookup(Key::Name(b"alph")), None);
        assert_eq!(t.lookup(Key::Name(b"alphab")), None);
        // The id equal to the name's hash is another object.
        let h_alpha = Key::Name(b"alpha").hash();
        assert_eq!(t.lookup(Key::Id(h_alpha)), None);
        let (b, _) = t.create(Key::Id(h_alpha), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_ne!(a.slot, b.slot);
        assert_eq!(t.name_of(a.slot as usize).as_deref(), Some(&b"alpha"[..]));
        assert_eq!(t.name_of(b.slot as usize), None);
        let long = [7u8; NAME_MAX];
        let (c, _) = t.create(Key::Name(&long), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(t.lookup(Key::Name(&long)), Some(c));
        t.remove(Key::Name(b"alpha"), ME, &Alive, &nowake).unwrap();
        assert_eq!(t.lookup(Key::Name(b"alpha")), None);
        assert_eq!(t.lookup(Key::Id(h_alpha)), Some(b));
    }

    #[test]
    fn colliding_keys_probe_past_tombstones_and_the_table_fills() {
        let (h, l) = table(4);
        let t = Table::new(&h, &l, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        for k in 0..4 {
            t.create(Key::Id(k), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        }
        assert_eq!(t.create(Key::Id(9), (1, 0, 0), Open::Create, ME, &Alive, &nowake), Err(TableError::Full));
        t.remove(Key::Id(1), ME, &Alive, &nowake).unwrap();
        for k in [0, 2, 3] {
            assert!(t.lookup(Key::Id(k)).is_some(), "key {k} past a tombstone");
        }
        assert_eq!(t.lookup(Key::Id(1)), None);
        assert!(t.create(Key::Id(9), (1, 0, 0), Open::Create, ME, &Alive, &nowake).is_ok(), "a tombstone is reused");
    }

    #[test]
    fn a_dead_changers_half_creation_is_buried() {
        let (h, l) = table(4);
        let s = &l.slots;
        let t = Table::new(&h, &l, &NoLedgers);
        // A creator died after marking slot 2 Busy (one object live elsewhere).
        h.progress.store(1, Ordering::Relaxed);
        h.begin(2, false);
        s[2].state.store(pack(5, BUSY), Ordering::Relaxed);
        let woken = std::cell::Cell::new(0);
        t.recover(&|_| woken.set(woken.get() + 1));
        assert_eq!(s[2].state.load(Ordering::Relaxed), pack(6, DEAD));
        assert_eq!((h.intent(), h.live()), (None, 1));
        assert_eq!(woken.get(), 1);
        // A remover died after marking slot 1 Dead: finished, counted out.
        h.begin(1, true);
        s[1].state.store(pack(3, DEAD), Ordering::Relaxed);
        t.recover(&|_| woken.set(woken.get() + 1));
        assert_eq!((h.intent(), h.live(), woken.get()), (None, 0, 2));
        assert_eq!(s[1].word.load(Ordering::Relaxed), REMOVED);
        // A remover died before marking its slot (still Live): nothing happened.
        h.progress.store(1, Ordering::Relaxed);
        h.begin(3, true);
        s[3].state.store(pack(1, LIVE), Ordering::Relaxed);
        t.recover(&|_| woken.set(woken.get() + 1));
        assert_eq!((h.intent(), h.live(), woken.get()), (None, 1, 2));
        // A creator died before marking its slot (a tombstone): nothing happened.
        h.begin(1, false);
        t.recover(&|_| woken.set(woken.get() + 1));
        assert_eq!((h.intent(), h.live(), woken.get()), (None, 1, 2));
    }

    /// Without hints (every level looked in), with one hint for every key (all levels named),
    /// and with a few.
    #[test]
    fn the_table_grows_by_levels_and_objects_stay_put() {
        for hints in [0, 1, 8] {
            grows(hints);
        }
    }

    fn grows(hints: usize) {
        let h = Header::empty();
        let g = Growing::new(4, 4, hints);
        let t = Table::new(&h, &g, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        let mut found = Vec::new();
        for k in 0..28u64 {
            let (f, _) = t.create(Key::Id(k * 7919), (1, k as u32, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
            found.push(f);
            // Every object so far is where it was made, by its key and by its handle.
            for (j, f) in found.iter().enumerate() {
                assert_eq!(t.lookup(Key::Id(j as u64 * 7919)), Some(*f));
                assert_eq!(t.check(f.slot, f.gen).map(|s| s.word.load(Ordering::Relaxed)), Some(j as u32));
            }
        }
        assert_eq!(h.levels(), 4, "4 + 8 + 16 slots, each level grown at half");
        assert_eq!(t.capacity(), 4 + 8 + 16 + 32);
        let mut slots: Vec<u32> = found.iter().map(|f| f.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), found.len(), "one slot each");
        // Removing from an old level, looking up across levels, reusing a tombstone.
        t.remove(Key::Id(0), ME, &Alive, &nowake).unwrap();
        assert_eq!(t.lookup(Key::Id(0)), None);
        assert_eq!(t.lookup(Key::Id(27 * 7919)), Some(found[27]));
        assert_eq!(h.live(), 27);
        // Names in a later level.
        let (n, _) = t.create(Key::Name(b"late"), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(t.name_of(n.slot as usize).as_deref(), Some(&b"late"[..]));
        assert_eq!(t.lookup(Key::Name(b"late")), Some(n));
    }

    /// An operation through a handle whose object was removed, its slot then reused, changes
    /// nothing: the word's generation is checked in the compare-and-swap itself. (Raw words
    /// keep their upper half for themselves.)
    #[test]
    fn the_word_changes_only_for_its_own_generation() {
        let (h, l) = table(8);
        let t = Table::new(&h, &l, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        let (old, _) = t.create(Key::Id(3), (1, 5, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        let s = t.slot(old.slot).unwrap();
        assert_eq!(s.update_word(old.gen, Ordering::Relaxed, Ordering::Relaxed, |w| Some(w + 1)), Ok(5));
        assert_eq!(s.read_word(old.gen, Ordering::Relaxed), Some(6));
        t.remove(Key::Id(3), ME, &Alive, &nowake).unwrap();
        assert_eq!(s.update_word(old.gen, Ordering::Relaxed, Ordering::Relaxed, Some), Err(Unchanged::Gone));
        let (new, _) = t.create(Key::Id(3), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(new.slot, old.slot, "the tombstone is reused");
        let stale = s.update_word(old.gen, Ordering::Relaxed, Ordering::Relaxed, |w| Some(w + 1));
        assert_eq!(stale, Err(Unchanged::Gone));
        assert_eq!(s.read_word(old.gen, Ordering::Relaxed), None);
        assert_eq!(s.read_word(new.gen, Ordering::Relaxed), Some(0));
        let declined = s.update_word(new.gen, Ordering::Relaxed, Ordering::Relaxed, |w: u32| w.checked_sub(1));
        assert_eq!(declined, Err(Unchanged::Declined(0)));
        let (raw, _) = t.create(Key::Id(4), (KIND_WORD64, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(t.slot(raw.slot).unwrap().word_hi.load(Ordering::Relaxed), 0);
    }

    /// A stale handle of a generation-0 object does not take a raw word made in its slot for
    /// its own: the raw word's upper half is 0, and objects' words carry a tag that never is.
    #[test]
    fn a_stale_handle_does_not_take_a_raw_word_in_its_slot_for_its_object() {
        let (h, l) = table(8);
        let t = Table::new(&h, &l, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        let (old, _) = t.create(Key::Id(3), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(old.gen, 0);
        t.remove(Key::Id(3), ME, &Alive, &nowake).unwrap();
        for kind in [KIND_WORD, KIND_WORD64] {
            let (raw, _) = t.create(Key::Id(3), (kind, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
            assert_eq!(raw.slot, old.slot, "the tombstone is reused");
            let s = t.slot(raw.slot).unwrap();
            let stale = s.update_word(old.gen, Ordering::Relaxed, Ordering::Relaxed, |w| Some(w | 1));
            assert_eq!(stale, Err(Unchanged::Gone));
            assert_eq!(s.word.load(Ordering::Relaxed), 0, "the raw word is untouched");
            t.remove(Key::Id(3), ME, &Alive, &nowake).unwrap();
        }
    }

    /// A removed object whose `owner` names a holder keeps its slot until the holder lets go
    /// (a mutex's holder writes there after its check: `mutex.rs`, "Removal"); an abandoned one
    /// does not.
    #[test]
    fn a_held_removed_mutex_keeps_its_slot_until_let_go() {
        let (h, l) = table(8);
        let t = Table::new(&h, &l, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        let mutex = (3, 0, 0);
        let (a, _) = t.create(Key::Id(3), mutex, Open::CreateNew, ME, &Alive, &nowake).unwrap();
        let s = t.slot(a.slot).unwrap();
        s.owner.store(5 << 32 | 1, Ordering::Relaxed); // held by a thread of some process
        t.remove(Key::Id(3), ME, &Alive, &nowake).unwrap();
        let (b, _) = t.create(Key::Id(3), mutex, Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_ne!(b.slot, a.slot, "not reused while held");
        t.remove(Key::Id(3), ME, &Alive, &nowake).unwrap();
        s.owner.store(ABANDONED, Ordering::Relaxed);
        let (c, _) = t.create(Key::Id(3), mutex, Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(c.slot, a.slot, "reused once nobody holds it");
        assert_eq!(s.owner.load(Ordering::Relaxed), 0, "the new object is free");
        // Held by a process that died: reused too.
        s.owner.store(5 << 32 | 1, Ordering::Relaxed);
        t.remove(Key::Id(3), ME, &Alive, &nowake).unwrap();
        struct AllDead;
        impl Liveness for AllDead {
            fn life(&self, _: Owner) -> Life {
                Life::Dead
            }
        }
        let (d, _) = t.create(Key::Id(3), mutex, Open::CreateNew, ME, &AllDead, &nowake).unwrap();
        assert_eq!(d.slot, a.slot, "its holder's process is dead");
    }

    /// Once the table grew, a key's hint names the level of each of its objects (those of level
    /// 0 written when the second level was made), and a lookup looks only where it says.
    #[test]
    fn hints_name_the_levels_a_lookup_looks_in() {
        let h = Header::empty();
        let g = Growing::new(4, 4, 64);
        let t = Table::new(&h, &g, &NoLedgers);
        let nowake = |_: &AtomicU32| {};
        let hint = |k: u64| g.hints[hint_of(k, 64)].load(Ordering::Relaxed);
        let (first, _) = t.create(Key::Id(1), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        assert_eq!(hint(1), 0, "no hints while there is one level");
        let mut made = vec![(1, first)];
        for k in 2..20u64 {
            made.push((k, t.create(Key::Id(k), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap().0));
        }
        assert!(h.levels() >= 3);
        for &(k, f) in &made {
            assert_ne!(hint(k) & 1 << t.level_of(f.slot), 0, "key {k}: its level's bit");
        }
        // A key whose hint is cleared is not looked for: the lookups go by the hints.
        g.hints[hint_of(1, 64)].store(0, Ordering::Relaxed);
        assert_eq!(t.lookup(Key::Id(1)), None);
        g.hints[hint_of(1, 64)].store(1 << t.level_of(first.slot), Ordering::Relaxed);
        assert_eq!(t.lookup(Key::Id(1)), Some(first));
        // An absent key whose hint is empty costs no probe: none found, in any case.
        assert!((100..200u64).all(|k| t.lookup(Key::Id(k)).is_none()));
    }
}
