//! Tests of `reentry.rs`: a signal handler's calls, stood in for by calls made between a
//! bucket's lock and unlock (a handler runs on top of its thread, which is what these do in
//! sequence). Their own module, above the operations they call (imports point down).

/// A signal handler's calls stand in as calls made between the lock and the unlock (the
/// handler runs on top of the thread, which is what these tests do in sequence).
#[cfg(not(ufutex_loom))]
mod tests {
    use crate::engine::WaitTable;
    use crate::error::WaitError;
    use crate::key::Key;
    use crate::membarrier::Pays;
    use crate::reentry::{busy, episode, nothing_deferred, INLINE, PER_PAGE};
    use crate::requeue::requeue_keys;
    use crate::tables::Tables;
    use crate::tables::{NumaMode, Slots};
    use crate::wait::wait_word;
    use crate::wake::{wake_private, Report};
    use crate::word::word_of;
    use std::sync::atomic::AtomicU32;
    use std::sync::atomic::Ordering;

    fn tables() -> Tables {
        Tables::new(Slots::Fixed(2), NumaMode::Off).expect("a small table")
    }

    fn key(w: &AtomicU32) -> Key {
        Key::private(word_of(w).addr())
    }

    /// Wait until `n` waiters are queued in `t` (no lock may be held by the caller).
    fn await_queued(t: &Tables, n: usize) {
        while t.queued_waiters() != n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_wake_inside_a_critical_section_is_made_when_it_ends() {
        let t = tables();
        let w = AtomicU32::new(0);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| wait_word(&t, word_of(&w), 0, !0, None, Pays::Waiter));
            await_queued(&t, 1);
            w.store(1, Ordering::SeqCst);
            let g = t.lock(&key(&w));
            assert!(busy());
            let r = wake_private(&t, key(&w), 1, !0, Report::Rest, Pays::Waiter);
            assert_eq!((r.count, r.more), (0, true), "deferred: none now, more conservatively");
            assert_eq!(t.deferrals(), 1);
            drop(g);
            assert!(!busy());
            assert_eq!(t.deferrals(), 0, "made at the unlock");
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        assert_eq!(t.queued_waiters(), 0);
    }

    /// A requeue's two buckets are released together (`BucketGuard::unlock_both`), the count of
    /// held locks going down by two: a wake deferred while both were held is made then.
    #[test]
    fn a_wake_deferred_while_a_requeue_holds_two_buckets_is_made_at_their_unlock() {
        use crate::engine::Pair;
        let t = tables();
        let words: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
        let w = &words[0];
        let two_buckets = |o: &AtomicU32| {
            let pair = t.lock_pair(&key(w), &key(o)).expect("private tables do not fail");
            let two = matches!(pair, Pair::Two { .. });
            pair.unlock();
            two
        };
        let other = words[1..].iter().find(|o| two_buckets(o)).expect("a word in the other bucket");
        assert!(!busy());
        std::thread::scope(|s| {
            let waiter = s.spawn(|| wait_word(&t, word_of(w), 0, !0, None, Pays::Waiter));
            await_queued(&t, 1);
            w.store(1, Ordering::SeqCst);
            let pair = t.lock_pair(&key(w), &key(other)).expect("private tables do not fail");
            assert!(matches!(pair, Pair::Two { .. }));
            assert!(busy());
            let r = wake_private(&t, key(w), 1, !0, Report::Count, Pays::Waiter);
            assert_eq!(r.count, 0, "deferred");
            assert_eq!(t.deferrals(), 1);
            pair.unlock();
            assert!(!busy());
            assert_eq!(t.deferrals(), 0, "made at the unlock of both");
            assert_eq!(waiter.join().unwrap(), Ok(()));
        });
        assert_eq!(t.queued_waiters(), 0);
    }

    #[test]
    fn deferred_wakes_past_the_inline_slots_go_to_pages_and_all_are_made() {
        let t = tables();
        let words: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
        let others: Vec<AtomicU32> = (0..600).map(|_| AtomicU32::new(0)).collect();
        std::thread::scope(|s| {
            let t: &Tables = &t;
            let waiters: Vec<_> =
                words.iter().map(|w| s.spawn(move || wait_word(t, word_of(w), 0, !0, None, Pays::Waiter))).collect();
            await_queued(t, words.len());
            let g = t.lock(&key(&others[0]));
            // Words whose bucket has a waiter are deferred (the others find nobody at once).
            for o in &others {
                assert_eq!(wake_private(t, key(o), 1, !0, Report::Count, Pays::Waiter).count, 0);
            }
            let deferred = t.deferrals() as usize;
            assert!(deferred > INLINE + PER_PAGE, "{deferred} deferred: two pages at least");
            for w in &words {
                w.store(1, Ordering::SeqCst);
                assert_eq!(wake_private(t, key(w), 1, !0, Report::Count, Pays::Waiter).count, 0);
            }
            drop(g);
            assert_eq!(t.deferrals(), 0);
            assert!(nothing_deferred());
            for w in waiters {
                assert_eq!(w.join().unwrap(), Ok(()));
            }
        });
        assert_eq!(t.queued_waiters(), 0);
    }

