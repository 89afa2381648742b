//! Mappings whose identity is known without asking the kernel: the library's own, which it
//! never unmaps (a namespace's file and its levels, `named`), and the user's, registered with
//! the promise that they stay mapped until unregistered ([`super::register_mapping`]).
//!
//! `identity.rs` asks afresh for every operation because an address can be unmapped and
//! something else mapped there, and nothing would say so. A mapping that is promised to stay
//! cannot be. Its identity is asked once, when it is noted, through the same query and rule as
//! every other word's (`identity::query`, `identity::classify`), so a word's key is the same
//! whether it is found here or asked of the kernel — in this process or in another that maps
//! the same object without noting it. (The library's own files on tmpfs are not asked: their
//! `fstat` gives that same key, `identity::file_key`.) The saving is the query of every shared
//! operation that queues or dequeues on such a word: 1–10 µs here (BENCHMARKS.md).
//!
//! Each entry is a seqlock: a reader reads its sequence (even: stable), the fields, and the
//! sequence again, and retries on a change; it writes nothing shared. Writers (note, forget)
//! take a lock, which a forked child takes over from a writer of the parent's that it does not
//! have (`once.rs`). Such a writer may have left an entry half written (its sequence odd): the
//! child's readers skip that entry once they see the lock held by another process (the word
//! is then asked of the kernel), and the child's first writer clears it. A mapping that cannot
//! be noted (the list is full, the query fails, it is not a shared object's) is asked of the
//! kernel each time, which is always correct.

use super::identity::{Class, SharedKey};
use crate::primitive::{fence, spin_hint, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(ufutex_loom))]
use {super::identity, super::SharedError, crate::once::SetupLock};

/// Mappings at most: a namespace takes one, and one per level it grew (at most 16).
#[cfg(not(ufutex_loom))]
pub(super) const CAPACITY: usize = 256;

/// One mapping: the bytes `[start, start + len)` are the object `(class, dev, ino)` from byte
/// `off` on; `len` 0 is a free entry.
struct Known {
    /// Odd while a writer changes the entry.
    seq: AtomicU32,
    start: AtomicUsize,
    len: AtomicUsize,
    class: AtomicU32,
    dev: AtomicU64,
    ino: AtomicU64,
    off: AtomicU64,
}

/// The list and its guards, together and page-aligned: a process's first note takes the lock (a
/// write), reads the first entry and then writes it, all on one page, which the lock's write
/// maps writable at once. As three statics the entry's page was mapped for the read (the
/// shared zero page) and again for the write: two more page faults in a new process's first
/// `Namespace::open` (BENCHMARKS.md, eighty-first session).
#[cfg(not(ufutex_loom))]
#[repr(C, align(4096))]
struct Noted {
    /// Writers, one at a time.
    writer: SetupLock,
    /// Entries ever used (`list[..used]`); entries below may be free again.
    used: AtomicUsize,
    list: [Known; CAPACITY],
}

#[cfg(not(ufutex_loom))]
static NOTED: Noted =
    Noted { writer: SetupLock::new(), used: AtomicUsize::new(0), list: [const { Known::new() }; CAPACITY] };

impl Known {
    crate::primitive::const_unless_loom! {
        /// A free entry.
        fn new() -> Known {
            Known {
                seq: AtomicU32::new(0),
                start: AtomicUsize::new(0),
                len: AtomicUsize::new(0),
                class: AtomicU32::new(0),
                dev: AtomicU64::new(0),
                ino: AtomicU64::new(0),
                off: AtomicU64::new(0),
            }
        }
    }

