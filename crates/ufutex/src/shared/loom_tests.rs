//! Loom models of the shared table's crash recovery. A model thread stands for a process; one
//! that "dies" at a fault point unwinds out of the operation without releasing anything (its
//! bucket guard keeps the lock: `fault::dying`), and only then is its slot dead — a process
//! that stops forever at that instruction. Another takes the lock over, repairs the queue from
//! the records (rebuild, pending kick) and goes on; the models check that the queue is exactly
//! the records that are queued, that a dead waiter is never counted, and that a wake is never
//! lost or counted twice, whatever the interleaving and wherever the death.
//!
//! `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib shared`

use super::fault::{self, Point};
use super::identity::{Class, SharedKey};
use super::lock::{Life, Liveness, Owner};
use super::queue::{lock_bucket, Host};
use super::segment::{Layout, Segment, NONE, REC_QUEUED, REC_WOKEN};
use super::surgery::{enqueue_locked, has_key, wake_one, walk};
use super::SharedError;
use crate::primitive::Ordering;
use loom::sync::atomic::AtomicBool;
use loom::sync::Arc;
use loom::thread;

const KEY: SharedKey = SharedKey { class: Class::Object, dev: 1, ino: 2, off: 64 };
const PROCS: u32 = 3;

/// The segment and which model "processes" have died.
struct Model {
    seg: Segment,
    dead: [AtomicBool; PROCS as usize],
}

impl Model {
    fn new() -> Arc<Model> {
        let seg = Segment::model(Layout { procs: PROCS, records: 1, buckets: 1 });
        for s in 0..PROCS {
            seg.slot(s).unwrap().used.store(1, Ordering::Relaxed); // record s is slot s's
        }
        Arc::new(Model { seg, dead: [AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false)] })
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

/// Wake every waiter on KEY: how many counted.
fn wake_all(h: &Proc<'_>) -> Result<usize, SharedError> {
    let g = lock_bucket(h, 0)?;
    let mut n = 0;
    walk(&g, |r, rec| {
        if has_key(rec, &KEY) && wake_one(&g, r)? {
            n += 1;
        }
        Ok(true)
    })?;
    Ok(n)
}

/// Take the lock as process `slot` (over a dead owner if need be) and check the queue is exactly
/// the Queued records, in ticket order.
fn check_consistent(m: &Model, slot: u32) {
    let h = Proc { m, slot };
    let g = lock_bucket(&h, 0).unwrap();
    let mut linked = Vec::new();
    walk(&g, |r, _| {
        linked.push(r);
        Ok(true)
    })
    .unwrap();
    let mut queued: Vec<(u64, u32)> = (0..PROCS)
        .filter(|&r| m.seg.record(r).unwrap().state.load(Ordering::Relaxed) == REC_QUEUED)
        .map(|r| (m.seg.record(r).unwrap().ticket.load(Ordering::Relaxed), r))
        .collect();
    queued.sort();
    assert_eq!(linked, queued.iter().map(|&(_, r)| r).collect::<Vec<_>>());
    assert_eq!(g.bucket.pending.load(Ordering::Relaxed), NONE);
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
        assert_eq!(super::park::park(&m.seg, 0, &[0], None), Ok(0));
        assert_eq!(waker.join().unwrap(), 1);
        assert_eq!(m.seg.record(0).unwrap().asleep.load(Ordering::Relaxed), 0);
    });
}
