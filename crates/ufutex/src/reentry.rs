//! Calls made from a signal handler: what the interrupted thread was doing, and the wakes that
//! must wait for it.
//!
//! The kernel's futex calls are async-signal-safe; a handler may wake (a semaphore's post) at
//! any instruction of its thread. Ours take a bucket lock that is not reentrant, so a handler's
//! wake that interrupts its own thread inside a bucket's critical section would wait for a lock
//! that only it can release: a deadlock. Neither may it take another bucket, because a requeuer
//! that holds that one may be waiting for the one the thread holds. And a handler's wait that
//! interrupts its thread's own wait would reuse the waiter node that is queued.
//!
//! So each thread keeps, in static thread-local storage (no lazy set-up, nothing a handler's
//! access could allocate):
//! - `held`: the bucket locks (private and shared) it holds or is taking, plus one while it
//!   runs deferred wakes; counted up before a lock is taken ([`locking`]) and down after it is
//!   released ([`unlocked`]), so a handler never sees 0 while the thread is inside a critical
//!   section;
//! - `waiting`: it is inside a wait ([`Episode`]), from before its node is taken until the
//!   node is idle again;
//! - `pending`: wakes that handlers deferred ([`defer`]), run by the thread itself when its
//!   last bucket lock is released ([`unlocked`] → `drain`), before the call that held it
//!   goes on; `any` says that there are some, so that an unlock looks at one byte.
//!
//! The first three are the hot ones (`hot`): on x86-64 one instruction each, at a fixed offset
//! from the thread pointer. What they cost, by callgrind: 23 instructions a requeue of one
//! waiter through the C ABI (389 against 366), and 4–10 a wake that locks. In time, ~10–25%
//! of a contended wake (`hash --contend`) and ~10% of perf's cold requeue: see BENCHMARKS.md.
//!
//! What a call does when its thread is busy (`held` not 0):
//! - a wake, a requeue or a wake-op that finds a waiter to lock for is deferred: it reports 0
//!   woken, and its waiters are woken when the thread leaves the critical section (a requeue's
//!   moves become wakes; a wake-op applies its operation at once);
//! - a wait fails with `EINTR` (`WaitError::Interrupted`) without queueing, as does a wait
//!   while the thread is in a wait ([`episode`]). A caller's loop then polls its word.
//!
//! A once-per-process set-up behind a lock (the shared table's segment and the process's slot)
//! counts as busy too ([`setup`]), and a handler's call that would need it asks [`in_setup`]
//! first: its process-shared wake or requeue is deferred, anything else fails with
//! `Interrupted`, where it would wait for a lock its own thread holds. Per-process figures that
//! a handler may need first (the spin hint's cost, the shared mode) are atomics that a racer
//! computes again rather than waits for.
//!
//! Only the thread and the handlers that interrupt it touch its state, and a handler runs to
//! its end before the code it interrupted goes on. The cells are therefore changed by balanced
//! steps (a handler leaves `held` and `waiting` as it found them), each access a compiler
//! barrier, which orders it against a lock's atomics. `any` is set by handlers and cleared
//! only by `drain`. `pending` is the one structure both add to and take from; its protocol is
//! at [`Pending`].

use crate::key::Key;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Makes a deferred wake: called by the thread with what the handler deferred.
pub(crate) type Run = fn(ctx: *const (), key: Key, n: usize, mask: u64);

/// A wake a handler left for its thread: `run` makes it, with up to `n` waiters of `key`
/// (found through `ctx`: the tables, or nothing for a shared word) whose mask shares a bit with
/// `mask`. (`run` is the caller's: this module sits below the tables and the operations.)
#[derive(Clone, Copy)]
struct Deferred {
    run: Run,
    ctx: *const (),
    key: Key,
    n: usize,
    mask: u64,
}

impl Deferred {
    /// Make the wake (the thread, in `drain`).
    fn make(self) {
        (self.run)(self.ctx, self.key, self.n, self.mask);
    }
}

/// Deferred wakes kept in the thread's own storage before a page is needed.
pub(crate) const INLINE: usize = 8;
/// Deferred wakes on one overflow page (4 KiB, from `mmap`, which a handler may call).
pub(crate) const PER_PAGE: usize = (4096 - 2 * std::mem::size_of::<usize>()) / std::mem::size_of::<Deferred>();

