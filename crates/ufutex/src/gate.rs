//! The gate: the one lock under which every domain's state changes (`tables.rs`), the list of
//! every domain's tables that a forked child forgets the parent's waiters in, and what such a
//! child learns of a holder of the gate that it does not have.
//!
//! A child made with our fork handlers has the gate held by its own thread (the prepare handler
//! took it: `fork.rs`). A child made without them (`_Fork`, a raw `clone`) may find it held by
//! a thread that was resizing, making, querying or dropping a domain in the parent, or by
//! another thread's prepare handler. It takes the gate over ([`take_over`]), and for that every
//! holder keeps what it changes readable at any instant of its work:
//! - the list of tables is linked through the tables, and each change of it is one atomic
//!   store ([`Gate::list`], [`Gate::unlist`]): the child walks a whole list;
//! - a holder names the domain whose state it is about to lock first ([`Gate::hold_state`]) and
//!   clears the name only after it unlocked it: the child marks that domain *lost*, for its
//!   state lock stays held and its state may be half changed (`Tables`: a lost domain keeps its
//!   tables as they are);
//! - a holder that moves waiters to a new table names both tables and the slot first
//!   ([`Gate::migrating`]) and clears that after the new table is published: a child that finds
//!   the new table not published makes the old one live again and the new one spare
//!   ([`Gate::migration_left`]; the counts' bases, `table.rs`).
//!
//! What the child sees of the holder's work: the fork write-protects the parent's pages and
//! flushes every CPU that runs the process; each store the holder made before that flush on its
//! CPU is in the child's memory, each one after it went to the parent's copy of the page. A
//! store that a `SeqCst` fence or a `Release` store orders before another is performed first, so
//! of the stores these records order, the child sees a prefix of the holder's program: never a
//! state lock held without the name of its domain, never a published table with the migration
//! still named as unfinished, never a list link to a table not yet made.

use crate::lock::RawLock;
use crate::table::Table;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, Ordering};

/// The gate: taken before a domain's own state lock and released after it. A fork's prepare
/// handler that holds it knows that no resize is under way, that no state lock is held and
/// that no table is being made or freed (`fork.rs`). Only cold paths take it: a resize, a
/// thread's first wait in a domain, a domain's queries, making and drop.
#[cfg(not(ufutex_loom))]
static GATE: RawLock = RawLock::new();
#[cfg(ufutex_loom)]
loom::lazy_static! {
    static ref GATE: RawLock = RawLock::new();
}

/// The first listed table (each links the next: `Table::listed_next`); null when none. Changed
/// under the gate, read under it (the child's fresh start holds it too).
static LISTED: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());

/// The `lost` flag of the domain whose state the gate's holder locks, or may have (null: none).
static HOLDING: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());

/// A domain's slot: where its current table is published (`tables.rs`).
type SlotPtr = crate::primitive::AtomicPtr<Table>;

/// A migration under way: the slot whose table is being replaced (null: none), and the two
/// tables (set before the slot).
static MIGRATING_SLOT: AtomicPtr<SlotPtr> = AtomicPtr::new(std::ptr::null_mut());
static MIGRATING_OLD: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());
static MIGRATING_NEW: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());

/// The gate held. The thread counts itself busy meanwhile, as inside a bucket's critical
/// section (`reentry.rs`): a signal handler's call then does not wait for the gate it holds.
pub(crate) struct Gate(());

impl Gate {
    pub(crate) fn take() -> Gate {
        // A child made without our fork handlers forgets the parent's waiters before its first
        // resize, set-up or query (`fork.rs`).
        #[cfg(not(ufutex_loom))]
        crate::fork_mark::check();
        crate::reentry::locking();
        GATE.lock();
        Gate(())
    }

