//! The ring words of the Linux parker (`linux.rs`): process-wide futex words that threads sleep
//! on alone, each with a bit of its own (`FUTEX_WAIT_BITSET`), so that one wake can name
//! exactly the threads a waker took, by their bits.
//!
//! There are [`RINGS`] words of 32 *slots* each. A thread about to sleep takes a free slot
//! ([`take`]) and gives it back when its sleep returns ([`Slot`]'s drop): while it sleeps, no
//! other thread has its bit on its word, so a wake of that bit wakes that thread and no other —
//! the precision of a wake on the thread's own word — while the threads a waker took that share
//! a word are woken in one call, as the kernel wakes the threads that share a futex word.
//!
//! A thread looks for a slot first on the word of its bucket's bell (by address), so the
//! threads of one bucket share few words and a waker of many of them makes few calls. When
//! every slot is taken, `take` says so and the thread sleeps as before (`linux.rs`).
//!
//! A slot given back may be taken by another thread at once, while a waker that read the first
//! thread's flags is still about to wake that bit: the second thread then wakes for nothing,
//! finds its count short and sleeps again. Nothing else can go wrong with a late wake.
//!
//! # Owed wakes
//!
//! A waker of threads on several words makes the kernel call for the first of them and leaves
//! the rest *owed* ([`owe`]): the bits on the word's `owed`, and the word's bit in [`OWED`].
//! Each thread just woken, back from its sleep, claims one owed word ([`Take::One`]) and makes
//! its wake, and the waker claims whatever is still owed after its own call ([`Take::All`]).
//! The first threads woken most often run on the other CPU, or on the waker's while the waker
//! waits behind them: so the wakes are made from both CPUs, a word at a time by whichever CPU
//! gets to it first, and the threads each wakes are placed from there instead of all queueing
//! behind the waker. Why each owed wake is made once, and always:
//! - a claim takes the word's `owed` with a swap, so a bit is taken by one claim, which makes
//!   its wake; before that it takes the word off `OWED` (a swap of all words, or a `fetch_and`
//!   of one that finds it set), so that the threads that come back after it find only the
//!   words still owed, and nothing (one load, no write) once all are taken;
//! - the waker's own claim comes after its `owe`: its load of `OWED` sees its words' bits, or
//!   a later read-modify-write by a claim that then takes those words' `owed`, and with them
//!   the bits (Release and Acquire on `OWED`: the `owed` written before it is seen after it);
//! - the waker bumped the word's sequence before it owed the wake, so a thread that reads the
//!   sequence after the bump does not sleep on it (the kernel's compare fails), and one asleep
//!   before the bump is found by the owed wake whenever it is made.
//!
//! In wakes of 128 threads (four words) owing half of the words lifted "until all ran" by
//! 3–8% (BENCHMARKS.md, sixty-seventh session); owing all but the first, a word per claim,
//! by another ~3% (sixty-eighth session).

use crate::primitive::{AtomicU32, AtomicU64, Ordering};

/// Ring words, and the bits of each that are slots (loom: two words of two slots, so that a
/// model of three sleepers has threads that share a word and threads that do not).
#[cfg(not(ufutex_loom))]
pub(super) const RINGS: usize = 64;
#[cfg(not(ufutex_loom))]
const FULL: u32 = u32::MAX;
#[cfg(ufutex_loom)]
pub(super) const RINGS: usize = 2;
#[cfg(ufutex_loom)]
const FULL: u32 = 0b11;

/// Slots in all: the parker word keeps a slot's number in [`SLOT_BITS`] bits.
pub(super) const SLOTS: usize = RINGS * 32;
pub(super) const SLOT_BITS: u32 = 11;
const _: () = assert!(SLOTS <= 1 << SLOT_BITS);

/// One ring word and which of its slots are taken, on a line of their own.
#[repr(align(64))]
pub(super) struct Ring {
    /// The futex word: a sequence that every wake bumps before it calls the kernel, so that a
    /// thread that read it before the wake fails the kernel's compare instead of sleeping.
    pub(super) seq: AtomicU32,
    /// Bit `b` set: slot `b` of this word is taken.
    used: AtomicU32,
    /// Bits whose wake a waker left to whoever claims it first (module docs).
    owed: AtomicU32,
}

impl Ring {
    crate::primitive::const_unless_loom! {
        fn new() -> Ring {
            Ring { seq: AtomicU32::new(0), used: AtomicU32::new(0), owed: AtomicU32::new(0) }
        }
    }
}

