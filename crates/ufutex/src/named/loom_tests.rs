//! Loom model of the namespace table's lock-free lookup against creation and removal: a
//! reader never sees a torn object (a key with another object's kind), never a removed object
//! as live, and finds a created object once its creation is over.
//!
//! `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib named`

use super::table::{
    Entry, Growing, Header, Key, Ledgers, Levels, NoLedgers, OneLevel, Open, Ref, Table, COUNTED, E_FREE, E_HELD,
};
use crate::primitive::{AtomicU16, AtomicU32, AtomicU64};
use crate::shared::lock::{Life, Liveness, Owner};
use loom::sync::Arc;
use loom::thread;

struct Alive;
impl Liveness for Alive {
    fn life(&self, _o: Owner) -> Life {
        Life::Alive
    }
}

const ME: Owner = Owner { slot: 0, gen: 1 };

struct Model {
    header: Header,
    level: OneLevel,
}

impl Model {
    fn new(n: usize) -> Arc<Model> {
        Arc::new(Model { header: Header::empty(), level: OneLevel::new(n) })
    }

    fn table(&self) -> Table<'_> {
        Table::new(&self.header, &self.level, &NoLedgers)
    }
}

/// The writer creates key 5 (kind 1), removes it, and creates key 6 (kind 2) in the same slot
/// (a one-slot table); the reader looks both up meanwhile: found, each is itself.
#[test]
fn lookups_never_see_a_torn_or_removed_object() {
    loom::model(|| {
        let m = Model::new(1); // one slot: key 6 takes 5's
        let m2 = m.clone();
        let nowake = |_: &AtomicU32| {};
        let writer = thread::spawn(move || {
            let t = m2.table();
            let nowake = |_: &AtomicU32| {};
            t.create(Key::Id(5), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
            t.remove(Key::Id(5), ME, &Alive, &nowake).unwrap();
            t.create(Key::Id(6), (2, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        });
        let t = m.table();
        // A scheduling point: without one loom runs the reader to its end before the writer
        // starts, and explores nothing else.
        thread::yield_now();
        // Each object's own generation too: 5 was generation 0, its removal made the slot's
        // generation 1, which 6 took. A handle made from a torn read would not work.
        if let Some(f) = t.lookup(Key::Id(6)) {
            assert_eq!((f.kind, f.gen), (2, 1), "key 6 with another object's kind or generation");
        }
        if let Some(f) = t.lookup(Key::Id(5)) {
            assert_eq!((f.kind, f.gen), (1, 0), "key 5 with another object's kind or generation");
        }
        writer.join().unwrap();
        // After the writer: 6 is found, 5 is not, and a handle to the first object fails.
        assert_eq!(t.lookup(Key::Id(6)).map(|f| f.kind), Some(2));
        assert_eq!(t.lookup(Key::Id(5)), None);
        let _ = nowake;
    });
}

/// Model processes 0..3 for the counted-object model: 1 may die (`dead`).
struct Procs {
    dead: [loom::sync::atomic::AtomicBool; 3],
}

impl Liveness for Procs {
    fn life(&self, o: Owner) -> Life {
        match self.dead.get(o.slot as usize) {
            Some(d) if d.load(std::sync::atomic::Ordering::Acquire) => Life::Dead,
            Some(_) => Life::Alive,
            None => Life::Corrupt,
        }
    }
}

/// A ledger of one entry per model process.
struct OneEach {
    entries: Vec<Vec<Entry>>,
}

impl Ledgers for OneEach {
    fn entries(&self, ledger: u32) -> Option<&[Entry]> {
        self.entries.get(ledger as usize).map(Vec::as_slice)
    }
}

fn entry() -> Entry {
    Entry { slot: AtomicU32::new(0), gen: AtomicU32::new(0), state: AtomicU32::new(E_FREE), _pad: AtomicU32::new(0) }
}

struct Counted {
    m: Arc<Model>,
    ledgers: OneEach,
    procs: Procs,
}

impl Counted {
    fn table(&self) -> Table<'_> {
        Table::new(&self.m.header, &self.m.level, &self.ledgers)
    }

    fn r(&self, p: u32) -> Ref<'_> {
        Ref { ledger: p, entries: &self.ledgers.entries[p as usize], index: 0 }
    }

    fn me(p: u32) -> Owner {
        Owner { slot: p, gen: 1 }
    }
}

const KIND: u32 = 1 | COUNTED;

/// Process 0 holds a counted object; process 1 opens it (taking a reference) and lets go,
/// while process 0 lets go of its own or keeps it; process 1 may die taking or giving back its
/// reference. Then process 2 takes the lock (finishing a dead changer's change) and reaps
/// process 1's ledger if it died: the object lives exactly if process 0 kept it, with that one
/// holder, and no other entry is left; a reader that looked meanwhile saw it whole or not at all.
#[test]
fn the_last_holder_removes_it_even_when_one_dies_midway() {
    use crate::shared::fault::{self, Point};
    for keeps in [false, true] {
        for die_at in [None, Some(Point::Holding), Some(Point::Releasing)] {
            model_holders(keeps, die_at);
        }
    }
}

fn model_holders(keeps: bool, die_at: Option<crate::shared::fault::Point>) {
    use crate::shared::fault;
    {
        loom::model(move || {
            let c = Arc::new(Counted {
                m: Model::new(2),
                ledgers: OneEach { entries: (0..3).map(|_| vec![entry()]).collect() },
                procs: Procs { dead: std::array::from_fn(|_| loom::sync::atomic::AtomicBool::new(false)) },
            });
            let nowake = |_: &AtomicU32| {};
            let t = c.table();
            let (f, _) = t
                .locked(Counted::me(0), &c.procs, &nowake, || {
                    t.create_locked(Key::Id(5), (KIND, 0, 0), Open::CreateNew, Some(c.r(0)), &Alive)
                })
                .unwrap()
                .unwrap();
            let c1 = c.clone();
            let opener = thread::spawn(move || {
                let t = c1.table();
                let nowake = |_: &AtomicU32| {};
                fault::arm(die_at);
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let got = t
                        .locked(Counted::me(1), &c1.procs, &nowake, || {
                            match t.create_locked(Key::Id(5), (KIND, 0, 0), Open::Existing, Some(c1.r(1)), &Alive) {
                                Ok((f, true)) => {
                                    t.add_ref(c1.r(1), f);
                                    true
                                }
                                _ => false, // died already: its last holder let go first
                            }
                        })
                        .unwrap();
                    if got {
                        t.locked(Counted::me(1), &c1.procs, &nowake, || t.drop_ref(c1.r(1), &nowake)).unwrap();
                    }
                }));
                fault::arm(None);
                if r.is_err() {
                    c1.procs.dead[1].store(true, std::sync::atomic::Ordering::Release);
                }
            });
            let c2 = c.clone();
            let reader = thread::spawn(move || {
                if let Some(g) = c2.table().lookup(Key::Id(5)) {
                    assert_eq!((g.kind, g.gen), (KIND, 0), "a torn object");
                }
            });
            if !keeps {
                t.locked(Counted::me(0), &c.procs, &nowake, || t.drop_ref(c.r(0), &nowake)).unwrap();
            }
            opener.join().unwrap();
            reader.join().unwrap();
            // Process 2: any change finishes a dead changer's; then the dead one's ledger.
            t.locked(Counted::me(2), &c.procs, &nowake, || {
                if c.procs.dead[1].load(std::sync::atomic::Ordering::Acquire)
                    && c.ledgers.entries[1][0].state.load(std::sync::atomic::Ordering::Relaxed) != E_FREE
                {
                    t.drop_ref(c.r(1), &nowake);
                }
            })
            .unwrap();
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            if keeps {
                let s = t.check(f.slot, f.gen).expect("an object its holder keeps died");
                assert_eq!(s.holders.load(relaxed), 1, "its one holder");
                assert_eq!(c.m.header.live(), 1);
                assert_eq!(c.ledgers.entries[0][0].state.load(relaxed), E_HELD);
            } else {
                assert_eq!(t.lookup(Key::Id(5)), None, "an object no one holds lives on");
                assert!(t.check(f.slot, f.gen).is_none());
                assert_eq!(c.m.header.live(), 0);
                assert_eq!(c.ledgers.entries[0][0].state.load(relaxed), E_FREE);
            }
            for l in &c.ledgers.entries[1..] {
                assert_eq!(l[0].state.load(relaxed), E_FREE);
            }
            assert_eq!(c.m.header.ref_intent.load(std::sync::atomic::Ordering::Relaxed), 0);
        });
    }
}

