//! The bucket lock: one `AtomicU32`, uncontended lock and unlock are one atomic and one plain
//! store; a contended lock spins briefly, then sleeps on the kernel futex (so an owner that is
//! preempted does not make its waiters burn their time slices — this library runs
//! oversubscribed).
//!
//! | value | meaning |
//! |---|---|
//! | 0 | unlocked |
//! | 1 | locked, nobody sleeping |
//! | 2 | locked, someone may be sleeping in the kernel |
//! | 3 | locked, and a sleeper asks for the lock to be handed over at the unlock |
//! | 4 | handed over: held for whichever sleeping locker takes it next |
//!
//! # The hand-over
//!
//! An unlock releases the lock to whoever takes it first, and a locker that has just woken
//! loses that race to any thread that is running: a thread that re-locks in a loop, holding the
//! lock for most of each turn (a wake that walks a long queue, over and over), could keep a
//! sleeper out for minutes (`tests/waitv.rs` did, on an idle 2-CPU host). So a locker that has
//! slept [`HAND_OFF_AFTER`] times and still not got the lock asks for it: it marks the word 3
//! instead of 2. An unlock that finds 3 does not release; it makes the word 4 and wakes one
//! sleeper. A 4 looks held to the fast path and the spin (they take only a 0); a locker in the
//! sleeping loop (registered, its spin spent) takes it, as 2: others may sleep.
//!
//! Nothing is stranded at 4: an unlock writes it only over a 3, which a requester wrote and
//! which no other write but the owner's unlock replaces while the lock is held (lockers only
//! mark 2 or 3 over 1, 2 or 3; a mark of 2 over a 3 withdraws the request, and its locker is
//! asleep in the loop too). So when 4 is written, the requester is in the loop and has not
//! taken the lock: it finds the 4 when its sleep ends (the wake, or the word no longer
//! holding the 3 it sleeps on), unless another locker in the loop took it first, and then that
//! one is the owner. The unlock compares its way there (a swap to 0 would release first, and
//! taking the lock back could then take a later 0, after the requester had come and gone).
//!
//! # The quiet unlock
//!
//! An unlock that swaps the word back to 0 learns from the old value whether to wake a sleeper,
//! but a swap is an atomic read-modify-write, and every bucket operation ends with one: ~10 ns
//! on the AMD EPYC family 23 host, where a warm requeue of one waiter (two locks) took 73 ns
//! with swaps and 51 ns with quiet stores (BENCHMARKS.md, thirty-seventh session). So while no
//! locker anywhere in the process is about to sleep, and `membarrier` works, an unlock is a
//! plain store of 0 — which can erase a 2 that a locker wrote between the owner's lock and its
//! store. The sleepers' side makes that harmless, as `sync`'s quiet mutex unlock does
//! (`raw_mutex.rs`), with one process-wide count:
//! - **A locker registers, then barriers, before it marks.** Once its spin is spent, a locker
//!   adds itself to [`SLEEPERS`] and runs `membarrier::waiter_barrier` before its first swap
//!   to 2, and leaves the count only once it holds the lock (after its last mark).
//! - **The quiet owner looks after its store.** It reads `SLEEPERS` before its store (any
//!   registered: the swap instead) and again after it (and `membarrier::fence_free_point`);
//!   a count it finds then may have had its mark erased, so it wakes one sleeper of the lock.
//!
//! Why no wakeup is lost: the barrier lands somewhere in the quiet owner's path. Before its
//! second look, that look sees the registration (made before the barrier) and wakes. After it,
//! the owner's store was visible before the barrier ended, so the locker's swap (after it)
//! comes later in the word's order and erases nothing: it reads 0 and takes the lock, or reads
//! a later owner's 1, whose unlock the same argument covers. A woken locker swaps in 2 again
//! before it sleeps again, as in the swap protocol, so one wake per erased mark suffices.
//! Where `membarrier` does not work, or is not yet known to ([`known_fence_free`]), every unlock
//! swaps. The count is read-mostly: written only by lockers about to sleep, which have spun
//! for microseconds already; while any is registered, every bucket's unlock swaps.
//!
//! ## Two quiet unlocks
//!
//! A requeue holds two bucket locks and releases both ([`RawLock::unlock_two`]): one look at
//! the count before both stores, one after both. The argument holds for each lock as it stands:
//! the first look only chooses the quiet way (the look that decides is the second), and the
//! second comes after each lock's store in program order, the other store between them changing
//! nothing of where a locker's barrier can land. A count found then wakes one sleeper of each
//! lock; a sleeper woken with its mark intact only marks again and sleeps, as after any
//! spurious wake. Two quiet unlocks in a row would take the same looks twice: one pair fewer.
//!
//! [`known_fence_free`]: crate::membarrier::known_fence_free