#[cfg(not(ufutex_loom))]
static ALL: [Ring; RINGS] = [const { Ring::new() }; RINGS];
/// Bit `i` set: ring word `i` may have owed wakes (module docs).
#[cfg(not(ufutex_loom))]
static OWED: AtomicU64 = AtomicU64::new(0);
const _: () = assert!(RINGS <= 64);

#[cfg(ufutex_loom)]
loom::lazy_static! {
    static ref ALL: [Ring; RINGS] = [Ring::new(), Ring::new()];
    static ref OWED: AtomicU64 = AtomicU64::new(0);
}

/// Ring word `i`.
pub(super) fn ring(i: usize) -> &'static Ring {
    &ALL[i]
}

/// A taken slot: `number / 32` is its ring word, `number % 32` its bit there. Given back when
/// dropped.
pub(super) struct Slot {
    pub(super) number: u32,
}

impl Slot {
    pub(super) fn ring(&self) -> &'static Ring {
        ring(self.number as usize / 32)
    }

    pub(super) fn bit(&self) -> u32 {
        1 << (self.number % 32)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Relaxed: the slot table only keeps two sleepers off one bit (a late wake of a bit is
        // harmless either way, see the module docs); it publishes nothing.
        self.ring().used.fetch_and(!self.bit(), Ordering::Relaxed);
    }
}

/// In a forked child, which has one thread and it not asleep: every slot is free, and no wake
/// is owed (the threads it was owed to are not in the child).
pub(super) fn forget_all() {
    for i in 0..RINGS {
        crate::primitive::reset_in_child(&ring(i).used, 0);
        crate::primitive::reset_in_child(&ring(i).owed, 0);
    }
    // Relaxed: no other thread exists to see it.
    if OWED.load(Ordering::Relaxed) != 0 {
        OWED.store(0, Ordering::Relaxed);
    }
}

/// Leave the wake of `bits` on ring word `i` to whoever claims it first ([`claim`]). The
/// caller has bumped the word's sequence, and claims what is still owed after its own kernel
/// call ([`Take::All`]).
pub(super) fn owe(i: usize, bits: u32) {
    // Release (both): a claim that sees the word's bit in `OWED` sees these bits (module docs).
    ring(i).owed.fetch_or(bits, Ordering::Release);
    OWED.fetch_or(1 << i, Ordering::Release);
}

/// How much a [`claim`] takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Take {
    /// One owed word: a thread just woken, which then goes on to its caller.
    One,
    /// Every owed word: the waker, after its own kernel call.
    All,
}

/// Claim owed wakes (as `take` says) and make each with `wake(word, bits)`; one load when none
/// is owed.
#[inline]
pub(super) fn claim(take: Take, mut wake: impl FnMut(&'static Ring, u32)) {
    // Relaxed: a claim that misses a wake owed just now leaves it to the waker's own claim.
    let mut words = OWED.load(Ordering::Relaxed);
    if words == 0 {
        return;
    }
    if take == Take::All {
        // Acquire: pairs with `owe`'s Release, so the `owed` bits written before are seen.
        words = OWED.swap(0, Ordering::Acquire);
    }
    while words != 0 {
        let i = words.trailing_zeros() as usize;
        words &= words - 1;
        // Acquire: as the swap's. A bit found clear was taken by another claim since the load.
        if take == Take::One && OWED.fetch_and(!(1 << i), Ordering::Acquire) & 1 << i == 0 {
            continue;
        }
        let r = ring(i);
        // Acquire: pairs with `owe`'s Release (the waker's sequence bump came before it).
        let bits = r.owed.swap(0, Ordering::Acquire);
        if bits != 0 {
            wake(r, bits);
            if take == Take::One {
                return;
            }
        }
    }
}

/// Where a thread parked from the bucket of the bell at `bell` looks for a slot first (`take`):
/// the threads of one bucket share words. (Under loom, the first word: an address would make
/// the model's runs differ.)
pub(super) fn near(bell: *const ()) -> usize {
    if cfg!(ufutex_loom) {
        0
    } else {
        bell as usize / 64
    }
}

/// A free slot, looked for first on ring word `near % RINGS`, then on the following ones;
/// `None` when all are taken.
pub(super) fn take(near: usize) -> Option<Slot> {
    #[cfg(ufutex_loom)]
    if SLOTLESS.get() {
        return None;
    }
    for k in 0..RINGS {
        let i = (near + k) % RINGS;
        let r = ring(i);
        // Relaxed: see `Slot`'s drop.
        let mut used = r.used.load(Ordering::Relaxed);
        while used & FULL != FULL {
            let b = (!used & FULL).trailing_zeros();
            match r.used.compare_exchange_weak(used, used | 1 << b, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Slot { number: i as u32 * 32 + b }),
                Err(now) => used = now,
            }
        }
    }
    None
}