/// `N` slots and how many are filled. `len` may run past `N` when pushes found the slots
/// full (a push counts itself in first, then looks whether it fits).
struct Slots<const N: usize> {
    len: AtomicUsize,
    slots: [UnsafeCell<MaybeUninit<Deferred>>; N],
}

impl<const N: usize> Slots<N> {
    const fn new() -> Slots<N> {
        Slots { len: AtomicUsize::new(0), slots: [const { UnsafeCell::new(MaybeUninit::uninit()) }; N] }
    }

    /// Add `d` if a slot is free.
    fn push(&self, d: Deferred) -> bool {
        // One instruction: a handler that interrupts us sees the slot taken.
        let i = self.len.fetch_add(1, Ordering::Relaxed);
        if i >= N {
            return false;
        }
        // SAFETY: slot `i` is ours alone: the counter gave it to this push only, and a pop
        // takes a slot only below a `len` it read (which no push before ours had reached
        // yet, or only after that push wrote its slot: pops never interrupt pushes, see
        // `Pending`).
        unsafe { (*self.slots[i].get()).write(d) };
        true
    }

    /// Take the newest entry; `None` if there is none.
    fn pop(&self) -> Option<Deferred> {
        loop {
            let raw = self.len.load(Ordering::Relaxed);
            let n = raw.min(N);
            if n == 0 {
                return None;
            }
            // SAFETY: slots below `len` (and below `N`) were written by finished pushes
            // (`Pending`'s rule), and `Deferred` is `Copy`.
            let d = unsafe { (*self.slots[n - 1].get()).assume_init() };
            // A push that interrupted us since the load changed `len`: look again.
            if self.len.compare_exchange(raw, n - 1, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                return Some(d);
            }
        }
    }
}

/// An overflow page, newest first.
struct Page {
    next: *mut Page,
    slots: Slots<PER_PAGE>,
}

const _: () = assert!(std::mem::size_of::<Page>() <= 4096);

/// The deferred wakes of one thread: a stack, filled by handlers, emptied by the thread.
///
/// The rule that makes it sound: pushes come only from handlers that found the thread busy,
/// and pops only from `drain`, which runs with the thread busy and only where `held` went to
/// 0 — so a pop never interrupts a push, and every push that starts during a drain (in a
/// handler) ends before the drain goes on. A pop reads the top entry and then takes it with a
/// compare-exchange of the length, which fails if a push came between. Pages are linked at the
/// top when the top is full (only a thread whose handlers deferred more than [`INLINE`] wakes
/// inside one critical section has any); a pop passes over an empty page. Only the drain
/// unlinks one, once its pops found everything empty, by a compare-exchange of the top
/// ([`Pending::unlink_top`]); it then runs what a handler pushed to the page before that, and
/// unmaps it. So a thread keeps no page past its drain, and none is lost when it exits.
struct Pending {
    inline: Slots<INLINE>,
    pages: AtomicPtr<Page>,
}

impl Pending {
    /// Add `d`; `false` if no page could be mapped for it.
    fn push(&self, d: Deferred) -> bool {
        loop {
            let top = self.pages.load(Ordering::Relaxed);
            // SAFETY: a page is unmapped only by the drain, after unlinking it, and a drain
            // never runs inside a push (the type docs): `top` was linked at the load and stays
            // mapped until this push returns.
            let fits = match unsafe { top.as_ref() } {
                None => self.inline.push(d),
                Some(page) => page.slots.push(d),
            };
            if fits {
                return true;
            }
            let Some(page) = map_page(top) else { return false };
            if self.pages.compare_exchange(top, page, Ordering::Relaxed, Ordering::Relaxed).is_err() {
                // A handler that interrupted us linked a page of its own: use that one.
                unmap_page(page);
            }
        }
    }

    /// Take the newest entry.
    fn pop(&self) -> Option<Deferred> {
        let mut page = self.pages.load(Ordering::Relaxed);
        // SAFETY: pops are the drain's, which alone unmaps pages (after unlinking them).
        while let Some(p) = unsafe { page.as_ref() } {
            if let Some(d) = p.slots.pop() {
                return Some(d);
            }
            page = p.next;
        }
        self.inline.pop()
    }
}

