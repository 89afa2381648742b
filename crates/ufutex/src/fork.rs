//! A forked child has one thread: the one that called `fork`. The kernel's futex gives it no
//! waiters (its private futexes are keyed by its own memory), but our tables are memory, and
//! the child inherits them with every waiter the parent's other threads had queued. A wake in
//! the child would take those nodes for threads that do not exist there and report them woken,
//! while the child's own waiter behind them sleeps on: a lost wakeup. And a bucket lock that
//! another thread held at the fork would stay held in the child for ever.
//!
//! So `pthread_atfork` handlers (installed before the process first queues a waiter:
//! [`watch`]) give the child a fresh start:
//! - *prepare*: take the gate that every domain's state changes under
//!   (`tables::hold_for_fork`): the fork then copies no resize half done and no state lock
//!   held;
//! - *parent*: release it;
//! - *child*: every bucket of every table forgets its queue, its count goes back to its
//!   table's base, its bell and fence start afresh and its lock is free, whatever the parent's
//!   threads were doing in it at the fork; the parker's ring slots and the bucket locks'
//!   sleeper count start at zero, and wakes that signal handlers deferred to the parent's other
//!   threads no longer hold their domains' drop (`Tables::deferrals`). The parent's nodes and
//!   groups stay where they are, unreferenced (each is a few dozen bytes of a thread the child
//!   does not have). The spare lists (the node pool, the group records) start afresh if such a
//!   thread held one's lock at the fork (`brief_lock.rs`).
//!
//! Bucket locks are not held across the fork (glibc holds malloc's arenas' locks so): the
//! child discards what they protect, and taking them would cost the parent a copy-on-write
//! fault per page of buckets when it released them after the fork.
//!
//! A fork from a signal handler that interrupted its thread inside one of our calls (a
//! critical section, a wait or a set-up) changes nothing: the interrupted call goes on in the
//! child with what it holds, so its tables must stay as they were (the child then has the
//! parent's waiters, as before these handlers).
//!
//! A child made without the handlers (glibc's `_Fork`, a raw `clone` without `CLONE_VM`) is
//! told by the fork mark (`fork_mark.rs`, made when the library is loaded: `load.rs`), and its
//! first call that could meet the parent's waiters makes the child handler's fresh start itself
//! ([`unprepared_start`]), unless the fork came from a handler inside one of our calls (as
//! above). Another thread may have held the gate at such a fork (a resize, a domain's set-up,
//! query or drop, another fork's prepare handler): the start takes the gate over (`gate.rs`),
//! and the one domain whose state that thread held is *lost* in the child — its state lock
//! stays held and its state is never read again, its tables stay as they are (a migration of
//! waiters left half done is settled), and a resize of it fails with `ENOTRECOVERABLE`
//! (`Tables`). `tests/fork.rs`'s `…_while_the_gate_is_held_goes_on` makes such children by the
//! hundred.
//!
//! Such a child inherits glibc's locks as they were, too (`_Fork` resets none of malloc's): as
//! POSIX says, it should make only async-signal-safe calls, which waits and wakes are.
//! Children that share the memory (`vfork`, `posix_spawn`, which exec at once) keep
//! everything, as they must.
//!
//! Either kind of fork may come while another thread makes one of the process's first-use
//! set-ups (these handlers' registration in [`watch`], the C ABI's fault handler, the topology,
//! the shared table's segment and slot), which run outside the gate: they are made with
//! `once.rs`'s primitives, which a child never waits on for a thread it does not have.
//!
//! Process-shared words are keyed by object, not by process, and the shared table has
//! handlers of its own (`shared/process.rs`).

use crate::reentry::ForkQuiet;
use crate::tables::ForkHold;
use std::cell::RefCell;

std::thread_local! {
    /// What this thread's prepare handler took, for its parent or child handler.
    static HELD: RefCell<Option<(ForkHold, ForkQuiet)>> = const { RefCell::new(None) };
}

/// Install the handlers, and make the fork mark if loading the library did not, once per
/// process. A child forked while another thread of the parent did this does it again
/// (`once.rs`): the handlers may then be registered twice, and run twice a fork; the second
/// prepare handler finds its thread quiet already (`reentry::fork_quiet`) and takes nothing, so
/// the second parent and child handlers find nothing to release.
pub(crate) fn watch() {
    static ONCE: crate::once::Once = crate::once::Once::new();
    ONCE.call(|_| {
        // SAFETY: the handlers are `extern "C"` functions without arguments, as pthread_atfork
        // requires, and live as long as the library (glibc drops them when the object that
        // registered them is unloaded). Should it fail (ENOMEM), forks go on as without it.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        make_mark();
    });
}

/// Make the fork mark, with this module's fresh start for the children it tells: when the
/// library is loaded (`load.rs`), so that a child made without the handlers is told even if its
/// parent never waited, and by [`watch`] if that did not happen. Such a parent's other threads
/// may still have held the gate (a domain's set-up, query or resize) or a bucket lock at the
/// fork; made at the first wait only, the mark told its children nothing, and their first use
/// of the gate waited for the lost thread for ever (`tests/fork_setup.rs`).
pub(crate) fn make_mark() {
    crate::fork_mark::make(unprepared_start);
}

