//! The fork mark: how a child made without our fork handlers (glibc's `_Fork`, a raw `clone`
//! without `CLONE_VM`) knows it is one. A page of its own, mapped with `MADV_WIPEONFORK`, holds
//! 1 ([`STARTED`]) in the process that made it and reads 0 in every child that copied its
//! memory. The child handler sets it again (`fork.rs`); otherwise the child's first call that
//! could meet the parent's waiters ([`check`]: a waiter before its episode, a waker or a
//! requeue before it locks, anything that takes the gate) finds it 0 and makes the fresh start
//! that `fork.rs` registered, once, before any thread of the child goes on
//! (`primitive::start_once`). Children that share the memory (`vfork`, `posix_spawn`) keep the
//! mark, as they keep everything else.
//!
//! The page also holds the shared table's word, which tells it the same for its own fresh
//! start (a process slot of the child's: `shared/process.rs`). Below the tables, the re-entry
//! marks and the shared table, which ask it, and knowing nothing of them: the start is
//! `fork.rs`'s.
//!
//! Not covered: a signal handler that interrupts the thread making the start in the few
//! instructions before the start counts the thread busy (`reentry::fork_quiet`), and whose
//! call then needs the start, waits for its own thread.

use crate::primitive::{start_once, STARTED};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;

/// The mark, once [`make`] made it: null before, and where it could not be made (a kernel
/// before 4.14; then children made without the handlers are not told).
static MARK: AtomicPtr<AtomicU8> = AtomicPtr::new(std::ptr::null_mut());
/// The fresh start a child made without the handlers makes (`fork.rs`).
static START: OnceLock<fn()> = OnceLock::new();
/// The page: its address, and whether the kernel wipes it in children; `None` if it could not
/// be mapped. Made by whichever needs it first, the mark or the shared table.
static PAGE: OnceLock<Option<(usize, bool)>> = OnceLock::new();
/// Where in the page the shared table's word is (`shared/process.rs`), apart from the mark's
/// byte at its start.
const SHARED_WORD: usize = 4;

/// The page, mapped the first time (zeroed, with `MADV_WIPEONFORK` where the kernel has it).
fn page() -> Option<(usize, bool)> {
    *PAGE.get_or_init(|| {
        // The bytes used (the mark, the shared word); the kernel rounds a mapping and its advice up
        // to whole pages, whatever their size.
        let len = SHARED_WORD + std::mem::size_of::<AtomicU32>();
        let p = crate::pages::map(len)?.as_ptr().cast::<libc::c_void>();
        // SAFETY: `p` is the `len`-byte mapping just made, ours alone, and never unmapped.
        let wiped = unsafe { libc::madvise(p, len, libc::MADV_WIPEONFORK) } == 0;
        Some((p as usize, wiped))
    })
}

/// Make the mark, with the start that a child told by it makes; once per process (by
/// `fork::watch`, before the process first queues a waiter).
pub(crate) fn make(start: fn()) {
    if START.set(start).is_err() {
        return;
    }
    // A page the kernel does not wipe tells no child anything.
    let Some((p, true)) = page() else {
        return;
    };
    let mark = p as *mut AtomicU8;
    // SAFETY: the page is mapped, writable and aligned, and never unmapped; an `AtomicU8` has no
    // invariant, and nothing else uses the page's first byte.
    unsafe { &*mark }.store(STARTED, Ordering::Relaxed);
    // Release: a thread that reads the pointer sees the 1 behind it.
    MARK.store(mark, Ordering::Release);
}

/// The shared table's word in the page (`shared/process.rs`): 0 when the page is new and in
/// every child that copied it, where the kernel wipes it (its own atfork handler zeroes it
/// too, for a kernel that does not); `None` if the page could not be mapped.
pub(crate) fn shared_word() -> Option<&'static AtomicU32> {
    let (p, _) = page()?;
    // SAFETY: the page is mapped, writable and never unmapped; the word is aligned, apart from
    // the mark's byte, and used only by the shared table (an `AtomicU32` has no invariant).
    Some(unsafe { &*((p + SHARED_WORD) as *const AtomicU32) })
}

/// The mark's byte, if the mark was made.
fn mark() -> Option<&'static AtomicU8> {
    // Acquire: pairs with `make`'s store.
    let p = MARK.load(Ordering::Acquire);
    // SAFETY: a mark, once made, is never unmapped.
    unsafe { p.as_ref() }
}

/// Before a call that could meet the parent's waiters: in a child made without our handlers
/// (the mark reads 0), the fresh start first (module docs). Two loads and a compare otherwise.
#[inline]
pub(crate) fn check() {
    if let Some(m) = mark() {
        // Acquire: the start, made by another thread of the child, happens before.
        if m.load(Ordering::Acquire) != STARTED {
            unprepared(m);
        }
    }
}

/// [`check`] found the mark wiped: the start, made once; no thread of the child (it may have
/// started some) goes on before it is made (`primitive::start_once`, whose loom model this is).
#[cold]
#[inline(never)]
fn unprepared(m: &AtomicU8) {
    start_once(m, || {
        if let Some(start) = START.get() {
            start();
        }
    });
}

/// In a child whose handler made the start (`fork.rs`): the mark again, which the fork wiped
/// (the child has one thread yet).
pub(crate) fn started() {
    if let Some(m) = mark() {
        m.store(STARTED, Ordering::Relaxed);
    }
}