    /// Change the entry (the writer's mutex held): readers retry across it.
    fn write(&self, start: usize, len: usize, key: Option<&SharedKey>) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release); // the odd sequence before any field
        self.start.store(start, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        if let Some(k) = key {
            self.class.store(k.class as u32, Ordering::Relaxed);
            self.dev.store(k.dev, Ordering::Relaxed);
            self.ino.store(k.ino, Ordering::Relaxed);
            self.off.store(k.off, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release); // every field before the even one
    }

    /// The key of `addr` if this entry covers it, read consistently; `None` also if the entry
    /// stays mid-change and `torn()` says its writer is gone (a forked child's copy of a
    /// writer of the parent's).
    fn key_of(&self, addr: usize, torn: impl Fn() -> bool) -> Option<SharedKey> {
        let mut spins = 0u32;
        loop {
            let s = self.seq.load(Ordering::Acquire);
            let at = addr.wrapping_sub(self.start.load(Ordering::Relaxed));
            let covers = at < self.len.load(Ordering::Relaxed);
            let key = SharedKey {
                class: if self.class.load(Ordering::Relaxed) == Class::SysV as u32 {
                    Class::SysV
                } else {
                    Class::Object
                },
                dev: self.dev.load(Ordering::Relaxed),
                ino: self.ino.load(Ordering::Relaxed),
                off: self.off.load(Ordering::Relaxed).wrapping_add(at as u64),
            };
            fence(Ordering::Acquire); // the fields before the second look at the sequence
            if s & 1 == 0 && self.seq.load(Ordering::Relaxed) == s {
                return covers.then_some(key);
            }
            spins += 1;
            if spins.is_multiple_of(TORN_CHECK) && torn() {
                return None;
            }
            spin_hint();
        }
    }

    /// Under the writers' lock: an entry that a writer gone with the fork left mid-change (its
    /// sequence odd; writers being one at a time, no live one is writing) is freed, its
    /// sequence even again.
    #[cfg(not(ufutex_loom))]
    fn mend(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 != 0 {
            self.start.store(0, Ordering::Relaxed);
            self.len.store(0, Ordering::Relaxed);
            self.seq.store(s.wrapping_add(1), Ordering::Release); // the fields before the even one
        }
    }
}

/// How many retries a reader makes on an entry mid-change before it asks whether the writer is
/// gone (a writer's change is a few stores).
const TORN_CHECK: u32 = 1024;

/// Under the writers' lock: the entries in use, every one whole ([`Known::mend`]), and so is
/// the next one (a writer may have been writing it when it was gone, before it counted it in).
#[cfg(not(ufutex_loom))]
fn mended() -> &'static [Known] {
    let used = NOTED.used.load(Ordering::Relaxed).min(CAPACITY);
    NOTED.list[..(used + 1).min(CAPACITY)].iter().for_each(Known::mend);
    &NOTED.list[..used]
}

#[cfg(not(ufutex_loom))]
/// Note the mapping `[start, start + len)`, which stays mapped to the same object until
/// [`forget`] (the library's own: for good). Its identity is asked of the kernel now:
/// `Fault` if nothing is mapped at `start`; `Invalid` if the range is not one shared object's
/// single mapping (private memory, or more than one mapping) or overlaps a noted one;
/// `NoMemory` if the list is full.
pub(crate) fn note(start: usize, len: usize) -> Result<(), SharedError> {
    let end = start.checked_add(len).filter(|_| len > 0).ok_or(SharedError::Invalid)?;
    insert(start, end, ask(start, end)?)
}

#[cfg(not(ufutex_loom))]
/// [`note`] for a mapping the library made itself and never unmaps: `len` bytes of the file
/// `fd` from byte `off`, `MAP_SHARED`, at `start`. On tmpfs (where the library keeps its
/// files) the key comes from the file (`identity::file_key`), the same key the kernel's query
/// gives, without the query: opening `/proc/self/maps` alone was ~10 µs of a new process's
/// first `Namespace::open` (BENCHMARKS.md, eightieth session). Elsewhere it is asked. `st`:
/// the file's status, if the caller has it.
pub(crate) fn note_file(
    start: usize,
    len: usize,
    fd: libc::c_int,
    st: Option<&libc::stat>,
    off: u64,
) -> Result<(), SharedError> {
    let end = start.checked_add(len).filter(|_| len > 0).ok_or(SharedError::Invalid)?;
    let key = match identity::file_key(fd, st, off) {
        Some(key) => key,
        None => ask(start, end)?,
    };
    insert(start, end, key)
}

