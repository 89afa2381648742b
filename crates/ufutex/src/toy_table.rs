//! A third table, for tests only: waiters in plain vectors, one thread, no parking. The
//! operations written once (`waiter.rs`, `wake.rs`, `requeue.rs`) run on it unchanged, which is
//! what `engine.rs` promises a new kind of table; and with nothing concurrent in the way, the
//! tests below pin down what the generic code decides: which waiters a wake or a requeue takes,
//! where moved waiters go, what a wait whose word changed takes back, which index a waitv
//! reports.

use crate::engine::{Fate, Locked, Look, Pair, Pick, Placed, WaitTable, Want, Woken};
use crate::membarrier::Pays;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::convert::Infallible;

/// A waiter of the toy table: an id and the index a wake of it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Id {
    id: u32,
    index: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued(usize),
    Woken,
}

#[derive(Default)]
struct Inner {
    /// Per bucket: the queue (id, key, mask) and the count of queued and announced waiters.
    queues: Vec<VecDeque<(u32, usize, u64)>>,
    counts: Vec<u32>,
    /// Per waiter id: where it is.
    states: Vec<Option<State>>,
    locked: Vec<bool>,
}

/// `n` buckets; a key (any `usize`) goes to bucket `key % n`.
struct Toy(RefCell<Inner>);

impl Toy {
    fn new(n: usize) -> Toy {
        Toy(RefCell::new(Inner {
            queues: vec![VecDeque::new(); n],
            counts: vec![0; n],
            states: vec![None; 64],
            locked: vec![false; n],
        }))
    }

    fn bucket(&self, key: usize) -> usize {
        key % self.0.borrow().queues.len()
    }

    /// The ids queued on `key`, oldest first.
    fn queued(&self, key: usize) -> Vec<u32> {
        let i = self.0.borrow();
        i.queues[self.bucket(key)].iter().filter(|w| w.1 == key).map(|w| w.0).collect()
    }

    fn count(&self, key: usize) -> u32 {
        self.0.borrow().counts[self.bucket(key)]
    }

    fn state(&self, id: u32) -> Option<State> {
        self.0.borrow().states[id as usize]
    }

    fn guard(&self, b: usize, key: usize, target: usize) -> ToyLocked<'_> {
        let mut i = self.0.borrow_mut();
        assert!(!i.locked[b], "bucket {b} locked twice");
        i.locked[b] = true;
        ToyLocked { t: self, b, key, target }
    }
}

struct ToyLocked<'t> {
    t: &'t Toy,
    b: usize,
    key: usize,
    target: usize,
}

impl Drop for ToyLocked<'_> {
    fn drop(&mut self) {
        self.t.0.borrow_mut().locked[self.b] = false;
    }
}

/// Ids taken to be woken.
struct Taken(Vec<u32>);

impl Woken for Taken {
    fn new() -> Self {
        Taken(Vec::new())
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn wake_all(self) -> usize {
        self.0.len()
    }
}

impl Locked for ToyLocked<'_> {
    type Error = Infallible;
    type Woken = Taken;
    type Moved = Vec<(u32, u64)>;