/// What [`Pending::unlink_top`] did.
enum Unlinked {
    /// There are no pages.
    NoPage,
    /// A handler linked a new page meanwhile: pop again.
    Raced,
    /// This page is out of every later push's reach; entries pushed to it before it was
    /// unlinked are still in it.
    Page(*mut Page),
}

impl Pending {
    /// Unlink the top page, which the drain's pops left empty. Only from `drain`: a handler
    /// runs to its end before the drain goes on, so one that pushed to the page did so before
    /// the compare-exchange (and its entry is in the page), and one after it finds the next.
    fn unlink_top(&self) -> Unlinked {
        let top = self.pages.load(Ordering::Relaxed);
        // SAFETY: a linked page is mapped until the drain unmaps it after unlinking it here.
        let Some(page) = (unsafe { top.as_ref() }) else { return Unlinked::NoPage };
        match self.pages.compare_exchange(top, page.next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => Unlinked::Page(top),
            Err(_) => Unlinked::Raced,
        }
    }
}

/// A new, empty page whose `next` is `next`; `None` if none could be mapped.
fn map_page(next: *mut Page) -> Option<*mut Page> {
    let page = crate::pages::map(4096)?.as_ptr().cast::<Page>();
    // SAFETY: fresh, page-aligned, writable memory of 4 KiB, which holds a `Page` (asserted
    // above), and which nobody else knows of.
    unsafe { page.write(Page { next, slots: Slots::new() }) };
    Some(page)
}

/// Give back a page from [`map_page`] that nothing references (never linked, or unlinked by
/// the drain).
fn unmap_page(page: *mut Page) {
    // SAFETY: `page` is a mapping of 4 KiB from `map_page` that nothing references (caller).
    unsafe { libc::munmap(page.cast(), 4096) };
}

/// The thread's three hot cells: read or written by every bucket lock and unlock and every
/// wait, so they live where they cost least (see inside).
mod hot {
    /// On x86-64 (outside loom): eight bytes of the library's static TLS block at a fixed
    /// offset from the thread pointer (the initial-exec model, as `ufutex-preload`'s flag:
    /// see its `reentry.rs`). A `thread_local!` in a shared library is reached through
    /// `__tls_get_addr`, which after a sleep brings pages of `ld.so` into the cache: the
    /// kernel's perf bench requeue through the preload library measured ~15% slower than
    /// before these cells with them there, ~10% with them here. Bytes 0–3: `held`; byte 4: `any`; byte 5: `waiting`; byte 6: `setting_up`. Every access is one
    /// instruction, so a handler cannot split one; each is also a compiler barrier (an `asm!`
    /// without `nomem`), which orders it against the lock's atomics around it.
    #[cfg(all(target_arch = "x86_64", not(ufutex_loom)))]
    mod imp {
        use std::arch::asm;

        // Zero at every thread's start. Global so that every codegen unit links to it, hidden
        // so that it is not exported from the library.
        std::arch::global_asm!(
            ".pushsection .tbss.ufutex_reentry_hot,\"awT\",@nobits",
            ".globl ufutex_reentry_hot",
            ".hidden ufutex_reentry_hot",
            ".type ufutex_reentry_hot,@object",
            ".size ufutex_reentry_hot,8",
            ".p2align 3",
            "ufutex_reentry_hot:",
            ".zero 8",
            ".popsection",
        );

        /// The cells' offset from the thread pointer.
        #[inline(always)]
        fn off() -> usize {
            let off: usize;
            // SAFETY: reads the offset from the symbol's GOT entry, which the dynamic linker
            // filled before any code of the library ran (R_X86_64_TPOFF64) and never changes
            // (hence `pure, nomem`); nothing else.
            unsafe {
                asm!("mov {off}, qword ptr [rip + ufutex_reentry_hot@GOTTPOFF]", off = out(reg) off,
                     options(pure, nomem, nostack, preserves_flags));
            }
            off
        }

