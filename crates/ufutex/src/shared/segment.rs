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
//! | buckets | `buckets` × 128 B | lock line (lock, dirty, pending) and queue line (head, tail, ticket) |
//! | records | `procs` × `records` × 128 B | waiter records, `records` per process slot |
//!
//! A process slot's liveness is an OFD lock on one byte of the segment file (at
//! [`LIVENESS_BASE`] + slot) that its process holds: the kernel drops it when the process dies,
//! however it dies, so the check is safe against PID reuse and PID namespaces.

use super::SharedError;
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub(crate) const MAGIC: u64 = 0x5546_5554_5853_4831; // "UFUTXSH1"
pub(crate) const VERSION: u32 = 1;
const PAGE: usize = 4096;
pub(crate) const FILTER_LEN: usize = 4096;
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
    _pad: [u8; 48],
    pub(crate) head: AtomicU32,
    pub(crate) tail: AtomicU32,
    /// FIFO order: the ticket the next queued record gets.
    pub(crate) ticket: AtomicU64,
    _pad2: [u8; 48],
}

/// One waiter record: one queued entry of one waiting thread (a `wait` uses one, a `waitv` one
/// per shared entry), owned by a process slot.
#[repr(C, align(64))]
pub(crate) struct Record {
    /// [`REC_IDLE`], [`REC_QUEUED`] or [`REC_WOKEN`]; changed only under the lock of the
    /// bucket named by `bucket` (Queued), by the owner when Woken or Idle.
    pub(crate) state: AtomicU32,
    /// The park word, on a thread's first record: bumped and futex-woken by a waker.
    pub(crate) park_seq: AtomicU32,
    /// The bucket the record is queued in.
    pub(crate) bucket: AtomicU32,
    pub(crate) prev: AtomicU32,
    pub(crate) next: AtomicU32,
    /// The record whose `park_seq` the waiting thread sleeps on (its first record).
    pub(crate) park: AtomicU32,
    /// The owner slot's generation when the record was queued.
    pub(crate) gen: AtomicU32,
    /// The filter counter this record holds one count on, | [`COUNTED`]; 0 when it holds none.
    pub(crate) counted: AtomicU32,
    /// The key: class, device, inode (or slot generation), offset (or address).
    pub(crate) class: AtomicU32,
    /// The waitv index of this entry (returned to the waiter).
    pub(crate) index: AtomicU32,
    pub(crate) dev: AtomicU64,
    pub(crate) ino: AtomicU64,
    pub(crate) off: AtomicU64,
    pub(crate) mask: AtomicU64,
    pub(crate) ticket: AtomicU64,
}

