//! First-use initialisations that a fork cannot leave half done for ever.
//!
//! std's `Once` and `OnceLock` make every caller wait for the thread that runs the
//! initialisation. A thread that was running one when another thread forked does not exist in
//! the child, so there the state says "running" for ever, and the child's first call that needs
//! the value waits for ever. The fork handlers do not cover these: they hold the tables' gate,
//! and a process's first-use work (its topology read from sysfs, its first domain's thread
//! counter, the fork handlers' own registration, the C ABI's fault handler) runs outside it. A
//! plain `fork()` while another thread makes its first call is enough.
//!
//! So nothing here waits for a thread of another process:
//! - [`RacyWord`] and [`Racy`]: a value that every thread which finds it missing computes for
//!   itself; the first to finish publishes it (one compare-and-swap), the others drop theirs.
//!   Nobody waits, so a thread lost at a fork leaves nothing behind. For values whose
//!   computation may run twice (the page size, a device number, sysfs, an environment
//!   variable). A [`RacyWord`] keeps its value (a word) in place and allocates nothing, for the
//!   values a wait may need first inside a signal handler that interrupted the allocator
//!   (`pages.rs`); a [`Racy`] publishes a `Box`, for values that allocate anyway.
//! - [`Once`]: an action that runs once per process (registering the fork handlers, installing
//!   a signal handler). Its state names the running thread by process and thread id. A caller
//!   that finds it run by another process — its own copy of a parent's state, made by a fork in
//!   the middle of the action — knows that thread is not here, and takes the action over.
//!   Callers of the same process wait for it, as for std's `Once`; the running thread itself,
//!   called again from a signal handler in the middle of the action, goes on without it.
//! - [`SetupLock`]: a lock for set-ups whose holder publishes what it made with one store (the
//!   shared table's process slot, a namespace's mapping), named and taken over as a [`Once`]'s
//!   run is.
//! - [`PerProcess`]: a value that only the process which published it may use (the shared
//!   table's process slot): its pointer, trusted only where a mark that every fork wipes says
//!   the pointer is this process's own. A child reads its parent's value as missing and makes
//!   its own, whichever of its threads comes first; no thread of it ever takes the parent's.
//!
//! A process id is not reused while its process lives, so a parent's never names a thread of
//! its child. (A grandchild whose copy names a grandparent that has since died, and whose own
//! id is that grandparent's, handed out again, would wait as for a thread of its own: ids come
//! back only after `pid_max` more processes, and only for a copy made inside a first use.)
//!
//! [`RacyWord`] and [`Racy`] use std's atomics even under loom (as `Bell::homed` does), so that
//! statics of the modules loom builds can hold them: their one publishing compare-and-swap is
//! not part of any protocol the models explore. [`Once`] and [`SetupLock`] take the crate's
//! atomics; their models are below.

// Under loom only the models use `Once` and `SetupLock` (their users, the fork handlers, the
// C ABI and the shared table, are not built there).
#![cfg_attr(ufutex_loom, allow(dead_code))]

use crate::primitive::{yield_now, AtomicU32, AtomicU64, Ordering};
use std::marker::PhantomData;
use std::sync::atomic::AtomicPtr;

/// A word computed on first use, published once, never waited for, kept in place (module
/// docs). 0 means "not yet": the values published are never 0.
pub(crate) struct RacyWord(std::sync::atomic::AtomicU64);

impl RacyWord {
    pub(crate) const fn new() -> RacyWord {
        RacyWord(std::sync::atomic::AtomicU64::new(0))
    }

    /// The word, if one was published.
    #[inline]
    pub(crate) fn get(&self) -> Option<u64> {
        // Acquire: pairs with `publish`'s Release (what its maker did before, such as a
        // mapping's advice, is done).
        Some(self.0.load(Ordering::Acquire)).filter(|&v| v != 0)
    }

