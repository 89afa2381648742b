//! The per-user shared table segment: where it lives, how it is created and opened safely, and
//! its layout. Every field is an atomic in the mapping; every index read from it is checked
//! against the layout before use (a corrupt segment gives `NotRecoverable`, never UB).
//!
//! Layout (offsets from the start; all regions page-aligned):
//!
//! | region | size | what |
//! |---|---|---|
//! | header | 1 page | magic (published last), version, the three capacities, the slot lock |
//! | filter | 4 pages | 4096 × `AtomicU32`: shared waiters per in-page byte offset |
//! | slots | `procs` × 64 B | one per live process: state, generation, pid, records used |
//! | buckets | `buckets` × 128 B | lock line (lock, dirty, pending, ringing) and queue line (head, tail, ticket, bell, sleepers) |
//! | records | `procs` × `records` × 128 B | waiter records, `records` per process slot |
//!
//! A process slot's liveness is an OFD lock on one byte of the segment file (at
//! [`LIVENESS_BASE`] + slot) that its process holds: the kernel drops it when the process dies,
//! however it dies, so the check is safe against PID reuse and PID namespaces.

use super::SharedError;
use crate::primitive::{AtomicU32, AtomicU64, Ordering};

pub(crate) const MAGIC: u64 = 0x5546_5554_5853_4831; // "UFUTXSH1"
/// Bumped whenever the layout or the protocol changes: processes of two versions never share a
/// segment (the later one gets `ENOTRECOVERABLE`), they would miss each other's waiters.
pub(crate) const VERSION: u32 = 5;
pub(crate) const PAGE: usize = 4096;
pub(crate) const FILTER_LEN: usize = 4096;
#[cfg_attr(ufutex_loom, allow(dead_code))]
const FILTER_OFF: usize = PAGE;
const SLOTS_OFF: usize = FILTER_OFF + FILTER_LEN * 4;
const SLOT_SIZE: usize = 64;
const BUCKET_SIZE: usize = 128;
const RECORD_SIZE: usize = 128;
/// Where the liveness bytes start in the segment file (far past its data).
pub(crate) const LIVENESS_BASE: i64 = 1 << 40;
/// "No record" in a link.
pub(crate) const NONE: u32 = u32::MAX;

/// Default capacities, used when this process creates the segment (the environment variables
/// `UFUTEX_SHARED_PROCS`, `UFUTEX_SHARED_WAITERS` (per process) and `UFUTEX_SHARED_BUCKETS`
/// override them; an existing segment keeps its own).
pub(crate) const DEFAULT_PROCS: u32 = 128;
pub(crate) const DEFAULT_RECORDS: u32 = 2048;
pub(crate) const DEFAULT_BUCKETS: u32 = 4096;
const MAX_PROCS: u32 = 1 << 15;
const MAX_RECORDS: u32 = 1 << 16;
const MAX_BUCKETS: u32 = 1 << 20;

/// The header page.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    pub(crate) procs: AtomicU32,
    pub(crate) records: AtomicU32,
    pub(crate) buckets: AtomicU32,
    pub(crate) len: AtomicU64,
    /// The slot lock (a [`super::lock`] word): taken to claim or reap a process slot.
    pub(crate) slot_lock: AtomicU64,
}

/// One process slot.
#[repr(C)]
pub(crate) struct Slot {
    /// 0 until first claimed, then [`SLOT_LIVE`] (whether its owner lives is the liveness
    /// lock's answer).
    pub(crate) state: AtomicU32,
    /// Bumped each time the slot is claimed: (slot, generation) names a process for the
    /// segment's lifetime.
    pub(crate) gen: AtomicU32,
    /// The pid at claim time (for people debugging; never acted on).
    pub(crate) pid: AtomicU32,
    /// How many of the slot's records were ever used (recovery scans only these).
    pub(crate) used: AtomicU32,
}

/// A slot that some process claimed (0: never claimed).
pub(crate) const SLOT_LIVE: u32 = 1;

