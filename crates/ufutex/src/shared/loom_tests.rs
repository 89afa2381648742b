//! Loom models of the shared table's crash recovery. A model thread stands for a process; one
//! that "dies" at a fault point unwinds out of the operation without releasing anything (its
//! bucket guard keeps the lock: `fault::dying`), and only then is its slot dead — a process
//! that stops forever at that instruction. Another takes the lock over, repairs the queue from
//! the records (rebuild, pending kick) and goes on; the models check that the queue is exactly
//! the records that are queued, that a dead waiter is never counted, and that a wake is never
//! lost or counted twice, whatever the interleaving and wherever the death.
//!
//! The engine's own operations (`waiter.rs`, `wake.rs`, `requeue.rs`) run on the model segment
//! too, through [`SharedTable`] with a model process as its [`Operator`]: the filter's (A)/(B)
//! order, a requeue that moves a waiter's record and its filter count, and the park.
//!
//! `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib shared`

use super::engine::{Operator, Rec, SharedTable};
use super::fault::{self, Point};
use super::identity::{Class, SharedKey};
use super::lock::{Life, Liveness, Owner};
use super::park::{Later, Ring};
use super::queue::{lock_bucket, Host};
use super::segment::{Layout, Segment, COUNTED, NONE, REC_IDLE, REC_QUEUED, REC_WOKEN};
use super::surgery::{enqueue_locked, has_key, wake_one, walk, Lives};
use super::SharedError;
use crate::engine::Want;
use crate::membarrier::Pays;
use crate::primitive::{AtomicU32, Ordering};
use crate::waiter::{enqueue_all, take_back, Unqueued, Why};
use crate::wake::Report;
use crate::word::word_of;
use loom::sync::atomic::AtomicBool;
use loom::sync::Arc;
use loom::thread;

const KEY: SharedKey = SharedKey { class: Class::Object, dev: 1, ino: 2, off: 64 };
/// The identity of the model's second word.
const KEY_B: SharedKey = SharedKey { class: Class::Object, dev: 1, ino: 2, off: 128 };
const PROCS: u32 = 3;

/// The segment, which model "processes" have died, and two words in "shared memory" (`a` at
/// [`KEY`], `b` at [`KEY_B`]).
struct Model {
    seg: Segment,
    dead: [AtomicBool; PROCS as usize],
    a: AtomicU32,
    b: AtomicU32,
}

impl Model {
    fn new() -> Arc<Model> {
        Model::with_buckets(1)
    }

    /// With `buckets` buckets (with 2, [`KEY`] and [`KEY_B`] are in different ones).
    fn with_buckets(buckets: u32) -> Arc<Model> {
        Model::with_layout(Layout { procs: PROCS, records: 1, buckets })
    }

    /// With `layout`: record `r` is slot `r / layout.records`'s.
    fn with_layout(layout: Layout) -> Arc<Model> {
        let seg = Segment::model(layout);
        for s in 0..PROCS {
            seg.slot(s).unwrap().used.store(layout.records, Ordering::Relaxed);
        }
        let dead = [AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false)];
        Arc::new(Model { seg, dead, a: AtomicU32::new(0), b: AtomicU32::new(0) })
    }

    /// The shared table as model process `slot` sees it.
    fn table(&self, slot: u32) -> SharedTable<'_, Proc<'_>> {
        SharedTable { seg: &self.seg, op: Proc { m: self, slot } }
    }
}

/// Model process `slot` (generation 1), owning record `slot`.
struct Proc<'m> {
    m: &'m Model,
    slot: u32,
}

impl Liveness for Proc<'_> {
    fn life(&self, o: Owner) -> Life {
        match self.m.dead.get(o.slot as usize) {
            None => Life::Corrupt,
            Some(d) if d.load(Ordering::Acquire) => Life::Dead,
            Some(_) => Life::Alive,
        }
    }
}

impl Host for Proc<'_> {
    fn seg(&self) -> &Segment {
        &self.m.seg
    }
    fn me(&self) -> Owner {
        Owner { slot: self.slot, gen: 1 }
    }
}