pub(crate) const REC_IDLE: u32 = 0;
pub(crate) const REC_QUEUED: u32 = 1;
pub(crate) const REC_WOKEN: u32 = 2;
pub(crate) const COUNTED: u32 = 1 << 31;

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
    fn valid(&self) -> bool {
        (1..=MAX_PROCS).contains(&self.procs)
            && (1..=MAX_RECORDS).contains(&self.records)
            && (1..=MAX_BUCKETS).contains(&self.buckets)
            && self.buckets.is_power_of_two()
    }
    /// The capacities for a new segment: defaults, or the environment's.
    fn from_env() -> Layout {
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
pub(crate) struct Segment {
    base: *mut u8,
    pub(crate) layout: Layout,
}

// SAFETY: the mapping is shared memory accessed only through atomics; the raw pointer is never
// freed (the mapping lives as long as the process), so sharing it between threads is sound.
unsafe impl Sync for Segment {}
// SAFETY: as above.
unsafe impl Send for Segment {}

impl Segment {
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the header is at the start of a mapping at least one page long, page-aligned,
        // and made of atomics (any bit pattern is valid).
        unsafe { &*(self.base as *const Header) }
    }

    /// The filter counter for in-page byte offset `off` (masked to the page).
    #[inline]
    pub(crate) fn filter(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off & 4095` < FILTER_LEN; the filter region is FILTER_LEN aligned u32 atomics.
        unsafe { &*(self.base.add(FILTER_OFF) as *const AtomicU32).add(off & (FILTER_LEN - 1)) }
    }

    /// Slot `i`, or `NotRecoverable` if out of range.
    pub(crate) fn slot(&self, i: u32) -> Result<&Slot, SharedError> {
        if i >= self.layout.procs {
            return Err(SharedError::NotRecoverable);
        }
        // SAFETY: `i` < procs; the slots region holds `procs` slots of SLOT_SIZE bytes, aligned.
        Ok(unsafe { &*(self.base.add(SLOTS_OFF + i as usize * SLOT_SIZE) as *const Slot) })
    }

    /// Bucket `i`, or `NotRecoverable` if out of range.
    pub(crate) fn bucket(&self, i: u32) -> Result<&Bucket, SharedError> {
        if i >= self.layout.buckets {
            return Err(SharedError::NotRecoverable);
        }
        // SAFETY: `i` < buckets; the region holds `buckets` buckets of BUCKET_SIZE, 64-aligned
        // (page-aligned region start).
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
        // SAFETY: `i` < procs × records; the region holds that many records of RECORD_SIZE,
        // page-aligned start.
        Ok(unsafe { &*(self.base.add(self.layout.records_off() + i as usize * RECORD_SIZE) as *const Record) })
    }

    /// The slot that owns record `i`.
    pub(crate) fn owner_of(&self, i: u32) -> u32 {
        i / self.layout.records
    }

    /// Open (or create) the user's segment and map it.
    pub(crate) fn open() -> Result<Segment, SharedError> {
        let path = segment_path()?;
        let cpath = CString::new(path.clone()).map_err(|_| SharedError::Invalid)?;
        let flags = libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `cpath` is a NUL-terminated string that outlives the call.
        let mut fd = unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CREAT | libc::O_EXCL, 0o600) };
        if fd < 0 && errno() == libc::EEXIST {
            // SAFETY: as above.
            fd = unsafe { libc::open(cpath.as_ptr(), flags) };
        }
        if fd < 0 {
            return Err(open_error(errno()));
        }
        let r = Segment::map(fd);
        // The mapping outlives the descriptor (each process opens its own for its liveness
        // lock: `process.rs`).
        // SAFETY: `fd` is ours and open.
        unsafe { libc::close(fd) };
        r
    }

    /// Check ownership, initialise under an exclusive `flock` if nobody has, map.
    fn map(fd: libc::c_int) -> Result<Segment, SharedError> {
        check_owner(fd)?;
        // SAFETY: `fd` is open; flock has no memory arguments.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(SharedError::from_errno(errno()));
        }
        let r = Segment::map_locked(fd);
        // SAFETY: as above.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        r
    }

    fn map_locked(fd: libc::c_int) -> Result<Segment, SharedError> {
        let mut size = file_size(fd)?;
        if size >= PAGE && !Segment::published(fd)? {
            // Its creator died before publishing it (creators hold the flock we now hold until
            // they have): start again from nothing.
            // SAFETY: `fd` is open for writing; ftruncate has no memory arguments.
            if unsafe { libc::ftruncate(fd, 0) } != 0 {
                return Err(SharedError::from_errno(errno()));
            }
            size = 0;
        }
        if size == 0 {
            // A new segment: make it ours.
            let layout = Layout::from_env();
            // SAFETY: `fd` is open for writing; ftruncate has no memory arguments.
            if unsafe { libc::ftruncate(fd, layout.len() as libc::off_t) } != 0 {
                return Err(SharedError::from_errno(errno()));
            }
            let seg = Segment::mmap(fd, layout)?;
            for b in 0..layout.buckets {
                let b = seg.bucket(b)?;
                b.head.store(NONE, Ordering::Relaxed);
                b.tail.store(NONE, Ordering::Relaxed);
                b.pending.store(NONE, Ordering::Relaxed);
            }
            let h = seg.header();
            h.version.store(VERSION, Ordering::Relaxed);
            h.procs.store(layout.procs, Ordering::Relaxed);
            h.records.store(layout.records, Ordering::Relaxed);
            h.buckets.store(layout.buckets, Ordering::Relaxed);
            h.len.store(layout.len() as u64, Ordering::Relaxed);
            // Release: a process that sees the magic sees the fields (the flock also orders it).
            h.magic.store(MAGIC, Ordering::Release);
            return Ok(seg);
        }
        // An existing segment: its header must describe exactly this file. Read it through a
        // one-page mapping first, so that a corrupt header never sizes a mapping.
        if size < PAGE {
            return Err(SharedError::NotRecoverable);
        }
        let probe = Segment::mmap(fd, Layout { procs: 0, records: 0, buckets: 0 })?;
        let h = probe.header();
        let layout = Layout {
            procs: h.procs.load(Ordering::Relaxed),
            records: h.records.load(Ordering::Relaxed),
            buckets: h.buckets.load(Ordering::Relaxed),
        };
        let ok = h.magic.load(Ordering::Acquire) == MAGIC
            && h.version.load(Ordering::Relaxed) == VERSION
            && layout.valid()
            && h.len.load(Ordering::Relaxed) == layout.len() as u64
            && size == layout.len();
        probe.unmap();
        if !ok {
            return Err(SharedError::NotRecoverable);
        }
        Segment::mmap(fd, layout)
    }

    /// Whether the segment's magic was ever published.
    fn published(fd: libc::c_int) -> Result<bool, SharedError> {
        let probe = Segment::mmap(fd, Layout { procs: 0, records: 0, buckets: 0 })?;
        let yes = probe.header().magic.load(Ordering::Acquire) != 0;
        probe.unmap();
        Ok(yes)
    }

    /// Map `layout.len()` bytes of `fd` (one page for an all-zero layout: the header probe).
    fn mmap(fd: libc::c_int, layout: Layout) -> Result<Segment, SharedError> {
        let len = if layout.procs == 0 { PAGE } else { layout.len() };
        // SAFETY: a fresh shared mapping of an open file; no existing memory is affected.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(match errno() {
                libc::ENOMEM => SharedError::NoMemory,
                _ => SharedError::Fault,
            });
        }
        Ok(Segment { base: p as *mut u8, layout })
    }

    /// Unmap a header probe (never a segment in use).
    fn unmap(self) {
        // SAFETY: `base` is a one-page mapping made by `mmap` above that nothing else refers to.
        unsafe { libc::munmap(self.base as *mut libc::c_void, PAGE) };
    }
}

/// Where the user's segment lives: `$UFUTEX_SHARED_DIR/table` if set (tests, deployments that
/// choose), else `$XDG_RUNTIME_DIR/ufutex-table`, else `/dev/shm/ufutex-<uid>/table` (the
/// directory created 0700 and checked like the file).
pub(crate) fn segment_path() -> Result<String, SharedError> {
    if let Some(d) = std::env::var_os("UFUTEX_SHARED_DIR").filter(|d| !d.is_empty()) {
        return Ok(format!("{}/table", d.to_string_lossy()));
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(format!("{}/ufutex-table", d.to_string_lossy()));
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = format!("/dev/shm/ufutex-{uid}");
    let cdir = CString::new(dir.clone()).map_err(|_| SharedError::Invalid)?;
    // SAFETY: `cdir` is NUL-terminated and outlives the call.
    if unsafe { libc::mkdir(cdir.as_ptr(), 0o700) } != 0 && errno() != libc::EEXIST {
        return Err(open_error(errno()));
    }
    // SAFETY: an all-zero stat is a valid out-buffer; `cdir` outlives the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above; lstat does not follow a symlink planted in /dev/shm.
    if unsafe { libc::lstat(cdir.as_ptr(), &mut st) } != 0 {
        return Err(open_error(errno()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != uid || st.st_mode & 0o077 != 0 {
        return Err(SharedError::Access);
    }
    Ok(format!("{dir}/table"))
}

/// The file must be a regular file owned by us with no group/other permission bits.
fn check_owner(fd: libc::c_int) -> Result<(), SharedError> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is a valid out-buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(SharedError::from_errno(errno()));
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != uid || st.st_mode & 0o077 != 0 {
        return Err(SharedError::Access);
    }
    Ok(())
}

fn file_size(fd: libc::c_int) -> Result<usize, SharedError> {
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is a valid out-buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(SharedError::from_errno(errno()));
    }
    Ok(st.st_size as usize)
}

/// An errno from opening the segment or its directory.
fn open_error(e: i32) -> SharedError {
    match e {
        // A symlink where the segment should be (O_NOFOLLOW), or no permission.
        libc::ELOOP | libc::EACCES | libc::EPERM => SharedError::Access,
        libc::ENOMEM | libc::ENOSPC => SharedError::NoMemory,
        _ => SharedError::Fault,
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