/// One bucket: the lock line, then the queue line.
#[repr(C, align(64))]
pub(crate) struct Bucket {
    /// The bucket lock (see [`super::lock`]): 0, or the owner's (slot + 1, generation).
    pub(crate) lock: AtomicU64,
    /// Set by the lock holder before any change to the queue or to a record's queue fields,
    /// cleared after: a lock taken over from a dead owner with `dirty` set is rebuilt from the
    /// records (the records' own fields are the truth; the links are derived).
    pub(crate) dirty: AtomicU32,
    /// A record a waker marked woken and has not yet kicked: the recoverer kicks it.
    pub(crate) pending: AtomicU32,
    /// Not 0 while a waker owes a ring (threads it marked Woken that sleep on a bell, not yet
    /// woken: `park::Ring`): bit 0 for this bucket's bell, and above it 1 + the index of one
    /// other bucket whose bell requeued threads sleep on. The recoverer rings them.
    pub(crate) ringing: AtomicU32,
    pub(crate) _pad: [u8; 44],
    pub(crate) head: AtomicU32,
    pub(crate) tail: AtomicU32,
    /// FIFO order: the ticket the next queued record gets.
    pub(crate) ticket: AtomicU64,
    /// The bucket's bell: a kernel futex word (shared) that a thread waiting on one record of
    /// this bucket also sleeps on, so that a waker of many of them wakes them all in one call
    /// (`park.rs`, "The bell").
    pub(crate) bell: AtomicU32,
    /// How many threads are about to sleep or asleep on [`Bucket::bell`]: a hint, which only
    /// decides whether a ring is worth it. A thread that dies asleep leaves it one too high
    /// until a process claims its dead process's slot and reaps it (`park::forget_sleep`).
    pub(crate) sleepers: AtomicU32,
    pub(crate) _pad2: [u8; 40],
}

/// One waiter record: one queued entry of one waiting thread (a `wait` uses one, a `waitv` one
/// per shared entry), owned by a process slot.
#[repr(C, align(64))]
pub(crate) struct Record {
    /// [`REC_IDLE`], [`REC_QUEUED`] or [`REC_WOKEN`]; changed only under the lock of the
    /// bucket the record is in (Queued), by the owner when Woken or Idle.
    pub(crate) state: AtomicU32,
    /// The park word, on a thread's first record: bumped and futex-woken by a waker.
    pub(crate) park_seq: AtomicU32,
    /// Where the record is queued, in one word: its bucket, and which of `keys` is its key
    /// ([`KEY_SLOT`]). A requeue writes the new key into the other slot and then changes both
    /// with one store (`surgery::move_one`), so that a process that dies anywhere in a move
    /// leaves the record's key and bucket in agreement: before that store the record belongs
    /// where it was, after it where it goes.
    pub(crate) place: AtomicU32,
    pub(crate) prev: AtomicU32,
    pub(crate) next: AtomicU32,
    /// The record whose `park_seq` the waiting thread sleeps on (its first record).
    pub(crate) park: AtomicU32,
    /// The owner slot's generation when the record was queued.
    pub(crate) gen: AtomicU32,
    /// The filter counter this record holds one count on, | [`COUNTED`]; 0 when it holds none.
    pub(crate) counted: AtomicU32,
    /// The waitv index of this entry (returned to the waiter).
    pub(crate) index: AtomicU32,
    /// On a thread's first record: not 0 while the thread may be asleep in the kernel on
    /// `park_seq` (set before its last look at its records), so a waker calls `futex_wake`
    /// only then; `park::ON_BELL` | a bucket's index if it sleeps on that bucket's bell too
    /// (see `park.rs`).
    pub(crate) asleep: AtomicU32,
    pub(crate) mask: AtomicU64,
    pub(crate) ticket: AtomicU64,
    /// Two keys, of which `place` names the record's own (the other is scratch for a move).
    pub(crate) keys: [KeyCell; 2],
}

/// A key as a record holds it: class, device, inode (or slot generation), offset (or address).
#[repr(C)]
pub(crate) struct KeyCell {
    pub(crate) class: AtomicU32,
    pub(crate) dev: AtomicU64,
    pub(crate) ino: AtomicU64,
    pub(crate) off: AtomicU64,
}

/// The bit of [`Record::place`] that names the record's key slot; the bits below it, its bucket.
pub(crate) const KEY_SLOT: u32 = 1 << 31;

impl Record {
    /// The bucket the record is (or was last) queued in.
    #[inline]
    pub(crate) fn bucket(&self) -> u32 {
        self.place.load(Ordering::Relaxed) & !KEY_SLOT
    }

    /// The record's own key slot.
    #[inline]
    pub(crate) fn key(&self) -> &KeyCell {
        &self.keys[usize::from(self.place.load(Ordering::Relaxed) & KEY_SLOT != 0)]
    }
}

pub(crate) const REC_IDLE: u32 = 0;
pub(crate) const REC_QUEUED: u32 = 1;
pub(crate) const REC_WOKEN: u32 = 2;
pub(crate) const COUNTED: u32 = 1 << 31;