impl Operator for Proc<'_> {
    fn host(&self) -> Result<&dyn Host, SharedError> {
        Ok(self)
    }

    fn key_of(&self, _: &dyn Host, addr: usize) -> Result<SharedKey, SharedError> {
        Ok(if addr == word_of(&self.m.a).addr() { KEY } else { KEY_B })
    }
}

/// Run `f` as model process `slot`, dying at `die_at` if it gets there: `None` if it died.
fn as_process<R>(m: &Model, slot: u32, die_at: Option<Point>, f: impl FnOnce(&Proc<'_>) -> R) -> Option<R> {
    fault::arm(die_at);
    let h = Proc { m, slot };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&h)));
    fault::arm(None);
    match r {
        Ok(r) => Some(r),
        Err(_) => {
            // Gone: from now on its lock and its records are a dead process's.
            m.dead[slot as usize].store(true, Ordering::Release);
            None
        }
    }
}

/// Queue our record on KEY (the waiter's half, after its value check).
fn enqueue(h: &Proc<'_>) -> Result<(), SharedError> {
    let g = lock_bucket(h, 0)?;
    fault::point(Point::Locked);
    enqueue_locked(&g, h.slot, &KEY, u64::MAX, (h.slot, 0, 1))
}

/// Wake every waiter on KEY: how many counted. Our own process's waiters are kicked after the
/// unlock (`park::Later`), as the engine's wake does.
fn wake_all(h: &Proc<'_>) -> Result<usize, SharedError> {
    let g = lock_bucket(h, 0)?;
    let mut later = Later::new();
    let (mut n, mut lives, mut ring) = (0, Lives::default(), Ring::new(g.bucket, g.index));
    let walked = walk(&g, |r, rec| {
        if has_key(rec, &KEY) && wake_one(&g, r, &mut lives, &mut ring, &mut later)? {
            n += 1;
        }
        Ok(true)
    });
    ring.finish();
    drop(g);
    later.wake();
    walked.map(|()| n)
}

/// Take each bucket's lock as process `slot` (over a dead owner if need be) and check its queue
/// is exactly the records Queued in it, in ticket order.
fn check_consistent(m: &Model, slot: u32) {
    let h = Proc { m, slot };
    for b in 0..m.seg.layout.buckets {
        let g = lock_bucket(&h, b).unwrap();
        let mut linked = Vec::new();
        walk(&g, |r, _| {
            linked.push(r);
            Ok(true)
        })
        .unwrap();
        let mut queued: Vec<(u64, u32)> = (0..PROCS)
            .map(|r| (r, m.seg.record(r).unwrap()))
            .filter(|(_, rec)| rec.state.load(Ordering::Relaxed) == REC_QUEUED && rec.bucket() == b)
            .map(|(r, rec)| (rec.ticket.load(Ordering::Relaxed), r))
            .collect();
        queued.sort();
        assert_eq!(linked, queued.iter().map(|&(_, r)| r).collect::<Vec<_>>());
        assert_eq!(g.bucket.pending.load(Ordering::Relaxed), NONE);
    }
}

/// A waiter dies at any step of queueing, while a waker takes the bucket (over the dead owner)
/// and wakes: the dead waiter is never counted, a live one is counted once or stays queued.
#[test]
fn a_waiter_dying_anywhere_is_repaired_and_never_counted() {
    for die_at in [None, Some(Point::Locked), Some(Point::Enqueued)] {
        loom::model(move || {
            let m = Model::new();
            let m2 = m.clone();
            let waiter = thread::spawn(move || as_process(&m2, 0, die_at, |h| enqueue(h).unwrap()).is_some());
            let counted = as_process(&m, 1, None, |h| wake_all(h).unwrap()).unwrap();
            let lived = waiter.join().unwrap();
            let state = m.seg.record(0).unwrap().state.load(Ordering::Relaxed);
            if lived {
                // Counted once (Woken), or queued after the wake looked.
                assert_eq!((counted, state), if counted == 1 { (1, REC_WOKEN) } else { (0, REC_QUEUED) });
            } else {
                assert_eq!(counted, 0, "a dead waiter counted");
                assert_ne!(state, REC_WOKEN);
            }
            check_consistent(&m, 2);
        });
    }
}

