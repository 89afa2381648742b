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
//! - `held`: the bucket locks it holds or is taking, plus one while it runs deferred wakes;
//!   counted up before a lock is taken ([`locking`]) and down after it is released
//!   ([`unlocked`]), so a handler never sees 0 while the thread is inside a critical section;
//! - `waiting`: it is inside a wait ([`Episode`]), from before its node is taken until the
//!   node is idle again;
//! - `pending`: wakes that handlers deferred ([`defer`]), run by the thread itself when its
//!   last bucket lock is released ([`unlocked`] → `drain`), before the call that held it
//!   goes on.
//!
//! What a call does when its thread is busy (`held` not 0):
//! - a wake, a requeue or a wake-op that finds a waiter to lock for is deferred: it reports 0
//!   woken, and its waiters are woken when the thread leaves the critical section (a requeue's
//!   moves become wakes; a wake-op applies its operation at once);
//! - a wait fails with `EINTR` (`WaitError::Interrupted`) without queueing, as does a wait
//!   while the thread is in a wait ([`episode`]). A caller's loop then polls its word.
//!
//! Only the thread and the handlers that interrupt it touch its state, and a handler runs to
//! its end before the code it interrupted goes on. The counters are therefore plain cells,
//! changed by balanced steps (a handler leaves each as it found it), with compiler fences
//! where their order against a lock's atomics matters. `pending` is the one structure both
//! add to and take from; its protocol is at [`Pending`].

use crate::key::Key;
use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{compiler_fence, AtomicPtr, AtomicUsize, Ordering};

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
/// top when the top is full and never unlinked (a page could be pushed to between a look at
/// its length and its unlinking); an empty page is simply passed over. They stay for the
/// thread's life: only a thread whose handlers deferred more than [`INLINE`] wakes inside one
/// critical section has any, and then as many as it needed at once.
struct Pending {
    inline: Slots<INLINE>,
    pages: AtomicPtr<Page>,
}

impl Pending {
    /// Add `d`; `false` if no page could be mapped for it.
    fn push(&self, d: Deferred) -> bool {
        loop {
            let top = self.pages.load(Ordering::Relaxed);
            // SAFETY: a linked page is never unmapped (the type docs).
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
        // SAFETY: as in `push`.
        while let Some(p) = unsafe { page.as_ref() } {
            if let Some(d) = p.slots.pop() {
                return Some(d);
            }
            page = p.next;
        }
        self.inline.pop()
    }

    fn is_empty(&self) -> bool {
        let mut page = self.pages.load(Ordering::Relaxed);
        // SAFETY: as in `push`.
        while let Some(p) = unsafe { page.as_ref() } {
            if p.slots.len.load(Ordering::Relaxed) != 0 {
                return false;
            }
            page = p.next;
        }
        self.inline.len.load(Ordering::Relaxed) == 0
    }
}

/// A new, empty page whose `next` is `next`; `None` if none could be mapped.
fn map_page(next: *mut Page) -> Option<*mut Page> {
    // SAFETY: an anonymous private mapping of one page: no pointer of ours is involved.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let page = p.cast::<Page>();
    // SAFETY: fresh, page-aligned, writable memory of 4 KiB, which holds a `Page` (asserted
    // above), and which nobody else knows of.
    unsafe { page.write(Page { next, slots: Slots::new() }) };
    Some(page)
}

/// Give back a page from [`map_page`] that was never linked.
fn unmap_page(page: *mut Page) {
    // SAFETY: `page` is a mapping of 4 KiB from `map_page` that nothing references.
    unsafe { libc::munmap(page.cast(), 4096) };
}

/// One thread's state (module docs).
struct State {
    held: Cell<u32>,
    waiting: Cell<bool>,
    pending: Pending,
}

#[cfg(not(ufutex_loom))]
std::thread_local! {
    static STATE: State = const {
        State {
            held: Cell::new(0),
            waiting: Cell::new(false),
            pending: Pending { inline: Slots::new(), pages: AtomicPtr::new(ptr::null_mut()) },
        }
    };
}

// Under loom, loom's thread-locals: its model threads share one OS thread.
#[cfg(ufutex_loom)]
loom::thread_local! {
    static STATE: State = State {
        held: Cell::new(0),
        waiting: Cell::new(false),
        pending: Pending { inline: Slots::new(), pages: AtomicPtr::new(ptr::null_mut()) },
    };
}

/// Before a bucket lock is taken.
#[inline(always)]
pub(crate) fn locking() {
    STATE.with(|s| s.held.set(s.held.get() + 1));
    // The count is up before the lock's atomic (a handler in between sees the thread busy).
    compiler_fence(Ordering::SeqCst);
}

/// After a bucket lock was released: the last one runs the wakes that handlers deferred.
#[inline(always)]
pub(crate) fn unlocked() {
    // The count goes down after the unlock's atomic.
    compiler_fence(Ordering::SeqCst);
    STATE.with(|s| {
        let held = s.held.get() - 1;
        s.held.set(held);
        if held == 0 && !s.pending.is_empty() {
            drain(s);
        }
    });
}

/// Whether this thread is inside a bucket's critical section or running deferred wakes: a
/// call that would lock is then made from a signal handler that interrupted it.
#[inline]
pub(crate) fn busy() -> bool {
    STATE.with(|s| s.held.get() != 0)
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
    if !STATE.with(|s| s.pending.push(d)) {
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
fn drain(s: &State) {
    loop {
        s.held.set(1);
        compiler_fence(Ordering::SeqCst);
        while let Some(d) = s.pending.pop() {
            (d.run)(d.ctx, d.key, d.n, d.mask);
        }
        compiler_fence(Ordering::SeqCst);
        s.held.set(0);
        compiler_fence(Ordering::SeqCst);
        // A handler between the last pop and the store above deferred one more.
        if s.pending.is_empty() {
            return;
        }
    }
}

/// This thread is in a wait, from [`episode`] until dropped.
pub(crate) struct Episode(());

/// Start a wait; `None` if this thread is busy or already in a wait (the call comes from a
/// signal handler that interrupted it: the wait must not queue).
#[inline]
pub(crate) fn episode() -> Option<Episode> {
    let ok = STATE.with(|s| {
        if s.waiting.get() || s.held.get() != 0 {
            return false;
        }
        s.waiting.set(true);
        true
    });
    compiler_fence(Ordering::SeqCst);
    // (Not `then_some`: its argument is built either way, and its drop would end the wait
    // that is in progress.)
    ok.then(|| Episode(()))
}

impl Drop for Episode {
    #[inline]
    fn drop(&mut self) {
        compiler_fence(Ordering::SeqCst);
        STATE.with(|s| s.waiting.set(false));
    }
}

/// Whether this thread has no deferred wake left (for tests).
#[cfg(all(test, not(ufutex_loom)))]
pub(crate) fn nothing_deferred() -> bool {
    STATE.with(|s| s.pending.is_empty())
}