#[cfg(not(ufutex_loom))] // loom's atomics are larger
const _: () = {
    assert!(std::mem::size_of::<Header>() <= PAGE);
    assert!(std::mem::size_of::<Slot>() <= SLOT_SIZE);
    assert!(std::mem::size_of::<Bucket>() == BUCKET_SIZE);
    assert!(std::mem::size_of::<Record>() == RECORD_SIZE);
};

/// The capacities of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) procs: u32,
    /// Records per process slot.
    pub(crate) records: u32,
    /// A power of two.
    pub(crate) buckets: u32,
}

impl Layout {
    fn slots_len(&self) -> usize {
        (self.procs as usize * SLOT_SIZE).next_multiple_of(PAGE)
    }
    fn buckets_off(&self) -> usize {
        SLOTS_OFF + self.slots_len()
    }
    fn records_off(&self) -> usize {
        self.buckets_off() + self.buckets as usize * BUCKET_SIZE
    }
    /// The segment's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.records_off() + self.procs as usize * self.records as usize * RECORD_SIZE
    }
    /// Whether these capacities are within the documented bounds.
    pub(crate) fn valid(&self) -> bool {
        (1..=MAX_PROCS).contains(&self.procs)
            && (1..=MAX_RECORDS).contains(&self.records)
            && (1..=MAX_BUCKETS).contains(&self.buckets)
            && self.buckets.is_power_of_two()
    }
    /// The capacities for a new segment: defaults, or the environment's.
    #[cfg(not(ufutex_loom))]
    pub(crate) fn from_env() -> Layout {
        fn var(name: &str, default: u32) -> u32 {
            std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
        }
        Layout {
            procs: var("UFUTEX_SHARED_PROCS", DEFAULT_PROCS).clamp(1, MAX_PROCS),
            records: var("UFUTEX_SHARED_WAITERS", DEFAULT_RECORDS).clamp(1, MAX_RECORDS),
            buckets: var("UFUTEX_SHARED_BUCKETS", DEFAULT_BUCKETS).clamp(1, MAX_BUCKETS).next_power_of_two(),
        }
    }
}

/// A mapped segment. Mapped once per process and never unmapped (so that no lock word in it
/// can ever be freed under a thread, and the mapping survives fork).
#[cfg(not(ufutex_loom))]
pub(crate) struct Segment {
    pub(crate) base: *mut u8,
    pub(crate) layout: Layout,
}

/// Under loom: the same regions, built of loom's atomics on the heap (a model of the segment
/// that model threads stand for processes on).
#[cfg(ufutex_loom)]
pub(crate) struct Segment {
    filter: Box<[AtomicU32]>,
    slots: Box<[Slot]>,
    buckets: Box<[Bucket]>,
    records: Box<[Record]>,
    pub(crate) layout: Layout,
}

#[cfg(not(ufutex_loom))]
// SAFETY: the mapping is shared memory accessed only through atomics; the raw pointer is never
// freed (the mapping lives as long as the process), so sharing it between threads is sound.
unsafe impl Sync for Segment {}
#[cfg(not(ufutex_loom))]
// SAFETY: as above.
unsafe impl Send for Segment {}

#[cfg(ufutex_loom)]
impl Segment {
    /// A fresh model segment.
    pub(crate) fn model(layout: Layout) -> Segment {
        let n = |k: u32| 0..k as usize;
        Segment {
            filter: n(FILTER_LEN as u32).map(|_| AtomicU32::new(0)).collect(),
            slots: n(layout.procs)
                .map(|_| Slot {
                    state: AtomicU32::new(0),
                    gen: AtomicU32::new(0),
                    pid: AtomicU32::new(0),
                    used: AtomicU32::new(0),
                })
                .collect(),
            buckets: n(layout.buckets)
                .map(|_| Bucket {
                    lock: AtomicU64::new(0),
                    dirty: AtomicU32::new(0),
                    pending: AtomicU32::new(NONE),
                    ringing: AtomicU32::new(0),
                    _pad: [0; 44],
                    head: AtomicU32::new(NONE),
                    tail: AtomicU32::new(NONE),
                    ticket: AtomicU64::new(0),
                    bell: AtomicU32::new(0),
                    sleepers: AtomicU32::new(0),
                    _pad2: [0; 40],
                })
                .collect(),
            records: n(layout.procs * layout.records)
                .map(|_| Record {
                    state: AtomicU32::new(0),
                    park_seq: AtomicU32::new(0),
                    place: AtomicU32::new(0),
                    prev: AtomicU32::new(0),
                    next: AtomicU32::new(0),
                    park: AtomicU32::new(0),
                    gen: AtomicU32::new(0),
                    counted: AtomicU32::new(0),
                    index: AtomicU32::new(0),
                    asleep: AtomicU32::new(0),
                    mask: AtomicU64::new(0),
                    ticket: AtomicU64::new(0),
                    keys: [0, 1].map(|_| KeyCell {
                        class: AtomicU32::new(0),
                        dev: AtomicU64::new(0),
                        ino: AtomicU64::new(0),
                        off: AtomicU64::new(0),
                    }),
                })
                .collect(),
            layout,
        }
    }
}