/// A waker dies at any step of waking a live waiter; another waker comes after: the waiter is
/// taken exactly once (Woken), its thread is kicked, and the wake is counted by whoever
/// finished it (the dead one's count dies with it only if it had already marked the waiter).
#[test]
fn a_waker_dying_anywhere_loses_no_wake() {
    for die_at in [None, Some(Point::Locked), Some(Point::Unlinked), Some(Point::Marked)] {
        loom::model(move || {
            let m = Model::new();
            as_process(&m, 0, None, |h| enqueue(h).unwrap()).unwrap();
            let m2 = m.clone();
            let first = thread::spawn(move || {
                as_process(&m2, 1, die_at, |h| {
                    let g = lock_bucket(h, 0).unwrap();
                    fault::point(Point::Locked);
                    drop(g);
                    wake_all(h).unwrap()
                })
            });
            let second = as_process(&m, 2, None, |h| wake_all(h).unwrap()).unwrap();
            let first = first.join().unwrap();
            let rec = m.seg.record(0).unwrap();
            let total = first.unwrap_or(0) + second;
            if die_at == Some(Point::Marked) && first.is_none() {
                // The dead waker took it: nobody else may count it, and the repair kicked it.
                assert_eq!(second, 0);
            } else {
                assert_eq!(total, 1, "the wake was lost or counted twice");
            }
            assert_eq!(rec.state.load(Ordering::Relaxed), REC_WOKEN);
            if first.is_none() {
                // Whoever repaired the bucket kicked the pending record: its thread hears it.
                check_consistent(&m, 0);
            }
            assert!(rec.park_seq.load(Ordering::Relaxed) >= 1, "the woken thread was never kicked");
        });
    }
}

/// A queued waiter parks — spins, says it may sleep, looks once more, sleeps in the kernel (the
/// parker's model of the futex) — while a waker marks it Woken and kicks it, calling the kernel
/// only if the waiter said it may be asleep: whichever looks first, the waiter returns woken (a
/// lost wakeup leaves it asleep for ever: a loom deadlock), and the wake is counted once.
#[test]
fn a_parked_waiter_is_always_woken() {
    loom::model(|| {
        let m = Model::new();
        as_process(&m, 0, None, |h| enqueue(h).unwrap()).unwrap();
        let m2 = m.clone();
        let waker = thread::spawn(move || as_process(&m2, 1, None, |h| wake_all(h).unwrap()).unwrap());
        assert_eq!(super::park::park(&m.seg, 0, &[0], None, &[]), Ok(super::park::Parked::Woken(0)));
        assert_eq!(waker.join().unwrap(), 1);
        assert_eq!(m.seg.record(0).unwrap().asleep.load(Ordering::Relaxed), 0);
    });
}

/// Processes 0 and 1 queue a waiter each on KEY and park it (on its park word and on the bucket's
/// bell, `park.rs`) on threads of their own: the parking threads.
fn two_parked(m: &Arc<Model>) -> Vec<thread::JoinHandle<Result<super::park::Parked, SharedError>>> {
    (0..2)
        .map(|s| {
            as_process(m, s, None, |h| enqueue(h).unwrap()).unwrap();
            let m = m.clone();
            thread::spawn(move || super::park::park(&m.seg, s, &[s], None, &[]))
        })
        .collect()
}

/// Both parked threads return woken, and no bucket counts a sleeper or owes a ring.
fn both_woken(m: &Model, parked: Vec<thread::JoinHandle<Result<super::park::Parked, SharedError>>>) {
    for p in parked {
        assert_eq!(p.join().unwrap(), Ok(super::park::Parked::Woken(0)));
    }
    for i in 0..m.seg.layout.buckets {
        let bucket = m.seg.bucket(i).unwrap();
        let owed = (bucket.sleepers.load(Ordering::Relaxed), bucket.ringing.load(Ordering::Relaxed));
        assert_eq!(owed, (0, 0), "bucket {i}: a sleeper counted or a ring owed");
    }
}