/// The fresh start of a child made without the handlers (`fork_mark::check` makes it once):
/// the child handler's, without its prepare, where the gate is free and this thread is in none
/// of our calls.
fn unprepared_start() {
    if let Some(quiet) = crate::reentry::fork_quiet() {
        forget(crate::tables::hold_unprepared());
        drop(quiet);
    }
}

/// The child's fresh start (module docs), with the gate held.
fn forget(hold: ForkHold) {
    crate::node_pool::forget_holder();
    crate::group::forget_holder();
    crate::tables::forked();
    crate::lock::forget_sleepers();
    crate::parker::forget_sleepers();
    hold.forget_waiters();
}

extern "C" fn prepare() {
    // This process may itself be a child made without the handlers: its own start first.
    crate::fork_mark::check();
    // A thread whose storage is being torn down takes nothing (it could not keep it).
    if HELD.try_with(|_| ()).is_err() {
        return;
    }
    // (Nor does the second of two registrations of the handlers, `watch`: this thread is
    // quiet already, so `fork_quiet` says no.)
    let Some(quiet) = crate::reentry::fork_quiet() else {
        return;
    };
    let hold = crate::tables::hold_for_fork();
    HELD.with(|h| *h.borrow_mut() = Some((hold, quiet)));
}

/// What the prepare handler left, if it took anything.
fn take() -> Option<(ForkHold, ForkQuiet)> {
    HELD.try_with(|h| h.borrow_mut().take()).ok().flatten()
}

extern "C" fn parent() {
    if let Some((hold, quiet)) = take() {
        hold.release();
        drop(quiet);
    }
}

extern "C" fn child() {
    if let Some((hold, quiet)) = take() {
        forget(hold);
        drop(quiet);
    }
    // Wiped by this fork too: decided here, whatever the prepare handler took.
    crate::fork_mark::started();
}

#[cfg(test)]
mod tests {
    use crate::tables::{NumaMode, Slots, Tables};

    extern "C" {
        // glibc 2.34 and later: a fork without the atfork handlers.
        fn _Fork() -> libc::pid_t;
    }