    fn take(&mut self, pick: &mut impl Pick, woken: &mut Taken, moved: &mut Self::Moved) -> Result<(), Infallible> {
        let mut i = self.t.0.borrow_mut();
        let mut k = 0;
        while k < i.queues[self.b].len() {
            let (id, key, mask) = i.queues[self.b][k];
            match pick.pick(key == self.key, mask) {
                Fate::Stop => break,
                Fate::Skip | Fate::Stay => k += 1,
                Fate::Wake => {
                    i.queues[self.b].remove(k);
                    i.counts[self.b] -= 1;
                    i.states[id as usize] = Some(State::Woken);
                    woken.0.push(id);
                }
                Fate::Move => {
                    i.queues[self.b].remove(k);
                    moved.push((id, mask));
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self, moved: Self::Moved, from: Option<&mut Self>) -> Result<(), Infallible> {
        let mut i = self.t.0.borrow_mut();
        let n = moved.len() as u32;
        if let Some(from) = from {
            i.counts[self.b] += n;
            i.counts[from.b] -= n;
        }
        for (id, mask) in moved {
            i.queues[self.b].push_back((id, self.target, mask));
            i.states[id as usize] = Some(State::Queued(self.b));
        }
        Ok(())
    }

    fn retarget(&mut self) {
        self.key = self.target;
    }

    fn decay(&mut self) {}
}

impl WaitTable for Toy {
    type Key = usize;
    type Waiter<'w> = Id;
    type Announced<'t> = usize;
    type Locked<'t> = ToyLocked<'t>;
    type Error = Infallible;

    type At = ();

    fn look(&self, key: &usize, _pays: Pays) -> Look<()> {
        if self.count(*key) == 0 {
            Look::Nobody
        } else {
            Look::Lock { decay: false, at: () }
        }
    }

    fn lock(&self, key: &usize) -> Result<ToyLocked<'_>, Infallible> {
        Ok(self.guard(self.bucket(*key), *key, *key))
    }

    fn lock_pair(&self, from: &usize, to: &usize) -> Result<Pair<ToyLocked<'_>>, Infallible> {
        let (b1, b2) = (self.bucket(*from), self.bucket(*to));
        if b1 == b2 {
            return Ok(Pair::One(self.guard(b1, *from, *to)));
        }
        Ok(Pair::Two { from: self.guard(b1, *from, *to), to: self.guard(b2, *to, *to) })
    }

    fn announce(&self, w: &Want<'_, Self>) -> Result<usize, Infallible> {
        let b = self.bucket(w.key);
        self.0.borrow_mut().counts[b] += 1;
        Ok(b)
    }

    fn order(&self, _pays: Pays) {}

    fn order_one(&self, _: usize, _: &Want<'_, Self>, _: Pays) -> bool {
        true
    }

    fn place(&self, b: usize, w: &Want<'_, Self>) -> Result<Placed, Infallible> {
        let _g = self.guard(b, w.key, w.key);
        if w.word.load() != w.expected {
            self.withdraw(b, w);
            return Ok(Placed::Changed);
        }
        let mut i = self.0.borrow_mut();
        i.queues[b].push_back((w.waiter.id, w.key, w.mask));
        i.states[w.waiter.id as usize] = Some(State::Queued(b));
        Ok(Placed::Queued)
    }

    fn withdraw(&self, b: usize, _: &Want<'_, Self>) {
        self.0.borrow_mut().counts[b] -= 1;
    }

    fn dequeue_self(&self, w: Id) -> Result<bool, Infallible> {
        let state = self.state(w.id);
        let mut i = self.0.borrow_mut();
        i.states[w.id as usize] = None;
        Ok(match state {
            Some(State::Woken) => true,
            Some(State::Queued(b)) => {
                i.queues[b].retain(|q| q.0 != w.id);
                i.counts[b] -= 1;
                false
            }
            None => panic!("waiter {} was never queued", w.id),
        })
    }

    fn index(w: Id, _: usize) -> usize {
        w.index
    }
}

mod tests {
    use super::*;
    use crate::engine::infallible;
    use crate::requeue::{requeue, Refused};
    use crate::waiter::{enqueue, enqueue_all, take_back, Unqueued, Why};
    use crate::wake::{wake, Report};
    use crate::word::word_of;
    use std::sync::atomic::AtomicU32;

    /// Keys: 4 buckets; keys 0 and 4 share bucket 0, key 1 has bucket 1.
    const A: usize = 0;
    const A2: usize = 4;
    const B: usize = 1;

    /// Queue waiter `id` on `key` with `mask` (its word holds 0, as expected).
    fn queue(t: &Toy, id: u32, key: usize, mask: u64) {
        let w = AtomicU32::new(0);
        let want = Want::<Toy> { waiter: Id { id, index: 0 }, word: word_of(&w), expected: 0, key, mask };
        assert!(enqueue(t, &want, Pays::Waker).is_ok());
    }

    fn woken(t: &Toy, ids: &[u32]) -> Vec<u32> {
        ids.iter().copied().filter(|&id| t.state(id) == Some(State::Woken)).collect()
    }

    #[test]
    fn a_wake_takes_the_oldest_matching_waiters_of_its_key() {
        let t = Toy::new(4);
        queue(&t, 1, A, 0b01);
        queue(&t, 2, A2, 0b01); // same bucket, another key
        queue(&t, 3, A, 0b10);
        queue(&t, 4, A, 0b11);
        queue(&t, 5, A, 0b01);
        let r = infallible(wake(&t, A, 2, 0b01, Report::Count, Pays::Waker));
        assert_eq!((r.count, r.more), (2, false));
        assert_eq!(woken(&t, &[1, 2, 3, 4, 5]), [1, 4], "oldest first, mask 0b01 only");
        assert_eq!(t.queued(A), [3, 5]);
        assert_eq!(t.count(A), 3, "the bucket counts what is left: 2, 3 and 5");
        // `Rest` sees the match left behind; a mask that meets nobody wakes nobody.
        let r = infallible(wake(&t, A, 1, 0b10, Report::Rest, Pays::Waker));
        assert_eq!((r.count, r.more), (1, false), "3 was the last waiter with bit 1");
        queue(&t, 6, A, 0b01);
        let r = infallible(wake(&t, A, 1, 0b01, Report::Rest, Pays::Waker));
        assert_eq!((r.count, r.more), (1, true), "5 woken, 6 left");
        assert_eq!(infallible(wake(&t, A, 9, 0b100, Report::Count, Pays::Waker)).count, 0);
        assert_eq!(infallible(wake(&t, B, 9, !0, Report::Count, Pays::Waker)).count, 0, "no waiter: no lock");
        assert_eq!(infallible(wake(&t, A, 0, !0, Report::Count, Pays::Waker)).count, 0);
    }