/// Two waiters of one bucket park while a waker takes both: whatever the order of the looks,
/// each is woken (a lost wakeup is a loom deadlock) — by one ring of the bell when the waker
/// found both asleep on it, else each on its own word or before it slept — and the wake counts
/// both.
#[test]
fn waiters_on_a_bell_are_woken_by_its_ring() {
    loom::model(|| {
        let m = Model::new();
        let parked = two_parked(&m);
        assert_eq!(as_process(&m, 2, None, |h| wake_all(h).unwrap()), Some(2));
        both_woken(&m, parked);
    });
}

/// A waker dies holding back the kicks of waiters asleep on the bucket's bell (after one of
/// them, or both), before its ring; a waiter's process then wakes the bucket: its lock taken over
/// rings the bell the dead waker owed, and its wake takes what is left. Neither waiter is left
/// asleep, and none is counted twice.
#[test]
fn a_waker_dying_before_its_ring_loses_no_wake() {
    loom::model(|| {
        let m = Model::new();
        let parked = two_parked(&m);
        let first = as_process(&m, 2, Some(Point::Held), |h| wake_all(h).unwrap());
        let second = as_process(&m, 0, None, |h| wake_all(h).unwrap()).unwrap();
        match first {
            Some(n) => assert_eq!(n + second, 2, "a wake lost or counted twice"),
            None => assert!(second <= 1, "a waiter the dead waker took was counted again"),
        }
        both_woken(&m, parked);
    });
}

/// Records `rs` (of the model's two-record processes) queued on KEY (in its bucket) by their
/// processes, each parked (on its own park word and the bucket's bell) on a thread of its own.
fn parked(m: &Arc<Model>, rs: &[u32]) -> Vec<thread::JoinHandle<Result<super::park::Parked, SharedError>>> {
    rs.iter()
        .map(|&r| {
            as_process(m, r / 2, None, |h| {
                let g = lock_bucket(h, KEY.bucket(m.seg.layout.buckets)).unwrap();
                enqueue_locked(&g, r, &KEY, u64::MAX, (r, 0, 1)).unwrap();
            })
            .unwrap();
            let m = m.clone();
            thread::spawn(move || super::park::park(&m.seg, r, &[r], None, &[]))
        })
        .collect()
}

/// A waker of process 0 takes two waiters of its own process (`ours`), or one of its own and
/// one of process 1's, while they park on the bucket's bell: it kicks its own after it let the
/// lock go (one ring for two, or each on its own word), the other's under the lock. Each is
/// woken, whatever the order (a lost wakeup is a loom deadlock), the wake counts both, and the
/// bucket ends with no sleeper counted and no ring owed.
#[test]
fn our_own_waiters_are_kicked_after_the_unlock() {
    for ours in [true, false] {
        loom::model(move || {
            let m = Model::with_layout(Layout { procs: PROCS, records: 2, buckets: 1 });
            let waiters = parked(&m, if ours { &[0, 1] } else { &[1, 2] });
            assert_eq!(as_process(&m, 0, None, |h| wake_all(h).unwrap()), Some(2));
            both_woken(&m, waiters);
        });
    }
}

/// Records `rs` counted in `a`'s filter, as a waiter's record is, so that a requeue carries the
/// counts to `b` and a wake of `b` does not skip its bucket.
fn counted_on_a(m: &Model, rs: &[u32]) {
    let off = word_of(&m.a).addr() & 4095;
    for &r in rs {
        m.seg.filter(off).fetch_add(1, Ordering::SeqCst);
        m.seg.record(r).unwrap().counted.store(off as u32 | COUNTED, Ordering::Relaxed);
    }
}