    /// In a child made without the handlers: exit at once with 3 if the child cannot tell it is
    /// one, its mark not wiped (an emulator that takes `MADV_WIPEONFORK` and ignores it,
    /// qemu-user 7.2): nothing to test there.
    fn exit_if_the_mark_was_not_wiped() {
        if crate::fork_mark::reads_started() == Some(true) {
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(3) };
        }
    }

    /// A child's exit `status`, or none (said so) if [`exit_if_the_mark_was_not_wiped`] ended it.
    fn unless_skipped(status: i32) -> Option<i32> {
        if status == 3 {
            eprintln!("skipped: the child's mark was not wiped (MADV_WIPEONFORK ignored by an emulator)");
            return None;
        }
        Some(status)
    }

    /// A wake deferred to a thread before the fork holds the tables' drop in the parent, which
    /// has that thread, and not in the child, which does not (its drop would wait for ever).
    #[test]
    fn a_deferral_from_before_the_fork_does_not_hold_the_childs_drop() {
        super::watch();
        let t = Tables::new(Slots::Fixed(2), NumaMode::Off).expect("a small table");
        // As by a signal handler, for a thread that is busy at the fork.
        t.deferral_made();
        // SAFETY: the child only reads the count, drops the tables (no deferral left to wait
        // for) and exits with `_exit`: no lock another thread held is taken.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let code = if t.deferrals() == 0 { 0 } else { 1 };
            drop(t);
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer and `pid` our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child saw its count: {status:#x}");
        assert_eq!(t.deferrals(), 1, "the parent still has the thread that will make it");
        t.deferral_done();
        assert_eq!(t.deferrals(), 0);
    }

    /// A child forked while another thread of the parent was registering the handlers does it
    /// again (`watch`, `once.rs`), and has them twice if that thread had got that far: a fork
    /// still takes the gate once, the parent gets it back, and the child starts with it free
    /// (a second prepare handler that took it again would wait for itself for ever).
    #[test]
    fn handlers_registered_twice_take_the_gate_once() {
        use crate::test_child::Child;
        super::watch();
        // SAFETY: as in `watch`: the handlers are argument-less `extern "C"` functions that live
        // as long as the process. (From here on, every fork of this test process runs them
        // twice, as the child of such a fork would.)
        let twice = unsafe { libc::pthread_atfork(Some(super::prepare), Some(super::parent), Some(super::child)) };
        assert_eq!(twice, 0, "pthread_atfork");
        let t = Tables::new(Slots::Fixed(2), NumaMode::Off).expect("a small table");
        // SAFETY: the child resizes its copy of the tables (their gate, which the handlers
        // left free, and the allocator, which glibc's fork leaves usable) and exits with
        // `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let code = match t.set_slots(Slots::Fixed(4), false) {
                Ok(()) if t.slots() == 4 => 0,
                _ => 1,
            };
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        assert_eq!(Child(pid).join_within(std::time::Duration::from_secs(20)), 0, "the child resized");
        t.set_slots(Slots::Fixed(8), false).expect("the parent's gate is free");
        assert_eq!(t.slots(), 8);
    }

    /// A child made without the fork handlers (`_Fork`) whose first call takes the start gets
    /// a signal just then (`fork_mark::RAISE_IN_START`), whose handler makes a call of ours too
    /// (the mark's check, as each does): the handler runs once the start is made, and the child
    /// goes on (before, it waited for its own thread for ever).
    #[test]
    fn a_signal_while_the_start_is_made_waits_for_it() {
        use crate::fork_mark::{check, reads_started, RAISE_IN_START};
        use crate::test_child::Child;
        use std::sync::atomic::{AtomicBool, Ordering};
        /// The handler ran, and found the start made.
        static HANDLED: AtomicBool = AtomicBool::new(false);
        extern "C" fn handler(_: libc::c_int) {
            check();
            HANDLED.store(reads_started() == Some(true), Ordering::Relaxed);
        }
        super::watch(); // the mark, with the start a child makes
        assert!(reads_started().is_some(), "the kernel wipes the mark's page (4.14 and later)");
        // SAFETY: the child runs only the start (our own memory; a gate another thread held at
        // the fork is taken over: `tables::hold_unprepared`), a handler and `_exit`.
        let pid = unsafe { _Fork() };
        assert!(pid >= 0, "_Fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            exit_if_the_mark_was_not_wiped();
            // SAFETY: `handler` is an `extern "C" fn(c_int)`; the child has this one thread.
            unsafe { libc::signal(libc::SIGUSR1, handler as extern "C" fn(libc::c_int) as libc::sighandler_t) };
            RAISE_IN_START.store(libc::SIGUSR1, Ordering::Relaxed);
            check();
            let code = if HANDLED.load(Ordering::Relaxed) { 0 } else { 2 };
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        // The child ends at once, or never (then the join fails the test and the drop ends it).
        if let Some(status) = unless_skipped(Child(pid).join_within(std::time::Duration::from_secs(20))) {
            assert_eq!(status, 0, "the handler ran after the start was made");
        }
    }

    /// A child forked while another thread held the node pool's and the record list's locks
    /// (as at its first wait or its exit) starts both lists afresh (`brief_lock.rs`): a node
    /// of the child's comes from the pool, and a record it gives back serves its next take.
    /// Before, both locks stayed held in the child for ever: each of its threads kept its node
    /// in its own memory, yielded 64 times at each take and give of a record, mapped a page of
    /// new records and left the record it gave back unused. With and without the handlers.
    #[test]
    fn a_child_forked_while_the_spare_lists_were_held_has_them() {
        // SAFETY: the child makes only our calls (its own memory, `mmap`) and `_exit`.
        let with_handlers = || unsafe { libc::fork() };
        // SAFETY: as above.
        let without = || unsafe { _Fork() };
        super::watch(); // the handlers, and the mark for `_Fork`'s child
        assert_eq!(forked_while_the_lists_are_held(&with_handlers, false), 0, "fork: the child's lists");
        assert_eq!(forked_while_the_lists_are_held(&without, true), 0, "_Fork: the child's lists");
    }

    /// The exit status of a child `fork` made while another thread held both spare lists'
    /// locks: 0 if it had both. `unprepared`: a fork without the handlers, whose child may not
    /// be able to tell that it is one (below; then it is not tested).
    fn forked_while_the_lists_are_held(fork: &dyn Fn() -> libc::pid_t, unprepared: bool) -> i32 {
        use crate::parker::{Park, Parker};
        use crate::test_child::Child;
        use std::sync::mpsc::channel;
        let (held_tx, held) = channel();
        let (release, release_rx) = channel::<()>();
        let holder = std::thread::spawn(move || {
            let guards = (crate::node_pool::hold(), crate::group::hold());
            held_tx.send(()).expect("the test waits");
            let _ = release_rx.recv();
            drop(guards);
        });
        held.recv().expect("the holder took the locks");
        let pid = fork();
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            if unprepared {
                exit_if_the_mark_was_not_wiped();
            }
            crate::fork_mark::check();
            let parker = Parker::new();
            let pooled = crate::node_pool::Slot::take(&parker).is_some();
            let given = crate::group::take().expect("a record");
            // SAFETY: the record just taken, given back with no pointer kept but its address.
            unsafe { crate::group::give(given) };
            let again = crate::group::take().expect("a record");
            let code = match (pooled, again == given) {
                (true, true) => 0,
                (false, _) => 1,
                (true, false) => 2,
            };
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let status = Child(pid).join_within(std::time::Duration::from_secs(20));
        release.send(()).expect("the holder waits");
        holder.join().expect("the holder");
        unless_skipped(status).unwrap_or(0)
    }
}
