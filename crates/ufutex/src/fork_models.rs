//! loom models of the fork handlers' locking (`fork.rs`): the prepare handler's gate and the
//! parent's release, racing a wait (whose thread's first wait takes the gate to size the
//! table), a requeue between two buckets and a resize (which holds the gate throughout). A
//! deadlock or a lost wakeup shows as a loom deadlock; nothing may be left queued. (What the
//! child does runs with one thread: `tests/fork.rs`.) Run by `25-loom` (`--lib`).
use crate::error::WaitError;
use crate::key::Key;
use crate::membarrier::Pays;
use crate::primitive::AtomicU32;
use crate::primitive::Ordering;
use crate::tables::{hold_for_fork, NumaMode, Slots, Tables};
use crate::wait::{wait_key, Wakers};
use crate::word::word_of;
use std::sync::Arc;

/// Under loom an atomic is 8 bytes and the bucket is picked by address bits 2 and up
/// (`Key::hash`): `a` (8 bytes in) and `b` (16 bytes in) land in different buckets of a
/// 4-slot table.
#[repr(C, align(64))]
struct Words {
    _pad: AtomicU32,
    a: AtomicU32,
    b: AtomicU32,
}

fn setup() -> (Arc<Tables>, Arc<Words>) {
    let t = Arc::new(Tables::new(Slots::Fixed(4), NumaMode::Off).expect("a small table"));
    let w = Arc::new(Words { _pad: AtomicU32::new(0), a: AtomicU32::new(0), b: AtomicU32::new(0) });
    (t, w)
}

/// One wait on `a` for 0: woken (Ok) or the value changed first.
fn waiter(t: &Arc<Tables>, w: &Arc<Words>) -> loom::thread::JoinHandle<()> {
    let (t, w) = (t.clone(), w.clone());
    loom::thread::spawn(move || {
        let word = word_of(&w.a);
        match wait_key(&t, word, Key::private(word.addr()), 0, u64::MAX, None, Wakers::Ufutex, Pays::Waiter) {
            Ok(()) | Err(WaitError::WouldBlock) => {}
            Err(e) => panic!("an untimed wait ended with {e:?}"),
        }
    })
}

fn forker() -> loom::thread::JoinHandle<()> {
    loom::thread::spawn(|| hold_for_fork().release())
}

fn wake(t: &Tables, w: &AtomicU32) {
    crate::wake::wake_word(t, word_of(w), usize::MAX, u64::MAX, Pays::Waiter);
}

#[test]
fn the_handlers_race_a_requeue_between_two_buckets() {
    loom::model(|| {
        let (t, w) = setup();
        let (waiting, forking) = (waiter(&t, &w), forker());
        let (a, b) = (word_of(&w.a), word_of(&w.b));
        let _ = crate::requeue::requeue_words(&t, a, 0, b, 0, 1, Pays::Waiter);
        w.a.store(1, Ordering::SeqCst);
        wake(&t, &w.a);
        wake(&t, &w.b);
        waiting.join().expect("the waiter");
        forking.join().expect("the forker");
        assert_eq!(t.queued_waiters(), 0);
    });
}

#[test]
fn the_handlers_race_a_resize() {
    loom::model(|| {
        let (t, w) = setup();
        let (waiting, forking) = (waiter(&t, &w), forker());
        t.set_slots(Slots::Fixed(4), false).expect("a resize");
        w.a.store(1, Ordering::SeqCst);
        wake(&t, &w.a);
        waiting.join().expect("the waiter");
        forking.join().expect("the forker");
        assert_eq!(t.queued_waiters(), 0);
    });
}