    /// The gate if it is free, without waiting.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn try_take() -> Option<Gate> {
        crate::reentry::locking();
        if GATE.try_lock() {
            return Some(Gate(()));
        }
        crate::reentry::unlocked();
        None
    }

    /// In a forked child: the gate free, whoever slept on it in the parent, and this thread's
    /// busy count given back.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn forget(self) {
        GATE.forget();
        std::mem::forget(self);
        crate::reentry::unlocked();
    }

    /// Add `t` to the list of tables (`t` lives until [`Self::unlist`] took it out, under the
    /// gate). Not under loom: a model's tables die with its execution, the list would not.
    pub(crate) fn list(&self, t: &Table) {
        if cfg!(ufutex_loom) {
            return;
        }
        t.listed_next().store(LISTED.load(Ordering::Relaxed), Ordering::Relaxed);
        // Release: the table is whole, and links the rest, before the list reaches it.
        LISTED.store(std::ptr::from_ref(t).cast_mut(), Ordering::Release);
    }

    /// Take `t` out of the list, if it is in it: one store, to the link that reached it.
    pub(crate) fn unlist(&self, t: &Table) {
        if cfg!(ufutex_loom) {
            return;
        }
        let mut link = &LISTED;
        loop {
            let p = link.load(Ordering::Relaxed);
            if p.is_null() {
                return;
            }
            // SAFETY: a listed table lives until it is unlisted, under the gate, which we hold.
            let next = unsafe { &*p }.listed_next();
            if std::ptr::eq(p, t) {
                // Release: as `list`'s (the next table is whole).
                link.store(next.load(Ordering::Relaxed), Ordering::Release);
                return;
            }
            link = next;
        }
    }

    /// Every listed table.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn listed(&self) -> impl Iterator<Item = &Table> {
        /// The table a link points to.
        fn follow<'g>(link: &AtomicPtr<Table>) -> Option<&'g Table> {
            // Acquire: pairs with `list`'s and `unlist`'s Release (in a child, the parent's).
            let p = link.load(Ordering::Acquire);
            // SAFETY: a listed table lives until it is unlisted, under the gate, which the
            // caller holds; in a child that took the gate over, every link it reads was whole
            // (module docs).
            unsafe { p.as_ref() }
        }
        std::iter::successors(follow(&LISTED), |t| follow(t.listed_next()))
    }

    /// This holder is about to lock the state of the domain whose flag is `lost`
    /// ([`Self::state_released`] once it unlocked it).
    pub(crate) fn hold_state(&self, lost: &AtomicBool) {
        HOLDING.store(std::ptr::from_ref(lost).cast_mut(), Ordering::Relaxed);
        // SeqCst: the name is stored before the state lock's word (module docs).
        fence(Ordering::SeqCst);
    }

    /// The state named by [`Self::hold_state`] is unlocked.
    pub(crate) fn state_released(&self) {
        // Release: after the state lock's release.
        HOLDING.store(std::ptr::null_mut(), Ordering::Release);
    }

    /// This holder moves `slot`'s waiters from `old` to `new` and then publishes `new` in
    /// `slot`; until the guard's drop.
    pub(crate) fn migrating<'g>(&'g self, slot: &SlotPtr, old: &Table, new: &Table) -> Migrating<'g> {
        MIGRATING_OLD.store(std::ptr::from_ref(old).cast_mut(), Ordering::Relaxed);
        MIGRATING_NEW.store(std::ptr::from_ref(new).cast_mut(), Ordering::Relaxed);
        // Release: the tables are named before the slot; SeqCst fence: all three before the
        // first count the migration changes.
        MIGRATING_SLOT.store(std::ptr::from_ref(slot).cast_mut(), Ordering::Release);
        fence(Ordering::SeqCst);
        Migrating(std::marker::PhantomData)
    }

    /// In a child that took the gate over: a migration its holder left unfinished — the old
    /// and the new table and whether the new one was published — and the record cleared.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn migration_left(&self) -> Option<(&Table, &Table, bool)> {
        // Acquire: pairs with `migrating`'s Release: the tables named are this migration's.
        // (Cleared only when set: a child writes no page it need not.)
        let slot = MIGRATING_SLOT.load(Ordering::Acquire);
        // SAFETY: a named slot and its tables belong to a domain whose state the holder held
        // (named lost: never dropped, `Tables`), so they live.
        let slot = unsafe { slot.as_ref() }?;
        MIGRATING_SLOT.store(std::ptr::null_mut(), Ordering::Relaxed);
        let (old, new) = (MIGRATING_OLD.load(Ordering::Relaxed), MIGRATING_NEW.load(Ordering::Relaxed));
        // SAFETY: as above.
        let (old, new) = unsafe { (&*old, &*new) };
        Some((old, new, std::ptr::eq(slot.load(Ordering::Relaxed), new)))
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        GATE.unlock();
        crate::reentry::unlocked();
    }
}

/// A migration named by [`Gate::migrating`]; cleared on drop.
pub(crate) struct Migrating<'g>(std::marker::PhantomData<&'g Gate>);

impl Drop for Migrating<'_> {
    fn drop(&mut self) {
        // Release: after the new table's publication.
        MIGRATING_SLOT.store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// In a child made without the handlers, whose gate a thread it does not have held at the fork:
/// the gate, taken over. The domain whose state that thread held or was about to hold is marked
/// lost; the fresh start settles a migration it left ([`Gate::migration_left`]).
#[cfg(not(ufutex_loom))]
pub(crate) fn take_over() -> Gate {
    // Relaxed: this thread is the child's only one in our code, and what it reads of the lost
    // holder's stores is ordered by that holder's fences (module docs).
    let lost = HOLDING.swap(std::ptr::null_mut(), Ordering::Relaxed);
    // SAFETY: a named flag is a field of a domain whose state the holder held: that domain is
    // not dropped before the holder unlocks its state and clears the name (or, being made, it
    // is the holder's, unreachable to the child, and its memory is still mapped).
    if let Some(lost) = unsafe { lost.as_ref() } {
        lost.store(true, Ordering::Relaxed);
    }
    GATE.forget();
    Gate::try_take().expect("the gate was just freed, and only this thread of the child runs our code")
}