use crate::membarrier;
use crate::primitive::{spin_hint, AtomicU32, Ordering};
use crate::spin_cost::hints_for;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;
/// Locked; a sleeper asks for a hand-over (module docs, "The hand-over").
const REQUESTED: u32 = 3;
/// Handed over to the sleeping lockers.
const HANDED: u32 = 4;

/// How many times a locker sleeps before it asks for the lock to be handed over: a wakeup that
/// finds the lock taken again happens when the lock is busy; two in a row, when a running
/// thread keeps winning it. The hand-over costs the lock its idle time until the woken locker
/// runs (a sleep/wake hop, 15–65 µs), so it is kept for a locker that is losing.
const HAND_OFF_AFTER: u32 = 2;

/// [`HAND_OFF_AFTER`]; under loom, a model's own (the lock's hand-over model asks at once).
#[inline(always)]
fn hand_off_after() -> u32 {
    #[cfg(not(ufutex_loom))]
    return HAND_OFF_AFTER;
    #[cfg(ufutex_loom)]
    MODEL_HAND_OFF_AFTER.load(std::sync::atomic::Ordering::Relaxed)
}

/// Set by the lock's loom models (a plain atomic: loom runs a model's threads one at a time).
#[cfg(ufutex_loom)]
static MODEL_HAND_OFF_AFTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(HAND_OFF_AFTER);

/// How long a contended bucket lock spins before it sleeps. Most bucket critical sections are a
/// few list operations (tens of ns); a wake or requeue of many waiters walks one node per
/// waiter, each on its own thread's stack (~0.1 µs a cache miss: ~1 µs for 8). A waiter that
/// sleeps instead costs the owner a `futex` wake at its unlock and itself a sleep/wake hop of
/// 15–65 µs on the project's hosts, so the spin lasts a few µs. A time, not a count: a spin
/// hint costs ~70 ns on the AMD hosts and ~10 ns on the Intel ones (`spin_cost.rs`);
/// 40 hints (the old count) were 2.8 µs on the one and 0.4 µs on the other, where `strace`
/// showed one of perf's two wake-parallel wakers (8 wakes each) going to sleep on the lock.
/// Under loom every spin is a scheduling branch: one (`hints_for`) is enough to explore
/// "released while spinning".
const SPIN_NS: u64 = 4_000;

/// Whether an unlock may be quiet at all. Under loom only in the lock's own model
/// (`loom_tests` below): a quiet unlock adds four scheduling points to every unlock, which took
/// the engine's models (`tests/loom_core.rs`) from under 2 minutes to over 9. Those models use
/// nothing of the lock but what both unlocks give — mutual exclusion, the Release/Acquire
/// hand-over, every sleeping locker woken — and the lock's model checks that the quiet one
/// gives them.
#[inline(always)]
fn quiet_unlocks() -> bool {
    #[cfg(not(ufutex_loom))]
    return true;
    #[cfg(ufutex_loom)]
    MODEL_QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Set by the lock's loom model (a plain atomic: loom runs a model's threads one at a time).
#[cfg(ufutex_loom)]
static MODEL_QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// An unlock's first look (module docs, "The quiet unlock"): whether it may store quietly, as no
/// locker is registered to sleep. Relaxed: the look that decides is the one after the store,
/// ordered by the barrier.
#[inline(always)]
fn may_be_quiet() -> bool {
    quiet_unlocks() && membarrier::known_fence_free() && SLEEPERS.load(Ordering::Relaxed) == 0
}

/// Lockers registered to sleep on any bucket lock (module docs: "The quiet unlock"). On a
/// line of its own: a locker that sleeps writes it, and every call reads the hot statics
/// beside it (`hot_code.rs`).
#[cfg(not(ufutex_loom))]
#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
static SLEEPERS: OwnLine<AtomicU32> = OwnLine(AtomicU32::new(0));