    #[test]
    fn a_mask_of_zero_is_never_woken() {
        let t = Toy::new(4);
        queue(&t, 1, A, 0);
        assert_eq!(infallible(wake(&t, A, usize::MAX, !0, Report::Count, Pays::Waker)).count, 0);
        assert_eq!(t.queued(A), [1]);
    }

    #[test]
    fn a_requeue_wakes_the_oldest_and_moves_the_next_behind_the_targets_waiters() {
        for (target, same_bucket) in [(A2, true), (B, false)] {
            let t = Toy::new(4);
            queue(&t, 9, target, !0);
            for id in 1..=5 {
                queue(&t, id, A, !0);
            }
            let w = AtomicU32::new(7);
            let holds = Some(|| word_of(&w).load() == 7);
            assert_eq!(requeue(&t, A, target, holds, 1, 2, Pays::Waker), Ok(3), "same bucket: {same_bucket}");
            assert_eq!(woken(&t, &[1, 2, 3, 4, 5, 9]), [1]);
            assert_eq!(t.queued(A), [4, 5]);
            assert_eq!(t.queued(target), [9, 2, 3]);
            let left = if same_bucket { 5 } else { 2 };
            assert_eq!(t.count(A), left, "moved waiters count in their new bucket");
        }
    }

    #[test]
    fn a_requeue_onto_its_own_word_counts_its_waiters_in_place() {
        // As the kernel's: a waiter whose new key is in its bucket stays where it is.
        let t = Toy::new(4);
        for id in 1..=3 {
            queue(&t, id, A, !0);
        }
        assert_eq!(requeue(&t, A, A, None::<fn() -> bool>, 0, 1, Pays::Waker), Ok(1));
        assert_eq!(t.queued(A), [1, 2, 3]);
        assert_eq!(requeue(&t, A, A, None::<fn() -> bool>, 1, usize::MAX, Pays::Waker), Ok(3));
        assert_eq!(woken(&t, &[1, 2, 3]), [1]);
        assert_eq!(t.queued(A), [2, 3]);
        assert_eq!(t.count(A), 2, "counted, not moved: the bucket's count is unchanged");
    }

    #[test]
    fn a_requeue_refuses_when_the_word_changed_and_finds_nobody_when_none_waits() {
        let t = Toy::new(4);
        assert_eq!(requeue(&t, A, B, Some(|| false), 1, 1, Pays::Waker), Err(Refused::WouldBlock));
        assert_eq!(requeue(&t, A, B, Some(|| true), 1, 1, Pays::Waker), Ok(0));
        queue(&t, 1, A, !0);
        assert_eq!(requeue(&t, A, B, Some(|| false), 1, 1, Pays::Waker), Err(Refused::WouldBlock));
        assert_eq!(t.queued(A), [1], "nothing taken");
    }

    /// A wait on `words` (each expected to hold 0) on keys A, B and A2, entry `i` waiter `i`.
    fn wants_on(words: &[AtomicU32; 3]) -> Vec<Want<'_, Toy>> {
        let keys = [A, B, A2];
        let want = |i: usize| Want {
            waiter: Id { id: i as u32, index: i },
            word: word_of(&words[i]),
            expected: 0,
            key: keys[i],
            mask: !0,
        };
        (0..3).map(want).collect()
    }

    #[test]
    fn a_wait_on_many_stops_at_a_changed_word_and_takes_back_the_rest() {
        let t = Toy::new(4);
        let words = [AtomicU32::new(0), AtomicU32::new(1), AtomicU32::new(0)];
        let wants = wants_on(&words);
        let r = enqueue_all(&t, &wants, Pays::Waker);
        assert_eq!(r, Err(Unqueued { queued: 1, why: Why::Changed }), "entry 1 holds 1, not 0");
        assert_eq!(t.queued(A), [0]);
        assert_eq!((t.count(A), t.count(B)), (1, 0), "only the queued entry still counts");
        let s = take_back(&t, wants[..1].iter().map(|w| w.waiter));
        assert_eq!((s.woken, s.best), (0, None));
        assert_eq!(t.count(A), 0);
    }

    #[test]
    fn a_wait_on_many_reports_the_highest_index_a_waker_took() {
        let t = Toy::new(4);
        let words = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
        let wants = wants_on(&words);
        assert_eq!(enqueue_all(&t, &wants, Pays::Waker), Ok(()));
        assert_eq!(infallible(wake(&t, B, 1, !0, Report::Count, Pays::Waker)).count, 1);
        assert_eq!(infallible(wake(&t, A, 1, !0, Report::Count, Pays::Waker)).count, 1);
        let s = take_back(&t, wants.iter().map(|w| w.waiter));
        assert_eq!((s.woken, s.best), (2, Some(1)));
        assert_eq!((t.count(A), t.count(B)), (0, 0), "nothing left queued or counted");
    }
}