        #[inline(always)]
        pub(crate) fn inc_held() {
            // SAFETY: FS:off is this thread's copy of `ufutex_reentry_hot` (static TLS, live
            // for the thread's life, private to it); this writes its first four bytes only.
            unsafe { asm!("inc dword ptr fs:[{off}]", off = in(reg) off(), options(nostack)) };
        }

        /// Count down by `N` (the locks just released); whether `held` reached 0 with `any` set
        /// (the drain is due).
        #[inline(always)]
        pub(crate) fn sub_held_due<const N: u32>() -> bool {
            let mut due: u32 = 0;
            // SAFETY: as in `inc_held`; reads byte 4 (`any`) too, only when the count reached 0.
            unsafe {
                asm!("sub dword ptr fs:[{off}], {n}", "jnz 2f", "movzx {due:e}, byte ptr fs:[{off} + 4]", "2:",
                     off = in(reg) off(), n = const N, due = inout(reg) due, options(nostack));
            }
            due != 0
        }

        #[inline(always)]
        pub(crate) fn held() -> u32 {
            let v: u32;
            // SAFETY: as in `inc_held`; reads the four bytes.
            unsafe {
                asm!("mov {v:e}, dword ptr fs:[{off}]", off = in(reg) off(), v = out(reg) v,
                     options(nostack, preserves_flags));
            }
            v
        }

        #[inline(always)]
        pub(crate) fn set_held(v: u32) {
            // SAFETY: as in `inc_held`.
            unsafe {
                asm!("mov dword ptr fs:[{off}], {v:e}", off = in(reg) off(), v = in(reg) v,
                     options(nostack, preserves_flags));
            }
        }

        /// Byte `at` (4: `any`, 5: `waiting`, 6: `setting_up`).
        #[inline(always)]
        pub(crate) fn flag<const AT: usize>() -> bool {
            let v: u32;
            // SAFETY: as in `inc_held`; reads byte `AT` (< 8) of the cells.
            unsafe {
                asm!("movzx {v:e}, byte ptr fs:[{off} + {at}]", off = in(reg) off(), at = const AT, v = out(reg) v,
                     options(nostack, preserves_flags));
            }
            v != 0
        }

        #[inline(always)]
        pub(crate) fn set_flag<const AT: usize>(b: bool) {
            // SAFETY: as in `inc_held`; writes byte `AT` (< 8) of the cells.
            unsafe {
                asm!("mov byte ptr fs:[{off} + {at}], {b}", off = in(reg) off(), at = const AT, b = in(reg_byte) u8::from(b),
                     options(nostack, preserves_flags));
            }
        }
    }

    /// Elsewhere, and under loom (whose model threads share one OS thread): thread-locals.
    #[cfg(not(all(target_arch = "x86_64", not(ufutex_loom))))]
    mod imp {
        use std::cell::Cell;
        use std::sync::atomic::{compiler_fence, Ordering};

        struct Hot {
            held: Cell<u32>,
            flags: [Cell<bool>; 8],
        }

        #[cfg(not(ufutex_loom))]
        std::thread_local! {
            static HOT: Hot = const { Hot { held: Cell::new(0), flags: [const { Cell::new(false) }; 8] } };
        }
        #[cfg(ufutex_loom)]
        loom::thread_local! {
            static HOT: Hot = Hot { held: Cell::new(0), flags: [const { Cell::new(false) }; 8] };
        }

        // Each with a compiler fence on both sides, as the assembly is a barrier. (A plain
        // read-modify-write of `held` is sound: a handler leaves it as it found it.)
        fn fenced<R>(f: impl FnOnce(&Hot) -> R) -> R {
            compiler_fence(Ordering::SeqCst);
            let r = HOT.with(f);
            compiler_fence(Ordering::SeqCst);
            r
        }

        pub(crate) fn inc_held() {
            fenced(|h| h.held.set(h.held.get() + 1));
        }

        pub(crate) fn sub_held_due<const N: u32>() -> bool {
            fenced(|h| {
                h.held.set(h.held.get() - N);
                h.held.get() == 0 && h.flags[4].get()
            })
        }

        pub(crate) fn held() -> u32 {
            fenced(|h| h.held.get())
        }

        pub(crate) fn set_held(v: u32) {
            fenced(|h| h.held.set(v));
        }