    /// The word: the published one, or `make()`'s (never 0), published now unless another
    /// thread published one first (then that one).
    #[inline]
    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> u64) -> u64 {
        self.get_or_make(make, |_| {})
    }

    /// [`RacyWord::get_or_init`], where a word made stands for something to give back
    /// (`discard` gets it when another thread's word was published first).
    #[inline]
    pub(crate) fn get_or_make(&self, make: impl FnOnce() -> u64, discard: impl FnOnce(u64)) -> u64 {
        match self.get() {
            Some(v) => v,
            None => self.publish(make(), discard),
        }
    }

    /// [`RacyWord::get_or_make`] for a value that may be missing (`make` gives `None`, which is
    /// published and kept too), below 2^63: kept as `1 << 63 | value`, or 1 for none.
    #[inline]
    pub(crate) fn get_or_make_option(
        &self,
        make: impl FnOnce() -> Option<u64>,
        discard: impl FnOnce(u64),
    ) -> Option<u64> {
        const SOME: u64 = 1 << 63;
        const NONE: u64 = 1;
        let kept = self.get_or_make(
            || {
                make().map_or(NONE, |v| {
                    debug_assert!(v < SOME, "values stay below 2^63");
                    SOME | v
                })
            },
            |mine| {
                if mine != NONE {
                    discard(mine & !SOME);
                }
            },
        );
        (kept & SOME != 0).then_some(kept & !SOME)
    }

    #[cold]
    fn publish(&self, mine: u64, discard: impl FnOnce(u64)) -> u64 {
        debug_assert_ne!(mine, 0, "0 means not yet");
        // Release: what the maker did first; Acquire on failure: what the winner's did.
        match self.0.compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => mine,
            Err(theirs) => {
                discard(mine);
                theirs
            }
        }
    }
}

/// A value computed on first use, published once, never waited for (module docs).
pub(crate) struct Racy<T> {
    /// Null until a value is published; then a leaked `Box<T>`, freed only by `drop`.
    value: AtomicPtr<T>,
    /// It owns a `T` (so it is `Send` only where `T` is).
    _owns: PhantomData<Box<T>>,
}

// SAFETY: a shared `Racy<T>` hands out `&T` to every thread (so `T: Sync`), and a value that
// one thread made and published is dropped by whichever thread drops the `Racy` (so `T: Send`).
unsafe impl<T: Send + Sync> Sync for Racy<T> {}

impl<T> Racy<T> {
    pub(crate) const fn new() -> Racy<T> {
        Racy { value: AtomicPtr::new(std::ptr::null_mut()), _owns: PhantomData }
    }

    /// The value, if one was published.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the publishing Release, so the value's contents are seen whole.
        let p = self.value.load(Ordering::Acquire);
        // SAFETY: non-null only once a whole `Box<T>` was published; it is freed only by
        // `drop`, which `&self` rules out while the reference lives.
        unsafe { p.as_ref() }
    }

    /// The value: the published one, or `make()`'s, published now unless another thread
    /// published one first (then `make()`'s is dropped and the other returned).
    #[inline]
    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> T) -> &T {
        match self.get() {
            Some(v) => v,
            None => self.publish(make()),
        }
    }

    #[cold]
    fn publish(&self, v: T) -> &T {
        let mine = Box::into_raw(Box::new(v));
        // Release: the value's contents before the pointer; Acquire on failure: the winner's.
        match self.value.compare_exchange(std::ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: `mine` is the Box just published, freed only by `drop` (see `get`).
            Ok(_) => unsafe { &*mine },
            Err(theirs) => {
                // SAFETY: `mine` was never published: this thread still owns it alone.
                drop(unsafe { Box::from_raw(mine) });
                // SAFETY: `theirs` is the published Box (non-null: the swap expected null).
                unsafe { &*theirs }
            }
        }
    }
}