impl Segment {
    #[cfg(not(ufutex_loom))]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the header is at the start of a mapping at least one page long, page-aligned,
        // and made of atomics (any bit pattern is valid).
        unsafe { &*(self.base as *const Header) }
    }

    /// The filter counter for in-page byte offset `off` (masked to the page).
    #[inline]
    pub(crate) fn filter(&self, off: usize) -> &AtomicU32 {
        #[cfg(ufutex_loom)]
        return &self.filter[off & (FILTER_LEN - 1)];
        // SAFETY: `off & 4095` < FILTER_LEN; the filter region is FILTER_LEN aligned u32 atomics.
        #[cfg(not(ufutex_loom))]
        unsafe {
            &*(self.base.add(FILTER_OFF) as *const AtomicU32).add(off & (FILTER_LEN - 1))
        }
    }

    /// Slot `i`, or `NotRecoverable` if out of range.
    pub(crate) fn slot(&self, i: u32) -> Result<&Slot, SharedError> {
        if i >= self.layout.procs {
            return Err(SharedError::NotRecoverable);
        }
        #[cfg(ufutex_loom)]
        return Ok(&self.slots[i as usize]);
        // SAFETY: `i` < procs; the slots region holds `procs` slots of SLOT_SIZE bytes, aligned.
        #[cfg(not(ufutex_loom))]
        Ok(unsafe { &*(self.base.add(SLOTS_OFF + i as usize * SLOT_SIZE) as *const Slot) })
    }

    /// Bucket `i`, or `NotRecoverable` if out of range.
    pub(crate) fn bucket(&self, i: u32) -> Result<&Bucket, SharedError> {
        if i >= self.layout.buckets {
            return Err(SharedError::NotRecoverable);
        }
        #[cfg(ufutex_loom)]
        return Ok(&self.buckets[i as usize]);
        // SAFETY: `i` < buckets; the region holds `buckets` buckets of BUCKET_SIZE, 64-aligned
        // (page-aligned region start).
        #[cfg(not(ufutex_loom))]
        Ok(unsafe { &*(self.base.add(self.layout.buckets_off() + i as usize * BUCKET_SIZE) as *const Bucket) })
    }

    /// How many records the segment has.
    pub(crate) fn records(&self) -> u32 {
        self.layout.procs * self.layout.records
    }

    /// Record `i`, or `NotRecoverable` if out of range.
    pub(crate) fn record(&self, i: u32) -> Result<&Record, SharedError> {
        if i >= self.records() {
            return Err(SharedError::NotRecoverable);
        }
        #[cfg(ufutex_loom)]
        return Ok(&self.records[i as usize]);
        // SAFETY: `i` < procs × records; the region holds that many records of RECORD_SIZE,
        // page-aligned start.
        #[cfg(not(ufutex_loom))]
        Ok(unsafe { &*(self.base.add(self.layout.records_off() + i as usize * RECORD_SIZE) as *const Record) })
    }

    /// The slot that owns record `i`.
    pub(crate) fn owner_of(&self, i: u32) -> u32 {
        i / self.layout.records
    }
}

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn layout_regions_do_not_overlap() {
        let l = Layout { procs: 3, records: 5, buckets: 8 };
        assert!(l.valid());
        assert_eq!(l.buckets_off() % PAGE, 0);
        assert!(l.buckets_off() >= SLOTS_OFF + 3 * SLOT_SIZE);
        assert_eq!(l.records_off(), l.buckets_off() + 8 * BUCKET_SIZE);
        assert_eq!(l.len(), l.records_off() + 15 * RECORD_SIZE);
        assert!(!Layout { procs: 3, records: 5, buckets: 6 }.valid());
        assert!(!Layout { procs: 0, records: 5, buckets: 8 }.valid());
    }
}