        pub(crate) fn flag<const AT: usize>() -> bool {
            fenced(|h| h.flags[AT].get())
        }

        pub(crate) fn set_flag<const AT: usize>(b: bool) {
            fenced(|h| h.flags[AT].set(b));
        }
    }

    pub(super) use imp::{held, inc_held, set_held, sub_held_due};

    /// Set after a push to the deferred wakes, cleared by `drain` before it pops: what an
    /// unlock that brings `held` to 0 looks at.
    #[inline(always)]
    pub(super) fn any() -> bool {
        imp::flag::<4>()
    }

    #[inline(always)]
    pub(super) fn set_any(b: bool) {
        imp::set_flag::<4>(b);
    }

    /// The thread is in a wait ([`super::Episode`]).
    #[inline(always)]
    pub(super) fn waiting() -> bool {
        imp::flag::<5>()
    }

    #[inline(always)]
    pub(super) fn set_waiting(b: bool) {
        imp::set_flag::<5>(b);
    }

    /// The thread is in a once-per-process set-up ([`super::Setup`]).
    #[cfg_attr(ufutex_loom, allow(dead_code))]
    #[inline(always)]
    pub(super) fn setting_up() -> bool {
        imp::flag::<6>()
    }

    #[cfg_attr(ufutex_loom, allow(dead_code))]
    #[inline(always)]
    pub(super) fn set_setting_up(b: bool) {
        imp::set_flag::<6>(b);
    }
}

// The deferred wakes: touched only when a handler defers one and when the thread makes them.
#[cfg(not(ufutex_loom))]
std::thread_local! {
    static PENDING: Pending = const { Pending { inline: Slots::new(), pages: AtomicPtr::new(ptr::null_mut()) } };
}

#[cfg(ufutex_loom)]
loom::thread_local! {
    static PENDING: Pending = Pending { inline: Slots::new(), pages: AtomicPtr::new(ptr::null_mut()) };
}

/// Before a bucket lock is taken: the count is up before the lock's atomic (a handler in
/// between sees the thread busy).
#[inline(always)]
pub(crate) fn locking() {
    hot::inc_held();
}

/// After a bucket lock was released (the count goes down after the unlock's atomic): the last
/// one runs the wakes that handlers deferred.
#[inline(always)]
pub(crate) fn unlocked() {
    if hot::sub_held_due::<1>() {
        drain();
    }
}

/// [`unlocked`] for two bucket locks released one after the other (`BucketGuard::unlock_both`).
#[inline(always)]
pub(crate) fn unlocked_two() {
    if hot::sub_held_due::<2>() {
        drain();
    }
}

/// Whether this thread is inside a bucket's critical section or running deferred wakes: a
/// call that would lock is then made from a signal handler that interrupted it.
#[inline]
pub(crate) fn busy() -> bool {
    hot::held() != 0
}

/// Leave a wake for this thread to make with `run` when it leaves its critical section
/// ([`busy`] is true). Whatever `ctx` points to must stay alive until `run` has run.
///
/// # Panics
/// Aborts the process if the wake cannot be kept (see [`keep`]).
pub(crate) fn defer(run: Run, ctx: *const (), key: Key, n: usize, mask: u64) {
    debug_assert!(busy());
    keep(Deferred { run, ctx, key, n, mask });
}

/// List `d`; if no memory for a page of them can be had, abort, as a collection that cannot
/// grow does: dropping the wake would lose a wakeup, and a handler cannot wait for memory.
fn keep(d: Deferred) {
    let kept = PENDING.with(|p| p.push(d));
    // After the entry is written (the flag's write is a compiler barrier): an unlock that sees
    // the flag finds the entry.
    hot::set_any(true);
    if !kept {
        // Nothing here may allocate or unwind (a signal handler); the message is static.
        const MSG: &[u8] = b"ufutex: no memory to keep a wake deferred by a signal handler\n";
        // SAFETY: writing a static buffer to stderr; `abort` does not return.
        unsafe {
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::abort();
        }
    }
}