/// Two waiters of process 1 park on KEY, on its bucket's bell; process 0 requeues both onto
/// KEY_B, in the other bucket. Process 2 wakes KEY_B and dies at the point where it holds a
/// kick back for the ring (or lives: then it rings the bell they sleep on, of the bucket they
/// came from, under KEY_B's lock); process 0 then wakes KEY_B, and a lock taken over rings the
/// bells the dead waker owed (`ringing` names the other bucket). Neither waiter is left asleep
/// (a loom deadlock: a recoverer that rang only its own bucket's bell would leave them there),
/// and none is counted twice.
#[test]
fn a_waker_dying_before_it_rings_another_buckets_bell_loses_no_wake() {
    assert_ne!(KEY.bucket(2), KEY_B.bucket(2));
    for die in [false, true] {
        loom::model(move || {
            let m = Model::with_layout(Layout { procs: PROCS, records: 2, buckets: 2 });
            counted_on_a(&m, &[2, 3]);
            let waiters = parked(&m, &[2, 3]);
            let (a, b) = (word_of(&m.a).addr(), word_of(&m.b).addr());
            let moved = crate::requeue::requeue(&m.table(0), a, b, None::<fn() -> bool>, 0, 2, Pays::Waker).unwrap();
            assert_eq!(moved, 2);
            let wake_b = |t: &SharedTable<'_, Proc<'_>>| {
                crate::wake::wake(t, b, usize::MAX, u64::MAX, Report::Count, Pays::Waker).unwrap().count
            };
            let first = as_process(&m, 2, die.then_some(Point::Held), |h| wake_b(&m.table(h.slot)));
            let second = wake_b(&m.table(0));
            match first {
                Some(n) => assert_eq!(n + second, 2, "a wake lost or counted twice"),
                None => assert!(second <= 1, "a waiter the dead waker took was counted again"),
            }
            both_woken(&m, waiters);
        });
    }
}

/// Two waiters of process 0 park on KEY, on its bucket's bell; process 0 requeues both onto KEY_B,
/// in the other bucket, then wakes KEY_B. Its own threads still sleep on the bell of the bucket
/// they came from, and are rung there after the unlock (or kicked each: `park::Later`). Each is
/// woken, whatever the order of the looks (a lost wakeup is a loom deadlock: ringing the bell of
/// the bucket the records are in now would leave them asleep), the requeue moves both and the
/// wake counts both, and neither bucket counts a sleeper or owes a ring.
#[test]
fn requeued_own_waiters_are_rung_on_the_bell_they_sleep_on() {
    assert_ne!(KEY.bucket(2), KEY_B.bucket(2));
    loom::model(|| {
        let m = Model::with_layout(Layout { procs: PROCS, records: 2, buckets: 2 });
        counted_on_a(&m, &[0, 1]);
        let waiters = parked(&m, &[0, 1]);
        let (a, b) = (word_of(&m.a).addr(), word_of(&m.b).addr());
        let t = m.table(0);
        let moved = crate::requeue::requeue(&t, a, b, None::<fn() -> bool>, 0, 2, Pays::Waker).unwrap();
        let woken = crate::wake::wake(&t, b, usize::MAX, u64::MAX, Report::Count, Pays::Waker).unwrap().count;
        assert_eq!((moved, woken), (2, 2));
        both_woken(&m, waiters);
    });
}

/// A shared wait on `word` (holding `expected`) as model process `slot`, through the engine: the
/// spin before queueing (one look under loom), its record queued (or not: the word changed),
/// parked, taken back; the record's filter count dropped and its state made Idle, as
/// `ops::wait_watching` and `ops::Waiting` do.
fn engine_wait(m: &Model, slot: u32, word: &AtomicU32, expected: u32) -> Result<(), SharedError> {
    match engine_wait_with(m, slot, word, expected, false) {
        Ok(true) => Ok(()),
        Ok(false) => panic!("parked out without a wake"),
        Err(e) => Err(e),
    }
}