impl<T> Drop for Racy<T> {
    fn drop(&mut self) {
        let p = *self.value.get_mut();
        if !p.is_null() {
            // SAFETY: the published Box, owned by `self`, which no one borrows any more.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// A value of the process that published it (module docs): the pointer, and a mark outside it
/// (a word in a page that a fork wipes: `fork_mark::shared_word`) that reads 1 only in that
/// process. A child inherits the parent's pointer and a mark of 0, so it reads no value until
/// one of its threads publishes its own, under a set-up lock.
///
/// The order is the point: the publisher stores the pointer, then the mark (Release); a reader
/// loads the mark (Acquire), then the pointer. Read the other way round, a thread of a fresh
/// child could load its parent's pointer, then find the mark that a sibling had just set, and
/// take the parent's value for its own. (The shared table's process slot was read so until
/// the seventy-seventh session: threads of one child then operated in two slots, the child's
/// and the parent's, and the waits made in the parent's were never found by the requeues and
/// wakes meant for them; `tests/shared_bell.rs` lost waiters so about once in twenty seconds.)
/// Modelled below (`a_child_never_takes_its_parents_value`).
pub(crate) struct PerProcess<T: 'static> {
    value: crate::primitive::AtomicPtr<T>,
}

impl<T: 'static> PerProcess<T> {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> PerProcess<T> {
            PerProcess { value: crate::primitive::AtomicPtr::new(std::ptr::null_mut()) }
        }
    }

    /// This process's value, if it published one (`mark`: the word its publisher set).
    #[inline]
    pub(crate) fn get(&self, mark: &AtomicU32) -> Option<&'static T> {
        // Acquire: pairs with `publish`'s Release store of the mark, made after the pointer's,
        // so a mark of 1 brings this process's pointer (and the value behind it) with it.
        if mark.load(Ordering::Acquire) != 1 {
            return None;
        }
        // Relaxed would do after the mark's Acquire; Acquire costs nothing more on x86-64.
        let p = self.value.load(Ordering::Acquire);
        // SAFETY: the mark reads 1 only after `publish` stored a `&'static T` in this process
        // (a fork wipes it, and only `publish` sets it).
        unsafe { p.as_ref() }
    }

    /// The pointer as found, whoever published it: in a fresh child, the parent's (never to be
    /// used, only kept reachable).
    pub(crate) fn inherited(&self) -> *const T {
        self.value.load(Ordering::Relaxed)
    }

    /// Publish this process's value: the caller holds the set-up lock that serialises
    /// publishers, and `mark` is the word that a fork wipes.
    pub(crate) fn publish(&self, mark: &AtomicU32, v: &'static T) {
        self.value.store(std::ptr::from_ref(v).cast_mut(), Ordering::Release);
        // Release, after the pointer: see `get`.
        mark.store(1, Ordering::Release);
    }
}

/// [`Once`]'s state: [`NEW`], [`DONE`], or the running thread, `(pid << 32) | tid`.
const NEW: u64 = 0;
const DONE: u64 = u64::MAX;

/// How a [`Once`]'s action came to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Run {
    /// The first run in this process's history.
    First,
    /// Taken over from a thread of another process (a parent that forked while running it):
    /// that run may have done any part of the action, whose effects the child inherited.
    TakenOver,
}

/// An action run once per process, that a forked child takes over (module docs).
pub(crate) struct Once {
    state: AtomicU64,
}

impl Once {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> Once {
            Once { state: AtomicU64::new(NEW) }
        }
    }

    /// Run `action` unless it ran (or runs) in this process; return once it has run, or at
    /// once if this very thread is running it (a signal handler that interrupted the action).
    #[inline]
    pub(crate) fn call(&self, action: impl FnOnce(Run)) {
        // Acquire: what the action did happens before the caller goes on.
        if self.state.load(Ordering::Acquire) != DONE {
            self.call_as(me(), action);
        }
    }

    /// [`Once::call`] by the thread `me` (`(pid << 32) | tid`).
    #[cold]
    fn call_as(&self, me: u64, action: impl FnOnce(Run)) {
        let mut expected = NEW;
        loop {
            // Acquire (both ways): a taken-over run sees what the lost one did before the
            // fork (the child's memory is a copy, so this orders nothing across processes:
            // it pairs with this process's own DONE).
            match self.state.compare_exchange(expected, me, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    action(if expected == NEW { Run::First } else { Run::TakenOver });
                    // Release: publishes the action to every caller that reads DONE.
                    self.state.store(DONE, Ordering::Release);
                    return;
                }
                Err(DONE) => return,
                Err(s) if s == me => return, // this thread runs it: a handler inside the action
                Err(s) if same_process(s, me) => {
                    // Another thread of this process runs it: wait for it.
                    yield_now();
                    expected = NEW;
                }
                // A thread of another process ran it, and left it half done when this one was
                // forked: take it over (a race with another thread of this process is settled
                // by the swap).
                Err(s) => expected = s,
            }
        }
    }
}

/// A lock for set-ups (the shared table's segment and process slot, a namespace's mapping and
/// its levels, the known mappings) that a forked child takes over from a holder it does not
/// have: its holder is named as a [`Once`]'s runner is. Only for set-ups that leave nothing half
/// done that the child would trip on (what they publish, they publish with one store), or that
/// mend what such a holder left. Waiters of the holder's process yield until it is free:
/// set-ups are short and rare.
pub(crate) struct SetupLock {
    /// 0, or the holder (`(pid << 32) | tid`).
    holder: AtomicU64,
}

