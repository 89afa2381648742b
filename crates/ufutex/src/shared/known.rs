//! Mappings the library made itself and never unmaps (a namespace's file and its levels,
//! `named`): the identity of a word in one is known without asking the kernel.
//!
//! `identity.rs` asks afresh for every operation because an address can be unmapped and
//! something else mapped there, and nothing would say so. A mapping the library made and keeps
//! for the life of the process cannot be: unmapping it is the user's error, as unmapping the
//! heap is. Its identity is asked once, when it is made, through the same query and rule as
//! every other word's (`identity::query`, `identity::classify`), so a word's key is the same
//! whether it is found here or asked of the kernel — in this process or in another that maps
//! the same file itself. The saving is the query of every shared operation that queues or
//! dequeues on such a word: 1–5 µs here (BENCHMARKS.md).
//!
//! The list only grows, and an entry never changes once published: a reader loads the count
//! (Acquire, pairing with the writer's Release) and reads the entries below it, writing
//! nothing shared. A list that is full, or a mapping whose query fails, is left out: its words
//! are asked of the kernel, as any other word's.

use super::identity::{self, Class, SharedKey};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Mappings at most: a namespace takes one, and one per level it grew (at most 16).
const CAPACITY: usize = 256;

/// One mapping: the bytes `[start, start + len)` are the object `(class, dev, ino)` from byte
/// `off` on.
struct Known {
    start: AtomicUsize,
    len: AtomicUsize,
    class: AtomicU32,
    dev: AtomicU64,
    ino: AtomicU64,
    off: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array, each copy its own
const EMPTY: Known = Known {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    class: AtomicU32::new(0),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    off: AtomicU64::new(0),
};

static LIST: [Known; CAPACITY] = [EMPTY; CAPACITY];
/// Entries published (`LIST[..COUNT]`).
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Writers, one at a time.
static WRITER: Mutex<()> = Mutex::new(());

/// Note the mapping `[start, start + len)`, which the caller made with `MAP_SHARED` and never
/// unmaps. Its identity is asked of the kernel now; if that fails, or the list is full, or the
/// mapping is not of a shared object, nothing is noted (its words are then asked of the kernel
/// each time, which is always correct).
pub(crate) fn note(start: usize, len: usize) {
    let Some(key) = ask(start) else { return };
    let _w = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    let n = COUNT.load(Ordering::Relaxed);
    let Some(k) = LIST.get(n) else { return };
    k.start.store(start, Ordering::Relaxed);
    k.len.store(len, Ordering::Relaxed);
    k.class.store(key.class as u32, Ordering::Relaxed);
    k.dev.store(key.dev, Ordering::Relaxed);
    k.ino.store(key.ino, Ordering::Relaxed);
    k.off.store(key.off, Ordering::Relaxed);
    // Release: a reader that sees the count sees the entry.
    COUNT.store(n + 1, Ordering::Release);
}

/// The key of the byte at `start`, asked of the kernel: `None` unless it is a shared object's.
fn ask(start: usize) -> Option<SharedKey> {
    // SAFETY: a NUL-terminated literal path.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // (The process slot is only used for private memory, which is refused below.)
    let key = identity::query(fd, start).and_then(|vma| identity::classify(start, &vma, (0, 0)));
    // SAFETY: `fd` is ours, closed once.
    unsafe { libc::close(fd) };
    key.ok().filter(|k| k.class != Class::Local)
}

/// The key of the word at `addr` if it lies in a noted mapping.
#[inline]
pub(crate) fn key_of(addr: usize) -> Option<SharedKey> {
    let n = COUNT.load(Ordering::Acquire);
    LIST[..n.min(CAPACITY)].iter().find_map(|k| {
        let at = addr.wrapping_sub(k.start.load(Ordering::Relaxed));
        (at < k.len.load(Ordering::Relaxed)).then(|| SharedKey {
            class: if k.class.load(Ordering::Relaxed) == Class::SysV as u32 { Class::SysV } else { Class::Object },
            dev: k.dev.load(Ordering::Relaxed),
            ino: k.ino.load(Ordering::Relaxed),
            off: k.off.load(Ordering::Relaxed) + at as u64,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

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
            note(noted, 8192);
            (noted, plain)
        }
    }

    #[test]
    fn a_noted_mapping_gives_the_key_the_kernel_gives() {
        let (noted, plain) = two_views();
        for at in [0, 64, 4096 + 128] {
            let known = key_of(noted + at).expect("noted");
            assert_eq!(Some(known), ask(plain + at), "offset {at}");
            assert_eq!(Some(known), ask(noted + at), "offset {at}");
        }
        assert_eq!(key_of(plain + 64), None, "not noted");
        assert_eq!(key_of(noted + 8192), None, "past the end");
        let heap = Box::new(0u32);
        assert_eq!(key_of(&*heap as *const u32 as usize), None);
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