/// [`engine_wait`], with `watch` the thread also sleeping on `word` itself in the kernel (the
/// preload library's waits, `ops::wait_watching`): `Ok(true)` if a waker took its record,
/// `Ok(false)` if the watched word ended the park and nobody had (a spurious wakeup).
fn engine_wait_with(m: &Model, slot: u32, word: &AtomicU32, expected: u32, watch: bool) -> Result<bool, SharedError> {
    if super::park::spin_before_queueing(|| word.load(Ordering::Relaxed) != expected) {
        return Err(SharedError::WouldBlock);
    }
    let t = m.table(slot);
    let want = Want::<SharedTable<'_, Proc<'_>>> {
        waiter: Rec { r: slot, park: slot, index: 0 },
        word: word_of(word),
        expected: u64::from(expected),
        key: word_of(word).addr(),
        mask: u64::MAX,
    };
    let (queued, outcome) = match enqueue_all(&t, &[want], Pays::Waker) {
        Ok(()) => {
            let watched = [crate::parker::Watch { word, val: expected, shared: true }];
            (1, super::park::park(&m.seg, slot, &[slot], None, &watched[..usize::from(watch)]))
        }
        Err(Unqueued { queued, why: Why::Changed }) => (queued, Err(SharedError::WouldBlock)),
        Err(e) => panic!("the model segment failed: {e:?}"),
    };
    let s = take_back(&t, std::iter::once(want.waiter).take(queued));
    m.seg.release_filter(slot).unwrap();
    m.seg.record(slot).unwrap().state.store(REC_IDLE, Ordering::Release);
    match (s.woken, outcome) {
        (1, _) => Ok(true),
        (_, Err(e)) => Err(e),
        (_, Ok(super::park::Parked::Watched(_))) => Ok(false),
        (_, Ok(super::park::Parked::Woken(_))) => panic!("parked out without a wake"),
    }
}

/// The filter counts of both words are back to zero.
fn filters_empty(m: &Model) {
    for w in [&m.a, &m.b] {
        assert_eq!(m.seg.filter(word_of(w).addr()).load(Ordering::Relaxed), 0, "a filter count left behind");
    }
}

/// A model with process 0 waiting (through the engine) on `a` while it holds 0, and `a` then
/// changed to 1 here, as a waker does before it wakes.
fn waiter_on_a_then_a_changed() -> (Arc<Model>, thread::JoinHandle<Result<(), SharedError>>) {
    let m = Model::new();
    let m2 = m.clone();
    let waiter = thread::spawn(move || engine_wait(&m2, 0, &m2.a, 0));
    m.a.store(1, Ordering::Release);
    (m, waiter)
}

/// (A)/(B) on the shared table, through the engine: a waiter that saw the old value is woken
/// by the waker's wake (after its store), or sees the new value; never left asleep (a loom
/// deadlock), counted exactly when woken.
#[test]
fn the_engine_never_loses_a_shared_wakeup() {
    loom::model(|| {
        let (m, waiter) = waiter_on_a_then_a_changed();
        let woken = crate::wake::wake(&m.table(1), word_of(&m.a).addr(), 1, u64::MAX, Report::Count, Pays::Waker);
        match (waiter.join().unwrap(), woken.unwrap().count) {
            (Ok(()), 1) | (Err(SharedError::WouldBlock), 0) => {}
            other => panic!("wait and wake disagree: {other:?}"),
        }
        filters_empty(&m);
        check_consistent(&m, 2);
    });
}