/// A held [`SetupLock`], released on drop.
pub(crate) struct SetupGuard<'a>(&'a SetupLock);

impl SetupLock {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> SetupLock {
            SetupLock { holder: AtomicU64::new(0) }
        }
    }

    /// Take the lock: at once if it is free or its holder is not in this process (a forked
    /// child's copy of a parent's holder); else once this process's holder releases it. Not
    /// for a thread that holds it already (it would wait for itself, as with any lock).
    pub(crate) fn lock(&self) -> SetupGuard<'_> {
        self.lock_as(me())
    }

    /// [`SetupLock::lock`] by the thread `me`.
    fn lock_as(&self, me: u64) -> SetupGuard<'_> {
        let mut expected = 0;
        loop {
            // Acquire: what the last holder of this process did before its release.
            match self.holder.compare_exchange(expected, me, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return SetupGuard(self),
                Err(h) if same_process(h, me) => {
                    debug_assert_ne!(h, me, "a set-up lock taken again by its holder");
                    yield_now();
                    expected = 0;
                }
                // Held in another process: a parent's holder, copied by the fork that made this
                // one, which does not have that thread.
                Err(h) => expected = h,
            }
        }
    }
}

impl SetupLock {
    /// Whether a thread of another process holds the lock: in a forked child, a holder of the
    /// parent's that the child does not have (what it was changing may be half changed).
    pub(crate) fn held_elsewhere(&self) -> bool {
        // Relaxed: the holder's name is the whole answer.
        let h = self.holder.load(Ordering::Relaxed);
        h != 0 && !same_process(h, me())
    }
}

impl Drop for SetupGuard<'_> {
    fn drop(&mut self) {
        // Release: what this holder did, for the next one.
        self.0.holder.store(0, Ordering::Release);
    }
}

/// Whether two threads, as [`me`] names them, are of the same process.
fn same_process(a: u64, b: u64) -> bool {
    a >> 32 == b >> 32
}

/// This thread, as a [`Once`] names its runner: `(pid << 32) | tid` (each below 2^22).
#[cfg(not(ufutex_loom))]
fn me() -> u64 {
    // SAFETY: getpid and gettid have no preconditions and cannot fail.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    (u64::from(pid as u32) << 32) | u64::from(tid as u32)
}