#[cfg(not(ufutex_loom))]
/// Enter `[start, end)` with its key: `Invalid` if it overlaps a noted mapping, `NoMemory` if
/// the list is full.
fn insert(start: usize, end: usize, key: SharedKey) -> Result<(), SharedError> {
    let len = end - start;
    let _w = NOTED.writer.lock();
    let list = mended();
    let used = list.len();
    if list.iter().any(|k| {
        let (s, n) = (k.start.load(Ordering::Relaxed), k.len.load(Ordering::Relaxed));
        n > 0 && s < end && start < s + n
    }) {
        return Err(SharedError::Invalid);
    }
    let (i, fresh) = match list.iter().position(|k| k.len.load(Ordering::Relaxed) == 0) {
        Some(i) => (i, false),
        None if used < CAPACITY => (used, true),
        None => return Err(SharedError::NoMemory),
    };
    NOTED.list[i].write(start, len, Some(&key));
    if fresh {
        // Release: a reader that counts the entry sees it written.
        NOTED.used.store(used + 1, Ordering::Release);
    }
    Ok(())
}

#[cfg(not(ufutex_loom))]
/// Forget the noted mapping that starts at `start`: `Invalid` if there is none.
pub(crate) fn forget(start: usize) -> Result<(), SharedError> {
    let _w = NOTED.writer.lock();
    let k = mended()
        .iter()
        .find(|k| k.len.load(Ordering::Relaxed) > 0 && k.start.load(Ordering::Relaxed) == start)
        .ok_or(SharedError::Invalid)?;
    k.write(0, 0, None);
    Ok(())
}

#[cfg(not(ufutex_loom))]
/// The key of the byte at `start`, asked of the kernel, if `[start, end)` is one mapping of a
/// shared object.
fn ask(start: usize, end: usize) -> Result<SharedKey, SharedError> {
    // SAFETY: a NUL-terminated literal path.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(SharedError::from_errno(super::segment::errno()));
    }
    // (The process slot is only used for private memory, which is refused below.)
    let key = identity::query(fd, start).and_then(|vma| {
        let key = identity::classify(start, &vma, (0, 0))?;
        let one = end as u64 <= vma.end && key.class != Class::Local;
        if one {
            Ok(key)
        } else {
            Err(SharedError::Invalid)
        }
    });
    // SAFETY: `fd` is ours, closed once.
    unsafe { libc::close(fd) };
    key
}

