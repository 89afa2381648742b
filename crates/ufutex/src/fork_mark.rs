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
//! A thread that finds the mark wiped blocks its signals until the start is made: a signal
//! handler that ran on the thread making the start, after it took the start and before the
//! start counts the thread busy (`reentry::fork_quiet`), would find the start under way in a
//! call of its own and wait for it, that is for its own thread, for ever. Its signals arrive
//! once the start is made, as they would have after a call of ours.

use crate::once::RacyWord;
use crate::primitive::{start_once, STARTED};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU8, Ordering};

/// The mark, once [`make`] made it: null before, and where it could not be made (a kernel
/// before 4.14; then children made without the handlers are not told).
#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
static MARK: AtomicPtr<AtomicU8> = AtomicPtr::new(std::ptr::null_mut());
/// The fresh start a child made without the handlers makes (`fork.rs`): a `fn()`, null until
/// [`make`] stores it.
static START: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());
/// The page ([`page`]): its address with bit 0 for whether the kernel wipes it, or none if it
/// could not be mapped. Made by whichever needs it first, the mark or the shared table: each thread
/// that finds it missing maps one, the first published stays and the others are unmapped, so
/// no thread waits for another (which a fork may have left behind: `once.rs`).
static PAGE: RacyWord = RacyWord::new();
/// Where in the page the shared table's word is (`shared/process.rs`), apart from the mark's
/// byte at its start.
const SHARED_WORD: usize = 4;
/// The bytes used (the mark, the shared word); the kernel rounds a mapping and its advice up to
/// whole pages, whatever their size.
const PAGE_USED: usize = SHARED_WORD + std::mem::size_of::<AtomicU32>();

/// The page, mapped the first time (zeroed, with `MADV_WIPEONFORK` where the kernel has it):
/// its address, and whether the kernel wipes it in children; `None` if it could not be mapped.
fn page() -> Option<(usize, bool)> {
    let kept = PAGE.get_or_make_option(map_page, unmap_page)?;
    Some(((kept & !1) as usize, kept & 1 != 0))
}

/// A new page for [`PAGE`], in its encoding; `None` if the kernel has none to give.
fn map_page() -> Option<u64> {
    let p = crate::pages::map(PAGE_USED)?.as_ptr().cast::<libc::c_void>();
    // SAFETY: `p` is the `PAGE_USED`-byte mapping just made, known to this thread alone.
    let wiped = unsafe { libc::madvise(p, PAGE_USED, libc::MADV_WIPEONFORK) } == 0;
    Some(p as u64 | u64::from(wiped))
}

/// Unmap a page that [`map_page`] made and another thread's beat to [`PAGE`].
fn unmap_page(mine: u64) {
    // SAFETY: the mapping `map_page` made, never published: known to this thread alone.
    unsafe { libc::munmap((mine & !1) as usize as *mut libc::c_void, PAGE_USED) };
}

/// Make the mark, with the start that a child told by it makes: when the library is loaded
/// (`load.rs`, through `fork::make_mark`), and by `fork::watch` if it was not (a mark made
/// already is left as it is: in a child, reading 0 until its start is made). Two threads, or a
/// child forked while a thread of the parent made it (`once.rs`), may each make a step twice.
pub(crate) fn make(start: fn()) {
    // The start before the look at the mark: the first touch of the start's zero page is then
    // a write, one page fault where a load first takes two (as `membarrier::decide_at_load`;
    // the mark itself is among the hot statics, `hot_code.rs`).
    // Stored again where the mark is made already, it is the same `start` (`fork.rs` has one).
    // Release: a thread that reads the mark (below) finds the start.
    START.store(start as *mut (), Ordering::Release);
    if mark().is_some() {
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
    // Before the start is taken (module docs); given back when it is made.
    let _blocked = SignalsBlocked::now();
    start_once(m, || {
        #[cfg(test)]
        in_the_window();
        // Acquire: pairs with `make`'s store (the mark was read after it anyway).
        let start = START.load(Ordering::Acquire);
        if !start.is_null() {
            // SAFETY: START holds null or a `fn()` that `make` stored, cast to a pointer.
            let start = unsafe { std::mem::transmute::<*mut (), fn()>(start) };
            start();
        }
    });
}

/// This thread's signals blocked, every one that can be, until dropped; then the mask it had.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    fn now() -> SignalsBlocked {
        let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: `sigfillset` initialises the set it is given; `pthread_sigmask` reads `all`
        // and writes the thread's mask to `old` (it cannot fail with a valid `how`; glibc
        // leaves its own internal signals out of a block by itself).
        unsafe {
            libc::sigfillset(all.as_mut_ptr());
            libc::pthread_sigmask(libc::SIG_BLOCK, all.as_ptr(), old.as_mut_ptr());
            SignalsBlocked(old.assume_init())
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask `now` saved, a valid set. The signals that came meanwhile
        // are delivered here.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// In a child whose handler made the start (`fork.rs`): the mark again, which the fork wiped
/// (the child has one thread yet).
pub(crate) fn started() {
    if let Some(m) = mark() {
        m.store(STARTED, Ordering::Relaxed);
    }
}

/// A signal that [`in_the_window`] raises on the thread making the start, once (0: none): the
/// test of the window (`fork.rs`'s tests).
#[cfg(test)]
pub(crate) static RAISE_IN_START: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Right after the start was taken and before it is made: where a signal that lands makes its
/// handler's call wait for the start (module docs).
#[cfg(test)]
fn in_the_window() {
    let sig = RAISE_IN_START.swap(0, Ordering::Relaxed);
    if sig != 0 {
        // SAFETY: raises a signal on this thread; the test installed its handler.
        unsafe { libc::raise(sig) };
    }
}

/// Whether the mark reads started (`None`: no mark was made).
#[cfg(test)]
pub(crate) fn reads_started() -> Option<bool> {
    mark().map(|m| m.load(Ordering::Acquire) == STARTED)
}