/// A watched shared wait (the preload library's, `ops::wait_watching`): its thread sleeps on its
/// park word and on the word itself in the kernel. The word is changed, then woken by a waker of
/// ours or by the kernel alone (a raw system call, a process that is not preloaded): the waiter
/// is never left asleep (a loom deadlock); our wake counts it exactly when it took its record
/// (a waiter that left on the watched word first is not counted), and nothing is left queued.
#[test]
fn a_watched_shared_wait_ends_by_either_wake() {
    for ours in [true, false] {
        loom::model(move || {
            let m = Model::new();
            let m2 = m.clone();
            let waiter = thread::spawn(move || engine_wait_with(&m2, 0, &m2.a, 0, true));
            m.a.store(1, Ordering::Release);
            let a = word_of(&m.a).addr();
            let woken = if ours {
                crate::wake::wake(&m.table(1), a, 1, u64::MAX, Report::Count, Pays::Waker).unwrap().count
            } else {
                crate::parker::futex::wake_shared(&m.a, 1);
                0
            };
            match (waiter.join().unwrap(), woken) {
                (Ok(true), 1) | (Ok(false), 0) | (Err(SharedError::WouldBlock), 0) => {}
                other => panic!("wait and wake disagree: {other:?}"),
            }
            filters_empty(&m);
            check_consistent(&m, 2);
        });
    }
}

/// A shared requeue through the engine, racing the waiter of the word it changed: a waiter it
/// finds queued is moved (record, key and filter count) and woken through the target; one it
/// does not find sees the change and returns WouldBlock, and nothing was moved or woken.
#[test]
fn a_shared_requeue_moves_the_waiter_it_finds() {
    loom::model(|| {
        let (m, waiter) = waiter_on_a_then_a_changed();
        let (a, b) = (word_of(&m.a).addr(), word_of(&m.b).addr());
        let t = m.table(1);
        let moved =
            crate::requeue::requeue(&t, a, b, Some(|| m.a.load(Ordering::Relaxed) == 1), 0, 1, Pays::Waker).unwrap();
        let woken = crate::wake::wake(&t, b, 1, u64::MAX, Report::Count, Pays::Waker).unwrap().count;
        match waiter.join().unwrap() {
            Ok(()) => assert_eq!((moved, woken), (1, 1)),
            Err(SharedError::WouldBlock) => assert_eq!((moved, woken), (0, 0)),
            other => panic!("unexpected {other:?} (moved {moved}, woken {woken})"),
        }
        filters_empty(&m);
        check_consistent(&m, 2);
    });
}

/// A shared `FUTEX_WAKE_OP` through the engine (its filter looks, then the locks), racing the
/// waiter of the word it changes (`b`, which held 0: the operation sets it and says wake), with
/// both words in one bucket and in two: the waiter it finds queued is woken and counted; one it
/// does not find saw the new value and returns WouldBlock, and nobody is counted. Never left
/// asleep (a loom deadlock).
#[test]
fn a_shared_wake_op_wakes_the_second_words_waiter_or_it_saw_the_change() {
    for buckets in [1, 2] {
        loom::model(move || {
            let m = Model::with_buckets(buckets);
            let m2 = m.clone();
            let waiter = thread::spawn(move || engine_wait(&m2, 0, &m2.b, 0));
            let (a, b) = (word_of(&m.a).addr(), word_of(&m.b).addr());
            let op = || Ok::<bool, SharedError>(m.b.swap(1, Ordering::SeqCst) == 0);
            let woken = crate::wake_op::wake_op_looking(&m.table(1), a, b, (1, 1), Pays::Waker, op).unwrap();
            match waiter.join().unwrap() {
                Ok(()) => assert_eq!(woken, 1),
                Err(SharedError::WouldBlock) => assert_eq!(woken, 0),
                other => panic!("unexpected {other:?} (woken {woken})"),
            }
            filters_empty(&m);
            check_consistent(&m, 2);
        });
    }
}

