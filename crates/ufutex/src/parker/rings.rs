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

use crate::primitive::{AtomicU32, Ordering};

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
}

impl Ring {
    crate::primitive::const_unless_loom! {
        fn new() -> Ring {
            Ring { seq: AtomicU32::new(0), used: AtomicU32::new(0) }
        }
    }
}

#[cfg(not(ufutex_loom))]
static ALL: [Ring; RINGS] = [const { Ring::new() }; RINGS];

#[cfg(ufutex_loom)]
loom::lazy_static! {
    static ref ALL: [Ring; RINGS] = [Ring::new(), Ring::new()];
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

/// In a forked child, which has one thread and it not asleep: every slot is free.
pub(super) fn forget_all() {
    for i in 0..RINGS {
        crate::primitive::reset_in_child(&ring(i).used, 0);
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