#[cfg(not(ufutex_loom))]
/// The key of the word at `addr` if it lies in a noted mapping.
#[inline]
pub(crate) fn key_of(addr: usize) -> Option<SharedKey> {
    let used = NOTED.used.load(Ordering::Acquire);
    NOTED.list[..used.min(CAPACITY)].iter().find_map(|k| k.key_of(addr, || NOTED.writer.held_elsewhere()))
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;
    use crate::shared;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    /// An entry that a writer gone with a fork left mid-change: a reader gives up on it once
    /// told the writer is gone (and not before), and the next writer frees it, whole again.
    #[test]
    fn an_entry_left_mid_change_is_skipped_then_mended() {
        let key = SharedKey { class: Class::Object, dev: 7, ino: 9, off: 0 };
        let k = Known::new();
        k.write(0x1000, 0x1000, Some(&key));
        k.seq.fetch_add(1, Ordering::Relaxed); // the gone writer's first store
        let asked = AtomicU32::new(0);
        assert_eq!(k.key_of(0x1008, || asked.fetch_add(1, Ordering::Relaxed) + 1 >= 3), None);
        assert_eq!(asked.load(Ordering::Relaxed), 3, "asked after every {TORN_CHECK} retries until gone");
        k.mend();
        assert_eq!(k.seq.load(Ordering::Relaxed) & 1, 0, "whole again");
        assert_eq!(k.key_of(0x1008, || panic!("whole: nothing to ask")), None, "freed");
        k.write(0x1000, 0x1000, Some(&key));
        assert_eq!(k.key_of(0x1008, || panic!("whole")), Some(SharedKey { off: 8, ..key }));
    }

    /// Two mappings of one fresh memfd, the first noted (and so never unmapped, as `note`
    /// asks), the second not: (noted, plain).
    fn two_views() -> (usize, usize) {
        // SAFETY: a NUL-terminated literal name; `fd` is fresh and ours; the mappings are
        // fresh, at addresses the kernel chooses.
        unsafe {
            let fd = libc::memfd_create(c"ufx-known".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, 8192), 0);
            let map = || {
                let rw = libc::PROT_READ | libc::PROT_WRITE;
                let p = libc::mmap(std::ptr::null_mut(), 8192, rw, libc::MAP_SHARED, fd, 0);
                assert_ne!(p, libc::MAP_FAILED);
                p as usize
            };
            let (noted, plain) = (map(), map());
            libc::close(fd);
            note(noted, 8192).unwrap();
            (noted, plain)
        }
    }

    #[test]
    fn a_noted_mapping_gives_the_key_the_kernel_gives() {
        let (noted, plain) = two_views();
        for at in [0, 64, 4096 + 128] {
            let known = key_of(noted + at).expect("noted");
            assert_eq!(Ok(known), ask(plain + at, plain + at + 4), "offset {at}");
            assert_eq!(Ok(known), ask(noted + at, noted + at + 4), "offset {at}");
        }
        assert_eq!(key_of(plain + 64), None, "not noted");
        // Past the end: not this object (another test's noted mapping may sit right there).
        let ours = key_of(noted).expect("noted");
        assert!(key_of(noted + 8192).is_none_or(|k| (k.dev, k.ino) != (ours.dev, ours.ino)), "past the end");
        let heap = Box::new(0u32);
        assert_eq!(key_of(&*heap as *const u32 as usize), None);
    }

    /// A file's key read from the file (tmpfs: a memfd, and a file in /dev/shm where there is
    /// one) is the key the kernel's query gives for a mapping of it, at any offset, whether the
    /// caller's `fstat` is given or not; a file elsewhere is not read (`None`) unless it is on
    /// tmpfs too.
    #[test]
    fn a_tmpfs_files_key_is_the_kernels() {
        let check = |fd: libc::c_int| {
            // SAFETY: `fd` is open and 3 pages long; the mapping is fresh, unmapped below.
            unsafe {
                assert_eq!(libc::ftruncate(fd, 3 * 4096), 0);
                let rw = libc::PROT_READ | libc::PROT_WRITE;
                let p = libc::mmap(std::ptr::null_mut(), 8192, rw, libc::MAP_SHARED, fd, 4096);
                assert_ne!(p, libc::MAP_FAILED);
                let p = p as usize;
                let read = identity::file_key(fd, None, 4096).expect("tmpfs: read from the file");
                let mut st: libc::stat = std::mem::zeroed();
                assert_eq!(libc::fstat(fd, &mut st), 0);
                assert_eq!(identity::file_key(fd, Some(&st), 4096), Some(read), "the caller's fstat, the same key");
                for at in [0, 64, 4096 + 8] {
                    let asked = ask(p + at, p + at + 4).unwrap();
                    assert_eq!(SharedKey { off: read.off + at as u64, ..read }, asked, "offset {at}");
                }
                libc::munmap(p as *mut libc::c_void, 8192);
                libc::close(fd);
            }
        };
        // SAFETY: a NUL-terminated literal name.
        let fd = unsafe { libc::memfd_create(c"ufx-known-file".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        check(fd);
        let path = format!("/dev/shm/ufx-known-{}\0", std::process::id());
        // SAFETY: a NUL-terminated path; the file is ours, unlinked at once (the fd keeps it).
        let fd = unsafe {
            let fd =
                libc::open(path.as_ptr().cast(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o600);
            if fd >= 0 {
                libc::unlink(path.as_ptr().cast());
            }
            fd
        };
        if fd >= 0 {
            check(fd);
        }
        // A regular file beside the crate: on a disk filesystem, or on tmpfs too.
        let path = format!("{}/ufx-known-{}\0", env!("CARGO_MANIFEST_DIR"), std::process::id());
        // SAFETY: as above.
        unsafe {
            let fd =
                libc::open(path.as_ptr().cast(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o600);
            assert!(fd >= 0);
            libc::unlink(path.as_ptr().cast());
            let mut fs: libc::statfs = std::mem::zeroed();
            assert_eq!(libc::fstatfs(fd, &mut fs), 0);
            let tmpfs = fs.f_type as libc::c_long == identity::TMPFS_MAGIC;
            assert_eq!(identity::file_key(fd, None, 0).is_some(), tmpfs, "read only on tmpfs");
            if tmpfs {
                check(fd);
            } else {
                libc::close(fd);
            }
        }
    }

    #[test]
    fn what_cannot_be_noted_and_forgetting() {
        let (noted, plain) = two_views();
        assert_eq!(note(noted + 4096, 4096), Err(SharedError::Invalid), "overlaps");
        assert_eq!(note(plain, 0), Err(SharedError::Invalid), "empty");
        assert_eq!(note(plain, 3 * 4096), Err(SharedError::Invalid), "past its mapping");
        let heap = vec![0u8; 8192];
        assert_eq!(note(heap.as_ptr() as usize, 64), Err(SharedError::Invalid), "private memory");
        // Page 0, below `vm.mmap_min_addr`: never mapped. (A page unmapped here could at once
        // be mapped again by another test's thread.)
        assert_eq!(note(0, 4096), Err(SharedError::Fault));
        assert_eq!(forget(plain), Err(SharedError::Invalid), "never noted");
        note(plain + 4096, 4096).unwrap();
        assert!(key_of(plain + 4096 + 8).is_some());
        forget(plain + 4096).unwrap();
        assert_eq!(key_of(plain + 4096 + 8), None);
        assert_eq!(forget(plain + 4096), Err(SharedError::Invalid), "forgotten already");
        assert!(key_of(noted + 8).is_some(), "the others stay");
    }

    /// Readers racing notes and forgets of other mappings always find a noted word's key.
    #[test]
    fn readers_see_consistent_entries_while_others_change() {
        let (noted, plain) = two_views();
        let want = key_of(noted + 64).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..2000 {
                    note(plain, 8192).unwrap();
                    forget(plain).unwrap();
                }
                stop.store(true, Ordering::Relaxed);
            });
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(key_of(noted + 64), Some(want));
                assert!(key_of(plain + 64).is_none_or(|k| k == want), "plain maps the same object");
            }
        });
    }

    /// One side through the noted mapping (no query), the other through a mapping of its own
    /// (queried): they meet, both ways.
    #[test]
    fn a_noted_word_and_a_queried_one_meet() {
        let (noted, plain) = two_views();
        // SAFETY: both views map the memfd's first page, which lives (never unmapped) for the
        // test; AtomicU32 has no invalid bit pattern and 64 is aligned.
        let (a, b) = unsafe { (&*((noted + 64) as *const AtomicU32), &*((plain + 64) as *const AtomicU32)) };
        for (waiter, waker) in [(a, b), (b, a)] {
            waker.store(0, Ordering::SeqCst);
            std::thread::scope(|s| {
                let t = s.spawn(|| shared::wait(waiter, 0, Some(Duration::from_secs(10).into())));
                // Until the wake finds it queued, or its wait ended without (a miss: the keys
                // differ).
                let mut woken = 0;
                while woken == 0 && !t.is_finished() {
                    std::thread::sleep(Duration::from_millis(2));
                    woken = shared::wake(waker, 1).unwrap();
                }
                assert_eq!(woken, 1, "the wake found the waiter");
                assert_eq!(t.join().unwrap(), Ok(()));
            });
        }
    }
}

/// The seqlock under loom: a reader racing a writer that forgets one mapping and notes another
/// in the same entry finds, for each address, nothing or that mapping's own key — never one
/// mapping's range with the other's identity.
#[cfg(all(test, ufutex_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    fn key(ino: u64) -> SharedKey {
        SharedKey { class: Class::Object, dev: 7, ino, off: 0 }
    }

    #[test]
    fn a_reader_never_mixes_two_versions_of_an_entry() {
        loom::model(|| {
            let k = Arc::new(Known::new());
            k.write(0x1000, 0x1000, Some(&key(1)));
            let w = {
                let k = k.clone();
                loom::thread::spawn(move || {
                    k.write(0, 0, None);
                    k.write(0x8000, 0x1000, Some(&key(2)));
                })
            };
            for (addr, ino) in [(0x1008, 1), (0x8008, 2)] {
                if let Some(got) = k.key_of(addr, || false) {
                    assert_eq!(got, SharedKey { off: 8, ..key(ino) });
                }
            }
            w.join().unwrap();
            assert_eq!(k.key_of(0x1008, || false), None);
            assert_eq!(k.key_of(0x8008, || false), Some(SharedKey { off: 8, ..key(2) }));
        });
    }
}