/// A requeuer of `a`'s waiter onto `b` (in another bucket) dies at any step of the move — out of
/// the old queue (its new key written, not yet its own), or with its key and bucket changed and
/// not yet in the new queue — and another process then wakes `b`, then `a`: the waiter is never
/// left asleep (a loom deadlock) and never woken by no one. The repair leaves it where the move
/// stood (on `a` before its commit, on `b` after), and the wake of that word finds it.
#[test]
fn a_requeuer_dying_anywhere_in_a_move_loses_no_waiter() {
    assert_ne!(KEY.bucket(2), KEY_B.bucket(2));
    for die_at in [None, Some(Point::Moving), Some(Point::Rekeyed)] {
        loom::model(move || {
            let m = Model::with_buckets(2);
            let mw = m.clone();
            let waiter = thread::spawn(move || engine_wait(&mw, 0, &mw.a, 0));
            m.a.store(1, Ordering::Release);
            let (a, b) = (word_of(&m.a).addr(), word_of(&m.b).addr());
            // (A thread of its own: a thread that died is not used again.)
            let mr = m.clone();
            let moved = thread::spawn(move || {
                as_process(&mr, 1, die_at, |_| {
                    let holds = || mr.a.load(Ordering::Relaxed) == 1;
                    crate::requeue::requeue(&mr.table(1), a, b, Some(holds), 0, 1, Pays::Waker).unwrap()
                })
            })
            .join()
            .unwrap();
            let t = m.table(2);
            let woken_b = crate::wake::wake(&t, b, 1, u64::MAX, Report::Count, Pays::Waker).unwrap().count;
            let woken_a = crate::wake::wake(&t, a, 1, u64::MAX, Report::Count, Pays::Waker).unwrap().count;
            let outcome = waiter.join().unwrap();
            match (outcome, moved) {
                // Moved: only the target's wake finds it.
                (Ok(()), Some(1)) => assert_eq!((woken_a, woken_b), (0, 1)),
                // Found mid-move by the requeuer that died: on one word or the other, once.
                (Ok(()), None) => assert_eq!(woken_a + woken_b, 1),
                (Err(SharedError::WouldBlock), Some(0) | None) => assert_eq!((woken_a, woken_b), (0, 0)),
                other => panic!("unexpected {other:?} (woken a {woken_a}, b {woken_b})"),
            }
            if moved.is_some() {
                filters_empty(&m);
            } else {
                // The move counts the waiter on `b` before it takes the count on `a` away: a
                // requeuer that dies in between leaves `b`'s one too high (a wake's fast path
                // lost, never a wakeup), never one too low.
                let count = |w| m.seg.filter(word_of(w).addr()).load(Ordering::Relaxed);
                assert!(count(&m.a) == 0 && count(&m.b) <= 1);
            }
            check_consistent(&m, 2);
        });
    }
}

/// A requeue meets the waiter of a process that died queued (killed while it slept) and a live
/// waiter that may queue meanwhile: it moves and counts the live one only, and takes the dead
/// one out (neither moved nor counted, as a wake does not count it); the wake of the target
/// then counts exactly what the requeue moved.
#[test]
fn a_requeue_neither_moves_nor_counts_a_dead_waiter() {
    loom::model(|| {
        let m = Model::new();
        // Counted in `a`'s filter and queued, as a waiter is; then its process dies.
        counted_on_a(&m, &[0]);
        as_process(&m, 0, None, |h| enqueue(h).unwrap()).unwrap();
        m.dead[0].store(true, Ordering::Release);
        let mw = m.clone();
        let waiter = thread::spawn(move || engine_wait(&mw, 1, &mw.a, 0));
        let (a, b) = (word_of(&m.a).addr(), word_of(&m.b).addr());
        let t = m.table(2);
        let moved = crate::requeue::requeue(&t, a, b, None::<fn() -> bool>, 0, 2, Pays::Waker).unwrap();
        m.a.store(1, Ordering::Release);
        let woken = crate::wake::wake(&t, b, usize::MAX, u64::MAX, Report::Count, Pays::Waker).unwrap().count
            + crate::wake::wake(&t, a, usize::MAX, u64::MAX, Report::Count, Pays::Waker).unwrap().count;
        match waiter.join().unwrap() {
            Ok(()) => assert!(moved <= 1 && woken == 1, "moved {moved}, woken {woken}"),
            Err(SharedError::WouldBlock) => assert_eq!((moved, woken), (0, 0)),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(m.seg.record(0).unwrap().state.load(Ordering::Relaxed), REC_IDLE, "the dead record is left");
        filters_empty(&m);
        check_consistent(&m, 2);
    });
}