/// The writer creates keys 5 and 6 in a namespace of one slot, which grows a level for each
/// (writing the level hints: one shared by both keys, or one each); the reader looks them up
/// meanwhile: each is itself when found, and both are found after.
#[test]
fn lookups_across_a_growing_table() {
    lookups_across_growth(1);
    lookups_across_growth(2);
}

fn lookups_across_growth(hints: usize) {
    loom::model(move || {
        let m = Arc::new((Header::empty(), Growing::new(1, 3, hints)));
        let m2 = m.clone();
        let writer = thread::spawn(move || {
            let t = Table::new(&m2.0, &m2.1, &NoLedgers);
            let nowake = |_: &AtomicU32| {};
            t.create(Key::Id(5), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
            t.create(Key::Id(6), (2, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
        });
        let t = Table::new(&m.0, &m.1, &NoLedgers);
        thread::yield_now();
        let found: Vec<bool> = [(6, 2), (5, 1)]
            .into_iter()
            .map(|(key, kind)| {
                let f = t.lookup(Key::Id(key));
                if let Some(f) = f {
                    assert_eq!((f.kind, f.gen), (kind, 0), "key {key} torn");
                }
                f.is_some()
            })
            .collect();
        // 5 was made before 6: whoever sees 6 sees 5 (in level 0, by its hint once there are two).
        assert!(!found[0] || found[1], "6 found, 5 not");
        writer.join().unwrap();
        assert_eq!(t.lookup(Key::Id(5)).map(|f| f.kind), Some(1));
        assert_eq!(t.lookup(Key::Id(6)).map(|f| f.kind), Some(2));
        assert_eq!(m.0.levels(), 3, "a level for each");
    });
}

/// Keys 5 and 6 fill half of level 0; while the writer makes 7 (and with it a second level and
/// level 0's hints), every lookup of 5 finds it: a reader that sees the new level sees the
/// hints of the objects that were there before it.
#[test]
fn an_object_made_before_the_growth_is_always_found() {
    for hints in [1, 2] {
        loom::model(move || {
            let m = Arc::new((Header::empty(), Growing::new(4, 2, hints)));
            let nowake = |_: &AtomicU32| {};
            let t = Table::new(&m.0, &m.1, &NoLedgers);
            for k in [5, 6] {
                t.create(Key::Id(k), (1, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
            }
            let m2 = m.clone();
            let writer = thread::spawn(move || {
                let t = Table::new(&m2.0, &m2.1, &NoLedgers);
                t.create(Key::Id(7), (2, 0, 0), Open::CreateNew, ME, &Alive, &nowake).unwrap();
            });
            for _ in 0..2 {
                assert_eq!(t.lookup(Key::Id(5)).map(|f| f.kind), Some(1), "5 lost while the table grew");
                thread::yield_now();
            }
            writer.join().unwrap();
            assert_eq!(m.0.levels(), 2);
        });
    }
}