    /// A deferred wake keeps a pointer to its domain's tables until its thread makes it, and a
    /// `Domain` may be moved meanwhile (here, its old place then holds another domain): the
    /// tables do not move with it, so the wake is made on them and on no other domain's.
    #[test]
    fn a_deferred_wake_follows_its_domain_when_the_domain_moves() {
        use crate::{Domain, DomainConfig};
        let config = || DomainConfig::new().slots(Slots::Fixed(2));
        let mut place = Domain::new(config()).unwrap();
        let other = Domain::new(config()).unwrap();
        let w = AtomicU32::new(0);
        let g = other.tables().lock(&key(&w));
        crate::wake::defer_private(place.tables(), key(&w), 1, !0);
        assert_eq!(place.tables().deferrals(), 1);
        let moved = std::mem::replace(&mut place, Domain::new(config()).unwrap());
        drop(g);
        let left = (moved.tables().deferrals(), place.tables().deferrals());
        if left != (0, 0) {
            // A drop would wait for the wake for ever: fail instead of hanging.
            std::mem::forget((moved, place));
        }
        assert_eq!(left.0, 0, "made on the moved domain's tables");
        assert_eq!(left.1, 0, "and not on the domain now in its old place");
    }

    /// Wakes deferred while the drain runs (as by handlers that interrupt it) are made by the
    /// same drain, across as many pages as they need, and the drain gives every page back.
    #[test]
    fn wakes_deferred_during_the_drain_are_made_and_no_page_is_kept() {
        use crate::reentry::{defer, locking, unlocked};
        use std::sync::atomic::AtomicUsize;
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        // Each entry of depth `n` > 0 leaves three of depth `n - 1` when it is made.
        fn run(_: *const (), key: Key, n: usize, _: u64) {
            RUNS.fetch_add(1, Ordering::Relaxed);
            for _ in 0..if n > 0 { 3 } else { 0 } {
                defer(run, std::ptr::null(), key, n - 1, 0);
            }
        }
        let roots = INLINE + PER_PAGE + 1;
        locking();
        for _ in 0..roots {
            defer(run, std::ptr::null(), Key::private(64), 4, 0);
        }
        unlocked();
        assert_eq!(RUNS.load(Ordering::Relaxed), roots * (1 + 3 + 9 + 27 + 81));
        assert!(nothing_deferred());
        assert!(!busy());
    }

    #[test]
    fn a_requeue_inside_a_critical_section_wakes_instead_of_moving() {
        let t = tables();
        let (from, to) = (AtomicU32::new(0), AtomicU32::new(0));
        std::thread::scope(|s| {
            let waiters: Vec<_> =
                (0..2).map(|_| s.spawn(|| wait_word(&t, word_of(&from), 0, !0, None, Pays::Waiter))).collect();
            await_queued(&t, 2);
            let g = t.lock(&key(&to));
            let check = Some((word_of(&from), 1));
            assert_eq!(requeue_keys(&t, key(&from), key(&to), check, 1, 1, Pays::Waiter), Err(WaitError::WouldBlock));
            let check = Some((word_of(&from), 0));
            assert_eq!(requeue_keys(&t, key(&from), key(&to), check, 1, 1, Pays::Waiter), Ok(0));
            drop(g);
            for w in waiters {
                assert_eq!(w.join().unwrap(), Ok(()), "woken, not moved to `to`");
            }
        });
        assert_eq!(t.queued_waiters(), 0);
    }