/// Under loom the models name their threads themselves ([`Once::call_as`]).
#[cfg(ufutex_loom)]
fn me() -> u64 {
    1 << 32 | 1
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::{Once, Racy, RacyWord, Run, SetupLock};
    use crate::test_child::Child;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Counts the values of its kind dropped.
    struct Counted<'a>(u32, &'a AtomicUsize);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn racers_all_get_the_one_value_published_and_the_others_are_dropped() {
        for _ in 0..200 {
            let dropped = AtomicUsize::new(0);
            let racy = Racy::new();
            let got: Vec<u32> = std::thread::scope(|s| {
                let racers: Vec<_> = (0..4)
                    .map(|i| {
                        let (racy, dropped) = (&racy, &dropped);
                        s.spawn(move || racy.get_or_init(|| Counted(i, dropped)).0)
                    })
                    .collect();
                racers.into_iter().map(|r| r.join().unwrap()).collect()
            });
            let kept = racy.get().expect("published").0;
            assert!(got.iter().all(|&v| v == kept), "{got:?} vs {kept}");
            let made = dropped.load(Ordering::Relaxed) + 1;
            assert!((1..=4).contains(&made));
            drop(racy);
            assert_eq!(dropped.load(Ordering::Relaxed), made, "every value made is dropped once");
        }
    }

    #[test]
    fn a_word_is_published_once_and_every_racer_reads_it() {
        for _ in 0..200 {
            let word = RacyWord::new();
            let got: Vec<u64> = std::thread::scope(|s| {
                let racers: Vec<_> = (1..=4)
                    .map(|i| {
                        s.spawn({
                            let word = &word;
                            move || word.get_or_init(|| i)
                        })
                    })
                    .collect();
                racers.into_iter().map(|r| r.join().unwrap()).collect()
            });
            let kept = word.get().expect("published");
            assert!(got.iter().all(|&v| v == kept), "{got:?} vs {kept}");
            let mut discarded = 0;
            assert_eq!(word.get_or_make(|| 9, |_| discarded += 1), kept);
            assert_eq!(discarded, 0, "nothing made once published");
            assert_eq!(word.publish(9, |v| discarded = v), kept);
            assert_eq!(discarded, 9);
        }
    }

    #[test]
    fn a_missing_value_is_published_too_and_every_losers_value_given_back() {
        let none = RacyWord::new();
        assert_eq!(none.get_or_make_option(|| None, |_| panic!("nothing to give back")), None);
        assert_eq!(none.get_or_make_option(|| panic!("kept: not made again"), |_| {}), None);
        for _ in 0..200 {
            let word = RacyWord::new();
            let given_back = std::sync::Mutex::new(Vec::new());
            let got: Vec<Option<u64>> = std::thread::scope(|s| {
                let racers: Vec<_> = (0..4u64)
                    .map(|i| {
                        let (word, given_back) = (&word, &given_back);
                        s.spawn(move || word.get_or_make_option(|| Some(i), |v| given_back.lock().unwrap().push(v)))
                    })
                    .collect();
                racers.into_iter().map(|r| r.join().unwrap()).collect()
            });
            let kept = got[0].expect("a value (0 too) is kept");
            assert!(got.iter().all(|&v| v == Some(kept)), "{got:?}");
            // Every value made is kept or given back, as it was made; none twice.
            let mut all = given_back.into_inner().unwrap();
            assert!(!all.contains(&kept), "the kept value given back");
            all.push(kept);
            all.sort_unstable();
            let made = all.len();
            all.dedup();
            assert_eq!(all.len(), made, "a value given back twice: {all:?}");
            assert!(all.iter().all(|v| *v < 4), "given back as made: {all:?}");
        }
    }

    #[test]
    fn a_once_runs_its_action_once_and_its_callers_wait_for_it() {
        let once = Once::new();
        let runs = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    once.call(|run| {
                        assert_eq!(run, Run::First);
                        std::thread::sleep(Duration::from_millis(20));
                        runs.fetch_add(1, Ordering::Relaxed);
                    });
                    assert_eq!(runs.load(Ordering::Relaxed), 1, "returned before the action ran");
                });
            }
        });
        once.call(|_| panic!("ran twice"));
    }

    #[test]
    fn a_setup_lock_has_one_holder_at_a_time() {
        let lock = SetupLock::new();
        let (inside, entries) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        let _held = lock.lock();
                        assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
                        entries.fetch_add(1, Ordering::Relaxed);
                        inside.fetch_sub(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(entries.load(Ordering::Relaxed), 4000);
    }

    #[test]
    fn a_once_called_again_by_its_runner_goes_on() {
        let once = Once::new();
        let inner = AtomicUsize::new(0);
        once.call(|_| {
            once.call(|_| panic!("ran inside itself"));
            inner.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(inner.load(Ordering::Relaxed), 1);
    }

    /// A thread is in the middle of the first use of a [`RacyWord`], a [`Racy`] and a [`Once`],
    /// holding a [`SetupLock`] (blocked there for the test), when another thread forks: the
    /// child's own first uses go on, the once and the lock taken over, where std's `OnceLock`,
    /// `Once` and `Mutex` would wait for ever for a thread the child does not have.
    #[test]
    fn a_child_forked_during_a_first_use_makes_it_itself() {
        static RACY: Racy<u64> = Racy::new();
        static WORD: RacyWord = RacyWord::new();
        static ONCE: Once = Once::new();
        static LOCK: SetupLock = SetupLock::new();
        let (inside, wait_inside) = mpsc::channel();
        let (release, held) = mpsc::channel::<()>();
        let lost = std::thread::spawn(move || {
            let v = *RACY.get_or_init(|| {
                WORD.get_or_init(|| {
                    ONCE.call(|_| {
                        let _held = LOCK.lock();
                        inside.send(()).unwrap();
                        held.recv().unwrap();
                    });
                    1
                })
            });
            assert_eq!(v, 1, "the parent keeps its own first value");
        });
        wait_inside.recv().unwrap();
        // SAFETY: the child calls only our functions and `_exit`; glibc's fork leaves malloc,
        // which the child's `Racy` uses, usable in the child.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let mut taken_over = false;
            ONCE.call(|run| taken_over = run == Run::TakenOver);
            let again = std::cell::Cell::new(false);
            ONCE.call(|_| again.set(true));
            drop(LOCK.lock()); // taken over
            drop(LOCK.lock()); // and free again
            let v = (*RACY.get_or_init(|| 2), WORD.get_or_init(|| 2));
            let code = if taken_over && !again.get() && v == (2, 2) { 0 } else { 1 };
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        let status = Child(pid).join_within(Duration::from_secs(20));
        release.send(()).unwrap();
        lost.join().unwrap();
        assert_eq!(status, 0, "the child's first uses went on, each once");
        assert_eq!((RACY.get(), WORD.get()), (Some(&1), Some(1)));
    }
}

#[cfg(all(test, ufutex_loom))]
mod loom_tests {
    use super::{Once, PerProcess, Run, SetupLock};
    use crate::primitive::{AtomicU32, Ordering};
    use loom::sync::Arc;

    const PARENT: u64 = 7 << 32 | 70;
    const CHILD: u64 = 8 << 32;

    /// Two threads of one process (`CHILD | 1`, `CHILD | 2`) call a once whose state starts at
    /// `state`: the action runs once, as `run`, and each returns after it, seeing what it wrote.
    fn two_callers(state: u64, run: Run) {
        loom::model(move || {
            let once = Arc::new(Once::new());
            once.state.store(state, Ordering::Relaxed);
            let runs = Arc::new(AtomicU32::new(0));
            let call = move |once: &Once, runs: &AtomicU32, me: u64| {
                once.call_as(me, |how| {
                    assert_eq!(how, run);
                    // Relaxed: published by DONE's Release.
                    runs.fetch_add(1, Ordering::Relaxed);
                });
                assert_eq!(runs.load(Ordering::Relaxed), 1);
            };
            let (o2, r2) = (once.clone(), runs.clone());
            let other = loom::thread::spawn(move || call(&o2, &r2, CHILD | 2));
            call(&once, &runs, CHILD | 1);
            other.join().unwrap();
        });
    }

    /// Two threads of a process call a once together: the action runs once, and each returns
    /// after it, seeing what it wrote.
    #[test]
    fn the_action_runs_once_before_either_caller_goes_on() {
        two_callers(super::NEW, Run::First);
    }

    /// A child's copy of a once that the parent's lost thread was running: two threads of the
    /// child take it over together; one runs it, the other waits for that run.
    #[test]
    fn a_child_takes_a_lost_run_over_once() {
        two_callers(PARENT, Run::TakenOver); // the fork's copy
    }

    /// A fresh child: the parent's value inherited, the mark wiped. One thread of the child
    /// publishes its own value while another reads: the reader finds nothing or the child's
    /// value, never the parent's. (Mutant: `get` loading the pointer before the mark, or
    /// `publish` setting the mark first: the reader takes the parent's.)
    #[test]
    fn a_child_never_takes_its_parents_value() {
        static PARENTS: u32 = 1;
        static CHILDS: u32 = 2;
        loom::model(|| {
            let value = Arc::new(PerProcess::new());
            let mark = Arc::new(AtomicU32::new(0));
            // The parent's publication, then the fork: the pointer copied, the mark wiped.
            value.publish(&mark, &PARENTS);
            mark.store(0, Ordering::Relaxed);
            let (v2, m2) = (value.clone(), mark.clone());
            let publisher = loom::thread::spawn(move || v2.publish(&m2, &CHILDS));
            if let Some(&v) = value.get(&mark) {
                assert_eq!(v, CHILDS, "a thread of the child took its parent's value");
            }
            publisher.join().unwrap();
            assert_eq!(value.get(&mark), Some(&CHILDS));
        });
    }

    /// A child's copy of a set-up lock that the parent's lost thread held: two threads of the
    /// child take it, one at a time.
    #[test]
    fn a_child_takes_a_lost_holders_lock_one_thread_at_a_time() {
        loom::model(|| {
            let lock = Arc::new(SetupLock::new());
            lock.holder.store(PARENT, Ordering::Relaxed); // the fork's copy
            let inside = Arc::new(AtomicU32::new(0));
            let enter = |lock: &SetupLock, inside: &AtomicU32, me: u64| {
                let _held = lock.lock_as(me);
                // Relaxed: the lock orders these.
                assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
                inside.fetch_sub(1, Ordering::Relaxed);
            };
            let (l2, i2) = (lock.clone(), inside.clone());
            let other = loom::thread::spawn(move || enter(&l2, &i2, CHILD | 2));
            enter(&lock, &inside, CHILD | 1);
            other.join().unwrap();
            assert_eq!(lock.holder.load(Ordering::Relaxed), 0);
        });
    }
}