/// Make the deferred wakes, with the thread counted busy so that handlers keep deferring.
#[cold]
#[inline(never)]
fn drain() {
    loop {
        hot::set_held(1);
        hot::set_any(false);
        loop {
            while let Some(d) = PENDING.with(Pending::pop) {
                d.make();
            }
            // The overflow pages are empty: give them back (a thread keeps none past its drain).
            match PENDING.with(Pending::unlink_top) {
                Unlinked::NoPage => break,
                Unlinked::Raced => {}
                Unlinked::Page(page) => {
                    // SAFETY: unlinked, so only this drain reaches it; mapped until below.
                    while let Some(d) = unsafe { &*page }.slots.pop() {
                        d.make();
                    }
                    unmap_page(page);
                }
            }
        }
        hot::set_held(0);
        // A handler since the flag was cleared deferred one more (popped above, or not yet
        // if it came after the last pop): look again.
        if !hot::any() {
            return;
        }
    }
}

/// This thread is setting up something once per process (the shared table's segment and
/// process slot), from [`setup`] until dropped: counted busy meanwhile, so that a signal
/// handler's call that interrupts it defers its wake or fails its wait, and asks [`in_setup`]
/// before it would wait for the set-up (behind a lock that its own thread holds).
#[cfg_attr(ufutex_loom, allow(dead_code))] // the shared table is not modelled
pub(crate) struct Setup(());

/// Start a set-up; `None` if this thread is inside one already (the call comes from a signal
/// handler that interrupted it, and must not wait for it). Set-ups do not nest: one that needs
/// another has it done first.
#[cfg_attr(ufutex_loom, allow(dead_code))] // the shared table is not modelled
pub(crate) fn setup() -> Option<Setup> {
    if in_setup() {
        return None;
    }
    locking();
    hot::set_setting_up(true);
    Some(Setup(()))
}

impl Drop for Setup {
    fn drop(&mut self) {
        hot::set_setting_up(false);
        unlocked();
    }
}

/// This thread runs a fork's handlers (`fork.rs`), from [`fork_quiet`] until dropped: it holds
/// the tables' gate meanwhile, and in the child resets every bucket, so it counts as busy and
/// as in a wait (a signal handler's wake is deferred and its wait fails, as inside any critical
/// section).
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
pub(crate) struct ForkQuiet(());

/// Start a fork's handlers; `None` if this thread is busy, in a wait or in a set-up: the fork
/// comes from a signal handler that interrupted it, and its interrupted call will go on in
/// the child with what it holds, so the handlers leave every table as it is.
#[cfg_attr(ufutex_loom, allow(dead_code))]
pub(crate) fn fork_quiet() -> Option<ForkQuiet> {
    if hot::waiting() || busy() || in_setup() {
        return None;
    }
    locking();
    hot::set_waiting(true);
    Some(ForkQuiet(()))
}

impl Drop for ForkQuiet {
    fn drop(&mut self) {
        hot::set_waiting(false);
        unlocked();
    }
}

/// Whether this thread is inside a [`setup`]: a call that needs the set-up done comes from a
/// signal handler that interrupted it.
#[cfg_attr(ufutex_loom, allow(dead_code))] // the shared table is not modelled
#[inline]
pub(crate) fn in_setup() -> bool {
    hot::setting_up()
}

/// This thread is in a wait, from [`episode`] until dropped.
pub(crate) struct Episode(());

/// Start a wait; `None` if this thread is busy or already in a wait (the call comes from a
/// signal handler that interrupted it: the wait must not queue).
#[inline]
pub(crate) fn episode() -> Option<Episode> {
    if hot::waiting() || busy() {
        return None;
    }
    // A child made without our fork handlers forgets the parent's waiters before its first
    // wait queues (`fork.rs`).
    #[cfg(not(ufutex_loom))]
    crate::fork_mark::check();
    hot::set_waiting(true);
    Some(Episode(()))
}

impl Drop for Episode {
    #[inline]
    fn drop(&mut self) {
        hot::set_waiting(false);
    }
}

/// Whether this thread has no deferred wake left, nor a page for them (for tests).
#[cfg(all(test, not(ufutex_loom)))]
pub(crate) fn nothing_deferred() -> bool {
    !hot::any() && PENDING.with(|p| p.pop().is_none() && p.pages.load(Ordering::Relaxed).is_null())
}