    #[test]
    fn a_wait_inside_a_critical_section_or_a_wait_does_not_queue() {
        let t = tables();
        let w = AtomicU32::new(0);
        let g = t.lock(&key(&w));
        assert_eq!(
            wait_word(&t, word_of(&w), 1, !0, None, Pays::Waiter),
            Err(WaitError::WouldBlock),
            "the value first"
        );
        assert_eq!(wait_word(&t, word_of(&w), 0, !0, None, Pays::Waiter), Err(WaitError::Interrupted));
        drop(g);
        let e = episode().expect("not in a wait");
        assert!(episode().is_none(), "a wait inside a wait");
        assert_eq!(wait_word(&t, word_of(&w), 0, !0, None, Pays::Waker), Err(WaitError::Interrupted));
        drop(e);
        let timeout = Some(crate::deadline::Deadline::from(std::time::Duration::from_millis(1)).into());
        assert_eq!(
            wait_word(&t, word_of(&w), 0, !0, timeout, Pays::Waiter),
            Err(WaitError::TimedOut),
            "afterwards, a wait"
        );
        assert_eq!(t.queued_waiters(), 0);
    }

    /// A handler that interrupts the set-up of the shared table (`process.rs`) cannot wait for
    /// it: its process-shared wake and requeue are made when the set-up ends, and its wait
    /// fails with `Interrupted` without queueing.
    #[test]
    fn shared_calls_inside_a_set_up_wait_for_nothing() {
        use crate::reentry::setup;
        use crate::shared::kernel::tests::Mapping;
        use crate::shared::{self, SharedError};
        let page = Mapping::anon();
        let (w, to) = (page.u32(0), page.u32(64));
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..2).map(|_| s.spawn(|| shared::wait(w, 0, None))).collect();
            // Both queued: a requeue of the word onto itself moves (and counts) its waiters.
            while shared::requeue(w, 0, w, 0, usize::MAX) != Ok(2) {
                assert!(!waiters.iter().any(|x| x.is_finished()), "a waiter returned early");
                std::thread::yield_now();
            }
            w.store(1, Ordering::SeqCst);
            let g = setup().expect("not in a set-up");
            assert!(setup().is_none(), "a set-up inside a set-up");
            assert!(busy());
            assert_eq!(shared::wake(w, 1), Ok(0), "deferred");
            assert_eq!(shared::requeue(w, 1, to, 0, 1), Ok(0), "deferred as a wake");
            assert_eq!(shared::requeue(w, 7, to, 0, 1), Err(SharedError::WouldBlock), "the value first");
            assert_eq!(shared::wait(to, 0, None), Err(SharedError::Interrupted));
            drop(g);
            assert!(!busy());
            assert!(nothing_deferred());
            for waiter in waiters {
                assert_eq!(waiter.join().unwrap(), Ok(()));
            }
        });
    }
}

/// loom: a handler's wake (made while its thread holds a bucket lock, as a handler that
/// interrupted it would) races a waiter of the same word. The wake is deferred if it finds the
/// waiter counted, and made at the unlock: the waiter saw the new value or is woken, never
/// left asleep (a loom deadlock) or queued. Run by `25-loom`.
#[cfg(ufutex_loom)]
mod loom_models {
    use crate::error::WaitError;
    use crate::key::Key;
    use crate::membarrier::Pays;
    use crate::primitive::{AtomicU32, Ordering};
    use crate::tables::{NumaMode, Slots, Tables};
    use crate::wait::wait_word;
    use crate::wake::{wake_private, Report};
    use crate::word::word_of;
    use std::sync::Arc;

    fn model(pays: Pays) {
        loom::model(move || {
            let t = Arc::new(Tables::new(Slots::Fixed(2), NumaMode::Off).expect("a small table"));
            let w = Arc::new(AtomicU32::new(0));
            let (t2, w2) = (t.clone(), w.clone());
            let waiter = loom::thread::spawn(move || wait_word(&t2, word_of(&*w2), 0, !0, None, pays));
            let key = Key::private(word_of(&*w).addr());
            w.store(1, Ordering::SeqCst);
            let g = crate::engine::WaitTable::lock(&*t, &key).expect("private tables do not fail");
            let r = wake_private(&t, key, 1, !0, Report::Count, pays);
            assert_eq!(r.count, 0, "inside the critical section: deferred or nobody");
            drop(g);
            match waiter.join().expect("the waiter") {
                Ok(()) | Err(WaitError::WouldBlock) => {}
                Err(e) => panic!("an untimed wait ended with {e:?}"),
            }
            assert_eq!(t.queued_waiters(), 0);
            assert_eq!(t.deferrals(), 0);
        });
    }

    #[test]
    fn a_deferred_wake_never_loses_the_waiter_paying_waker() {
        model(Pays::Waker);
    }

    #[test]
    fn a_deferred_wake_never_loses_the_waiter_paying_waiter() {
        model(Pays::Waiter);
    }
}