/// A value alone on its cache line.
#[cfg(not(ufutex_loom))]
#[repr(align(64))]
struct OwnLine<T>(T);

#[cfg(not(ufutex_loom))]
impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
#[cfg(ufutex_loom)]
loom::lazy_static! {
    static ref SLEEPERS: AtomicU32 = AtomicU32::new(0);
}

/// In a forked child (`fork.rs`): the parent's lockers that slept on bucket locks are not in
/// it, and their registrations would keep every unlock from being quiet.
#[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
pub(crate) fn forget_sleepers() {
    crate::primitive::reset_in_child(&SLEEPERS, 0);
}

pub(crate) struct RawLock {
    state: AtomicU32,
    /// Where a contended locker sleeps (the kernel futex on the state: nothing here, outside
    /// loom).
    sleep: sys::Sleep,
}

impl RawLock {
    crate::primitive::const_unless_loom! {
        pub(crate) fn new() -> RawLock {
            RawLock { state: AtomicU32::new(UNLOCKED), sleep: sys::Sleep::new() }
        }
    }

    #[inline]
    pub(crate) fn lock(&self) {
        // Acquire: the critical section sees everything the previous owner did.
        if self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
    }

    /// Take the lock if it is free; `false` without waiting if not.
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn try_lock(&self) -> bool {
        // Acquire: as `lock`'s.
        self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    #[cold]
    fn lock_contended(&self) {
        for _ in 0..hints_for(SPIN_NS, 16, 1 << 12) {
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
            spin_hint();
        }
        // Registered, and the barrier passed, before the first mark (module docs). (The
        // barrier's own fences order the increment before it.)
        SLEEPERS.fetch_add(1, Ordering::Relaxed);
        membarrier::waiter_barrier();
        let mut slept = 0;
        loop {
            // Taking the lock as CONTENDED is conservative: the unlock may wake someone
            // needlessly. A 4 is taken too (module docs, "The hand-over"); a 3 is marked over,
            // which withdraws that request (its locker sleeps on 3, finds 2 and asks again).
            let sleep_on = if slept < hand_off_after() {
                match self.state.swap(CONTENDED, Ordering::Acquire) {
                    UNLOCKED | HANDED => break,
                    _ => CONTENDED,
                }
            } else {
                match self.ask_for_hand_over() {
                    Some(on) => on,
                    None => break,
                }
            };
            self.sleep.sleep_while(&self.state, sleep_on);
            slept += 1;
        }
        // Relaxed: a quiet unlock that reads the count after this needs nothing of this
        // thread's (every mark it made is before the exchange that took the lock).
        SLEEPERS.fetch_sub(1, Ordering::Relaxed);
    }

    /// A locker that keeps losing the lock: take it if it is free or handed over (`None`), else
    /// mark it REQUESTED and return the value to sleep on.
    #[cold]
    #[inline(never)]
    fn ask_for_hand_over(&self) -> Option<u32> {
        let mut seen = self.state.load(Ordering::Relaxed);
        loop {
            let (to, taken) = match seen {
                UNLOCKED | HANDED => (CONTENDED, true),
                REQUESTED => return Some(REQUESTED),
                _ => (REQUESTED, false),
            };
            // Acquire: as the lock's (when it takes the lock).
            match self.state.compare_exchange(seen, to, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) if taken => return None,
                Ok(_) => return Some(REQUESTED),
                Err(now) => seen = now,
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        if may_be_quiet() {
            self.store_unlocked();
            membarrier::fence_free_point();
            if SLEEPERS.load(Ordering::Relaxed) != 0 {
                self.wake_erased();
            }
            return;
        }
        std::hint::cold_path();
        // Release: as above. Compared, not swapped: a 3 is not released but handed over
        // (module docs). While the lock is held, lockers move the word only among 1, 2 and 3,
        // so each failed compare names the next value to try.
        let mut seen = LOCKED;
        loop {
            let to = if seen == REQUESTED { HANDED } else { UNLOCKED };
            match self.state.compare_exchange(seen, to, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => seen = now,
            }
        }
        if seen != LOCKED {
            self.sleep.wake_one(&self.state);
        }
    }

    /// Unlock `a`, then `b` (both held by the caller: a requeue's two buckets), as two
    /// [`RawLock::unlock`]s would, with one look before the stores and one after them when
    /// both are quiet (module docs, "Two quiet unlocks"). `a` and `b` are different locks.
    #[inline(always)]
    pub(crate) fn unlock_two(a: &RawLock, b: &RawLock) {
        if may_be_quiet() {
            a.store_unlocked();
            b.store_unlocked();
            membarrier::fence_free_point();
            if SLEEPERS.load(Ordering::Relaxed) != 0 {
                a.wake_erased();
                b.wake_erased();
            }
            return;
        }
        std::hint::cold_path();
        a.unlock();
        b.unlock();
    }

    /// A quiet unlock's store. Release: publish the critical section to the next owner.
    #[inline(always)]
    fn store_unlocked(&self) {
        #[cfg(not(ufutex_loom))]
        self.state.store(UNLOCKED, Ordering::Release);
        // Loom 0.7 orders a plain store only after the stores its thread has seen, so a
        // locker's swap could still read the 2 that this store overwrote, which no C11 order
        // allows (an RMW reads the last value): modelled as a swap that ignores what it read,
        // as `sync`'s quiet unlock is (`raw_mutex.rs`).
        #[cfg(ufutex_loom)]
        self.state.swap(UNLOCKED, Ordering::Release);
    }

    /// In a forked child, which has one thread: free, whoever held it or slept on it in the
    /// parent (`fork.rs`).
    #[cfg_attr(ufutex_loom, allow(dead_code))] // fork.rs is not built under loom
    pub(crate) fn forget(&self) {
        crate::primitive::reset_in_child(&self.state, UNLOCKED);
    }

    /// After a quiet unlock that found a locker registered to sleep: the store may have erased
    /// its mark, so wake one sleeper of this lock (it marks again before it sleeps again).
    #[cold]
    #[inline(never)]
    fn wake_erased(&self) {
        self.sleep.wake_one(&self.state);
    }
}

#[cfg(all(target_os = "linux", not(ufutex_loom)))]
mod sys {
    use std::sync::atomic::AtomicU32;

    /// The kernel futex on the lock word: no state of its own.
    pub(super) struct Sleep;

    impl Sleep {
        pub(super) const fn new() -> Sleep {
            Sleep
        }

        pub(super) fn sleep_while(&self, word: &AtomicU32, val: u32) {
            crate::parker::futex::wait(word, val, None);
        }

        pub(super) fn wake_one(&self, word: &AtomicU32) {
            crate::parker::futex::wake(word, 1);
        }
    }
}

#[cfg(all(not(target_os = "linux"), not(ufutex_loom)))]
mod sys {
    use crate::primitive::{yield_now, AtomicU32, Ordering};

    /// Off Linux a contended locker yields and looks again.
    pub(super) struct Sleep;

    impl Sleep {
        pub(super) const fn new() -> Sleep {
            Sleep
        }

        pub(super) fn sleep_while(&self, word: &AtomicU32, val: u32) {
            if word.load(Ordering::Relaxed) == val {
                yield_now();
            }
        }

        pub(super) fn wake_one(&self, _word: &AtomicU32) {}
    }
}

/// Under loom a contended locker parks, as it would in the kernel. A locker that yielded and
/// looked again instead made an execution last as long as the holder's yield count (loom runs
/// the thread that yielded least first): past loom's branch limit at three preemptions. (Not
/// loom's condvar: its wait can wake into a held mutex and panic.)
#[cfg(ufutex_loom)]
mod sys {
    use crate::primitive::{AtomicU32, Mutex, Ordering};
    use loom::thread::Thread;

    /// The sleeping lockers, oldest first.
    pub(super) struct Sleep {
        sleepers: Mutex<Vec<Thread>>,
    }

    impl Sleep {
        pub(super) fn new() -> Sleep {
            Sleep { sleepers: Mutex::new(Vec::new()) }
        }

        /// The futex's check under its lock: the waker's wake takes the same lock after its
        /// store, so either this look sees the store or the wake finds this thread listed.
        pub(super) fn sleep_while(&self, word: &AtomicU32, val: u32) {
            {
                let mut sleepers = self.sleepers.lock().unwrap();
                if word.load(Ordering::Relaxed) != val {
                    return;
                }
                sleepers.push(loom::thread::current());
            }
            // May also return for an unpark meant for this thread's parker (a token left from
            // an earlier wait): then leave the list, and the caller looks again.
            loom::thread::park();
            let me = loom::thread::current().id();
            self.sleepers.lock().unwrap().retain(|t| t.id() != me);
        }

        pub(super) fn wake_one(&self, _word: &AtomicU32) {
            let mut sleepers = self.sleepers.lock().unwrap();
            let first = (!sleepers.is_empty()).then(|| sleepers.remove(0));
            drop(sleepers);
            if let Some(t) = first {
                t.unpark();
            }
        }
    }
}

#[cfg(all(test, ufutex_loom))]
mod loom_tests {
    use super::RawLock;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// `n` lockers of one lock, each once, under the given switches (`quiet`: unlocks may be
    /// quiet; `hand_off_after`: sleeps before a locker asks for a hand-over), which are put
    /// back afterwards. Loom's lockers spin one hint and then sleep, so every interleaving of
    /// registrations, barriers, marks, requests, hand-overs and quiet stores is tried. The
    /// sections never overlap (loom's cell checks it), all `n` ran, the lock is free at the
    /// end (a hand-over that nobody took would leave it at 4), and nobody was left asleep
    /// (loom fails a model in which every thread is blocked).
    fn lockers(n: u32, quiet: bool, hand_off_after: u32) {
        use std::sync::atomic::Ordering::Relaxed;
        super::MODEL_QUIET.store(quiet, Relaxed);
        super::MODEL_HAND_OFF_AFTER.store(hand_off_after, Relaxed);
        // At least three preemptions (a larger LOOM_MAX_PREEMPTIONS still applies): the
        // hand-over to nobody below takes three to reach.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(model.preemption_bound.map_or(3, |b| b.max(3)));
        model.check(move || {
            let lock = Arc::new(RawLock::new());
            let ran = Arc::new(UnsafeCell::new(0u32));
            let section = |lock: &RawLock, ran: &UnsafeCell<u32>| {
                lock.lock();
                // SAFETY: the lock is held: no other section runs.
                ran.with_mut(|r| unsafe { *r += 1 });
                lock.unlock();
            };
            let others: Vec<_> = (1..n)
                .map(|_| {
                    let (lock, ran) = (lock.clone(), ran.clone());
                    loom::thread::spawn(move || section(&lock, &ran))
                })
                .collect();
            section(&lock, &ran);
            for t in others {
                t.join().unwrap();
            }
            // SAFETY: every other thread has been joined.
            assert_eq!(ran.with(|r| unsafe { *r }), n);
            assert_eq!(lock.state.load(loom::sync::atomic::Ordering::Relaxed), super::UNLOCKED);
        });
        super::MODEL_QUIET.store(false, Relaxed);
        super::MODEL_HAND_OFF_AFTER.store(super::HAND_OFF_AFTER, Relaxed);
    }

    /// Without the quiet owner's second look, loom finds the sleeper whose mark the store
    /// erased.
    #[test]
    fn a_quiet_unlock_never_strands_a_sleeper() {
        lockers(3, true, super::HAND_OFF_AFTER);
    }

    /// A requeuer's two locks released together ([`RawLock::unlock_two`]), quiet: it takes `a`
    /// and then `b` and releases both at once, while one locker takes `a` alone and another `b`
    /// alone (each released as usual), so that a sleeper of either lock can have its mark
    /// erased by either store. Every section ran, one at a time per lock, both locks are free
    /// at the end, and nobody was left asleep. Without the look after the two stores, loom
    /// finds the stranded sleeper.
    #[test]
    fn two_quiet_unlocks_never_strand_a_sleeper() {
        use std::sync::atomic::Ordering::Relaxed;
        super::MODEL_QUIET.store(true, Relaxed);
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(model.preemption_bound.map_or(3, |b| b.max(3)));
        model.check(|| {
            let locks = Arc::new([RawLock::new(), RawLock::new()]);
            let ran = Arc::new([UnsafeCell::new(0u32), UnsafeCell::new(0u32)]);
            let alone = |i: usize, locks: &[RawLock; 2], ran: &[UnsafeCell<u32>; 2]| {
                locks[i].lock();
                // SAFETY: lock `i` is held: no other section of `ran[i]` runs.
                ran[i].with_mut(|r| unsafe { *r += 1 });
                locks[i].unlock();
            };
            let others: Vec<_> = (0..2)
                .map(|i| {
                    let (locks, ran) = (locks.clone(), ran.clone());
                    loom::thread::spawn(move || alone(i, &locks, &ran))
                })
                .collect();
            locks[0].lock();
            locks[1].lock();
            for r in ran.iter() {
                // SAFETY: both locks are held.
                r.with_mut(|r| unsafe { *r += 1 });
            }
            RawLock::unlock_two(&locks[0], &locks[1]);
            for t in others {
                t.join().unwrap();
            }
            for (lock, r) in locks.iter().zip(ran.iter()) {
                // SAFETY: every other thread has been joined.
                assert_eq!(r.with(|r| unsafe { *r }), 2);
                assert_eq!(lock.state.load(loom::sync::atomic::Ordering::Relaxed), super::UNLOCKED);
            }
        });
        super::MODEL_QUIET.store(false, Relaxed);
    }

    /// Every sleeping locker asks for a hand-over at once, so that loom reaches requests,
    /// withdrawals (a mark of 2 over a 3) and hand-overs with one sleep each: the lock is
    /// always taken, by one locker at a time, and never left handed over to nobody. With
    /// swapping unlocks, and with quiet ones (which can erase a request). Two lockers as well
    /// as three: with a third, a hand-over given to nobody can be taken by that third one
    /// later, and go unseen. (An unlock that swapped to 0 and then took the lock back as 4, as
    /// a first version did, gave it to nobody after the requester had come and gone: with two
    /// lockers, at three preemptions, loom finds that.)
    #[test]
    fn a_hand_over_is_always_taken() {
        for quiet in [false, true] {
            lockers(2, quiet, 0);
            lockers(3, quiet, 0);
        }
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::RawLock;
    use std::cell::UnsafeCell;

    /// A counter that only the lock guards.
    struct Guarded {
        lock: RawLock,
        count: UnsafeCell<u64>,
    }

    // SAFETY: `count` is only touched with `lock` held.
    unsafe impl Sync for Guarded {}

    /// Four threads on two CPUs (or however many there are) take two locks in turn, and every
    /// 4th round both, released together (`unlock_two`); every 16th section holds its lock for
    /// ~50 µs, far past a locker's spin, so the others register and sleep while quiet unlocks
    /// go on around them (`membarrier` decided first, so that the unlocks may be quiet). Every
    /// increment is counted (mutual exclusion), and no thread is left asleep (the test ends).
    #[test]
    fn sleepers_and_quiet_unlocks_lose_nothing() {
        let quiet = crate::membarrier::fence_free();
        let locks = [0, 1].map(|_| Guarded { lock: RawLock::new(), count: UnsafeCell::new(0) });
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 20_000;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let locks = &locks;
                s.spawn(move || {
                    for i in 0..ROUNDS {
                        if i % 4 == 3 {
                            // Both, in the one order, released together (a requeue's unlock).
                            locks[0].lock.lock();
                            locks[1].lock.lock();
                            for g in locks {
                                // SAFETY: both locks are held.
                                unsafe { *g.count.get() += 1 };
                            }
                            RawLock::unlock_two(&locks[0].lock, &locks[1].lock);
                            continue;
                        }
                        let g = &locks[((i + t) % 2) as usize];
                        g.lock.lock();
                        // SAFETY: the lock is held.
                        unsafe { *g.count.get() += 1 };
                        if i % 16 == t {
                            let until = std::time::Instant::now() + std::time::Duration::from_micros(50);
                            while std::time::Instant::now() < until {
                                std::hint::spin_loop();
                            }
                        }
                        g.lock.unlock();
                    }
                });
            }
        });
        // SAFETY: every thread has been joined.
        let total: u64 = locks.iter().map(|g| unsafe { *g.count.get() }).sum();
        assert_eq!(total, THREADS * (ROUNDS + ROUNDS / 4), "quiet unlocks possible: {quiet}");
    }
}