#[cfg(ufutex_loom)]
std::thread_local! {
    /// Every slot taken, as far as `take` can tell: the models of the sleep without a slot.
    /// (Loom runs a model's threads on the thread that runs the model.)
    static SLOTLESS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` (a loom model) with every slot taken.
#[cfg(all(test, ufutex_loom))]
pub(super) fn slotless<R>(f: impl FnOnce() -> R) -> R {
    SLOTLESS.set(true);
    let r = f();
    SLOTLESS.set(false);
    r
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn slots_are_unique_until_given_back() {
        // (Other tests' threads take and give back slots meanwhile: check only this test's.)
        let mut held = Vec::new();
        while let Some(s) = take(7) {
            held.push(s);
            assert!(held.len() <= SLOTS);
        }
        let mut numbers: Vec<u32> = held.iter().map(|s| s.number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), held.len(), "no slot taken twice");
        let first = held.remove(0);
        let (n, r, bit) = (first.number, first.ring(), first.bit());
        assert!((n as usize) < SLOTS);
        assert_ne!(r.used.load(Ordering::Relaxed) & bit, 0);
        // (Whether it is free after the drop depends on the other tests' threads, which may
        // take it: not asserted.)
        drop(first);
    }

    #[test]
    fn a_slot_starts_near_its_bell() {
        let s = take(5 * RINGS + 3).expect("a free slot");
        // Unless ring 3 happens to be full with other tests' slots, it is there.
        assert!(s.number / 32 == 3 || ring(3).used.load(Ordering::Relaxed) == u32::MAX);
    }
}

/// The owed wakes, model-checked: run with
/// `RUSTFLAGS="--cfg ufutex_loom" cargo test --release -p ufutex --lib rings`.
#[cfg(all(test, ufutex_loom))]
mod loom_models {
    use super::*;
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    /// The wakes a claim made: `(word, bits)`.
    type Made = Arc<Mutex<Vec<(usize, u32)>>>;

    fn claim_into(made: &Made, take: Take) {
        claim(take, |r, bits| {
            let word = (0..RINGS).find(|&i| std::ptr::eq(ring(i), r)).expect("a ring word");
            made.lock().unwrap().push((word, bits));
        });
    }

    /// Two wakers owe wakes (one on word 0; one on word 1 and on word 0 too) and each claims
    /// all after, while a woken thread claims one word: every owed bit is woken exactly once,
    /// whoever claims it, and nothing stays owed.
    #[test]
    fn every_owed_wake_is_made_once() {
        loom::model(|| {
            let made: Made = Arc::new(Mutex::new(Vec::new()));
            let wakers: Vec<_> = [vec![(0, 0b01)], vec![(1, 0b01), (0, 0b10)]]
                .into_iter()
                .map(|owes| {
                    let made = made.clone();
                    thread::spawn(move || {
                        for (i, bits) in owes {
                            owe(i, bits);
                        }
                        claim_into(&made, Take::All);
                    })
                })
                .collect();
            claim_into(&made, Take::One);
            for w in wakers {
                w.join().unwrap();
            }
            let made = made.lock().unwrap();
            for (word, bit) in [(0, 0b01), (0, 0b10), (1, 0b01)] {
                let times = made.iter().filter(|&&(w, bits)| w == word && bits & bit != 0).count();
                assert_eq!(times, 1, "word {word} bit {bit:#b} woken {times} times: {made:?}");
            }
            assert!(made.iter().all(|&(_, bits)| bits != 0), "no empty wake");
            assert_eq!(OWED.load(Ordering::Relaxed), 0);
            assert!((0..RINGS).all(|i| ring(i).owed.load(Ordering::Relaxed) == 0));
        });
    }

    /// A claim of one takes one word and no longer advertises it: the threads that come back
    /// after it find only the words still owed, and once all are taken, nothing (one load).
    #[test]
    fn a_claim_of_one_takes_one_word_off_the_summary() {
        loom::model(|| {
            let made: Made = Arc::new(Mutex::new(Vec::new()));
            owe(0, 0b01);
            owe(1, 0b10);
            claim_into(&made, Take::One);
            assert_eq!(*made.lock().unwrap(), [(0, 0b01)]);
            assert_eq!(OWED.load(Ordering::Relaxed), 0b10, "only word 1 is still owed");
            claim_into(&made, Take::One);
            assert_eq!(*made.lock().unwrap(), [(0, 0b01), (1, 0b10)]);
            assert_eq!(OWED.load(Ordering::Relaxed), 0);
        });
    }
}
