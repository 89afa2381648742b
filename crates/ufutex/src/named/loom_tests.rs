//! Loom model of the namespace table's lock-free lookup against creation and removal: a
//! reader never sees a torn object (a key with another object's kind), never a removed object
//! as live, and finds a created object once its creation is over.
//!
//! `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib named`

use super::table::{Header, Key, NameSlot, Open, Slot, Table};
use crate::primitive::{AtomicU32, AtomicU64};
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
    slots: Vec<Slot>,
    names: Vec<NameSlot>,
}

impl Model {
    fn new(n: usize) -> Arc<Model> {
        Arc::new(Model {
            header: Header {
                magic: AtomicU64::new(0),
                version: AtomicU32::new(0),
                order: AtomicU32::new(0),
                lock: AtomicU64::new(0),
                progress: AtomicU64::new(0),
            },
            slots: (0..n).map(|_| Slot::empty()).collect(),
            names: (0..n).map(|_| NameSlot::empty()).collect(),
        })
    }

    fn table(&self) -> Table<'_> {
        Table { header: &self.header, slots: &self.slots, names: &self.names }
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
