//! The Linux parker: a per-thread `AtomicU32` slept on with the kernel futex.
//!
//! | bits | meaning |
//! |---|---|
//! | 0..18 | unparks received this episode |
//! | 18..29 | the number of the thread's slot, with SLOTTED |
//! | 29 | SLOTTED: the sleep (with SLEEPING) is on a ring word alone, with its slot's bit |
//! | 30 | BELLED: the sleep (with SLEEPING) also listens to the bell of the thread's bucket |
//! | 31 | SLEEPING: the thread is (about to be) in the kernel; an unpark must wake it |
//!
//! # The rings (see `rings.rs`)
//!
//! A thread that parks from a bucket first takes a slot: a bit of its own on one of the
//! process's ring words. Then it sleeps on that word alone (`FUTEX_WAIT_BITSET` with its bit),
//! having set SLOTTED and the slot's number in the same CAS as SLEEPING. An unpark that finds
//! SLOTTED in the value its increment replaced wakes that bit on that word: a waker gathers
//! the bits of the threads it took word by word, and for each word bumps its sequence and makes
//! one `FUTEX_WAKE_BITSET` of those bits. So a waker of many enters the kernel once per word
//! (the threads of one bucket mostly share one), as the kernel's own wake of many does, and a
//! waker of one wakes exactly one: no wake reaches a thread nobody took (but a late one, below).
//! Two wakers that took one half each wake their halves on their own CPUs; and a waker of
//! threads on several words makes the call for the first word and leaves the rest owed: each
//! thread it woke claims one when it comes back (and makes that call from its CPU), and the
//! waker claims whatever is left after its own call (`rings.rs`, "Owed wakes").
//!
//! Why no wakeup is lost: the sleeper reads its word's sequence, then its own word, then sets
//! its flags (if they are not set yet); the waker increments the own word, then bumps the
//! sequence, then wakes — every one of these SeqCst. If the increment comes first in the single
//! order of SeqCst operations, the sleeper sees its count (or its CAS fails and it looks
//! again). If not, the sleeper's read of the sequence precedes the increment, which precedes
//! the bump: the sleeper expects a sequence the bump replaces, so the kernel either finds the
//! word changed (the sleeper looks again and sees its count) or has queued the sleeper before
//! the bump, and the wake after the bump finds it, its bit being one of those woken (an owed
//! wake too: whoever makes it, it comes after the bump). A slot
//! is the thread's only while its sleep lasts: a waker that read its flags may wake the bit
//! after the thread gave the slot back, which wakes at most the slot's next holder for nothing
//! (it finds its count short and sleeps again). A thread that finds no free slot, or that
//! also watches a word, sleeps as below.
//!
//! # The bell (see [`super::Bell`])
//!
//! A thread that parks from a bucket without a slot sleeps with `futex_waitv` on two words: its own
//! (expecting its current value) and the bucket's bell (expecting the sequence it read). An unpark
//! always increments the thread's own word first; then, if the word said SLEEPING, it wakes the
//! thread either by `futex_wake` on the own word or — only if the word also said BELLED and the
//! waker knows the thread's node came from that very bucket — by ringing the bell: bump the
//! sequence, `futex_wake` it for everyone. Why no wakeup is lost: the kernel compares *both* words
//! under its locks before sleeping, so a waiter whose own word changed after it read it does not
//! sleep; one already asleep is queued on both words and either wake reaches it. Why a ring wakes
//! the right thread: the thread set BELLED for this bell (its node's home bucket) in the same CAS
//! as SLEEPING, and the waker sees both bits in the value its increment replaced. A ring also wakes
//! other threads asleep on the same bell; each finds its own count short and sleeps again, so a
//! waker rings only when the nodes it took are at least as many as the queued ones left whose home
//! is that bucket (`Bell::worth_ringing`, `queue.rs`), and otherwise wakes each thread on its own
//! word.

use super::futex::{self, KernelWait};
use super::{Bell, Park, ParkTimeout, Watch, BLIND_SLICE, MAX_WATCH};
use crate::deadline::{Deadline, Timeout};
use crate::primitive::{spin_hint, yield_now, AtomicU32, Ordering};
use crate::spin_cost::hints_for;

#[path = "rings.rs"]
mod rings;

/// In a forked child: the ring slots the parent's sleeping threads held are free.
#[cfg_attr(ufutex_loom, allow(dead_code))] // also built for the loom kernel model
pub(super) fn forget_slots() {
    rings::forget_all();
}

/// Make owed ring wakes not yet claimed, as `take` says (`rings.rs`, "Owed wakes").
#[inline]
fn claim_owed(take: rings::Take) {
    rings::claim(take, |ring, bits| futex::wake_bits(&ring.seq, bits));
}

const SLEEPING: u32 = 1 << 31;
const BELLED: u32 = 1 << 30;
const SLOTTED: u32 = 1 << 29;
const SLOT_SHIFT: u32 = 29 - rings::SLOT_BITS;
const SLOT_MASK: u32 = (1 << rings::SLOT_BITS) - 1;
const COUNT: u32 = (1 << SLOT_SHIFT) - 1;

/// The adaptive spin. A cross-CPU sleep/wake costs 15–65 µs on the project's hosts, a spin round
/// trip 37–183 ns. Spinning pays when the partner runs on the other CPU (a pinned ping-pong
/// stays out of the kernel with a few µs of spin) and costs when it does not (oversubscribed, a
/// spin burns CPU the partner needs). So each thread keeps a score of how its recent spins went:
/// a park that ended while spinning adds `SCORE_WIN`, one that had to yield or sleep takes one
/// off. While the score is above zero the thread spins up to the long budget, else the short
/// one — enough to notice a partner that is already answering. Spinning stays on while more
/// than one park in `SCORE_WIN + 1` succeeds by spinning; and so that the score cannot settle
/// at zero on a host where the short spin is too short for a round trip, every `EXPLORE`-th
/// park at zero spins the long budget anyway (at most one long spin per `EXPLORE` sleeps).
///
/// The budgets are times, turned into spin-hint counts once per process by [`budgets`]: a
/// PAUSE costs ~70 ns on the AMD hosts and ~10 ns on the Intel ones, so a count tuned on one
/// is seven times too short or too long on the other. BENCHMARKS.md has the numbers.
///
/// Then, once the thread has slept in a wait before, give the CPU away once before sleeping:
/// when the machine is oversubscribed the partner may be runnable on this very CPU, and a yield
/// lets it run and answer without a sleep/wake round trip (on an idle CPU the yield returns at
/// once): our schbench's workers make 1.2–1.35× the kernel's requests/s with the yield,
/// 0.8–0.9× never yielding. But a thread that yields and then sleeps is woken later: the
/// scheduler (EEVDF) moves a yielding thread's deadline a slice on. That costs the waits that
/// threads make right after they start, at a gate that a whole group reaches together and
/// leaves at once: 128 new threads that each yielded before sleeping were woken all at once 25%
/// slower than threads that slept at once (BENCHMARKS.md). So a thread yields only once it has
/// slept in the kernel before: its first sleep comes without a yield.
const SPIN_SHORT_NS: u64 = 600;
const SPIN_LONG_NS: u64 = 8_000;
const EXPLORE: u32 = 16;
const SCORE_WIN: u32 = 3;
const SCORE_MAX: u32 = 32;
const SCORE_START: u32 = 8;

pub(crate) struct Parker {
    word: AtomicU32,
    /// The adaptive spin score; only its own thread reads or writes it (Relaxed).
    score: AtomicU32,
    /// Parks made at score zero, for the exploring long spin; own thread only (Relaxed).
    idle_parks: AtomicU32,
    /// The thread has slept in the kernel before: it yields before sleeping (see
    /// `SPIN_SHORT_NS`). Own thread only (Relaxed), and std's atomic even under loom: it only
    /// chooses whether to yield, which no model's outcome may depend on.
    slept: std::sync::atomic::AtomicBool,
}

/// (short, long) spin budgets in spin hints for this host (`spin_cost::hint_ns`). Under loom,
/// one each.
fn budgets() -> (u32, u32) {
    (hints_for(SPIN_SHORT_NS, 4, 1 << 12) as u32, hints_for(SPIN_LONG_NS, 16, 1 << 16) as u32)
}

impl Parker {
    #[inline]
    fn reached(&self, need: u32) -> bool {
        // Acquire: pairs with the unpark's Release, so the waker's queue surgery is visible.
        self.word.load(Ordering::Acquire) & COUNT >= need
    }

    /// Whether to yield before sleeping: once the thread has slept before.
    fn yield_worth_trying(&self) -> bool {
        // Relaxed: this thread's own flag.
        self.slept.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Park for Parker {
    type Handle = UnparkHandle;

    fn new() -> Parker {
        Parker {
            word: AtomicU32::new(0),
            score: AtomicU32::new(SCORE_START),
            idle_parks: AtomicU32::new(0),
            slept: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The adaptive spin (see `SPIN_SHORT_NS`), then one yield if the thread has slept before.
    fn spin(&self, need: u32) -> bool {
        self.spin_for(|| self.reached(need))
    }

    fn spin_for(&self, done: impl Fn() -> bool) -> bool {
        let score = self.score.load(Ordering::Relaxed);
        let (short, long) = budgets();
        let budget = if score > 0 {
            long
        } else {
            // Relaxed: this thread's own counter.
            let n = self.idle_parks.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(EXPLORE) {
                long
            } else {
                short
            }
        };
        for _ in 0..budget {
            if done() {
                self.score.store((score + SCORE_WIN).min(SCORE_MAX), Ordering::Relaxed);
                return true;
            }
            spin_hint();
        }
        self.score.store(score.saturating_sub(1), Ordering::Relaxed);
        if done() {
            return true;
        }
        if !self.yield_worth_trying() {
            return false;
        }
        yield_now();
        done()
    }

    /// Sleep in the kernel. `bell`: the bell of the bucket the thread's one node was queued in
    /// (none for waitv): the thread then sleeps on a ring word with a slot of its own, or, when
    /// none is free, on its own word and that bell (when the kernel has `futex_waitv`).
    fn sleep(
        &self,
        need: u32,
        timeout: Option<&Timeout>,
        bell: Option<&Bell>,
        watch: &[Watch<'_>],
    ) -> Result<(), ParkTimeout> {
        // Relaxed: this thread's own flag (read first: the line is also the wakers').
        if !self.slept.load(std::sync::atomic::Ordering::Relaxed) {
            self.slept.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // (Near its bell's ring word: the threads of one bucket share few words.)
        let slot = match bell {
            Some(b) if watch.is_empty() => rings::take(rings::near(std::ptr::from_ref(b).cast())),
            _ => None,
        };
        let waitv = futex::has_waitv();
        let bell = bell.filter(|_| waitv && slot.is_none());
        let watch = if waitv { watch } else { &[] };
        // The words past what one futex_waitv takes besides the own word and bell are looked
        // at between slices.
        let kernel = &watch[..watch.len().min(MAX_WATCH - usize::from(bell.is_some()))];
        let slices = kernel.len() < watch.len();
        let flags = SLEEPING
            | if bell.is_some() { BELLED } else { 0 }
            | slot.as_ref().map_or(0, |s| SLOTTED | s.number << SLOT_SHIFT);
        // Relaxed: a watched word that changed ends the park (its waker may have woken it
        // before we slept; the kernel compared it and did not sleep).
        let changed = || watch.iter().position(|w| w.word.load(Ordering::Relaxed) != w.val);
        loop {
            // SeqCst, this read, the next and the CAS: see "Why no wakeup is lost" (module
            // docs) for a slotted sleep. (Otherwise the kernel compares the own word again
            // under its lock, so an unpark that lands in between makes the wait return EAGAIN.)
            let ring = slot.as_ref().map(|s| (s.ring(), s.ring().seq.load(Ordering::SeqCst), s.bit()));
            let v = self.word.load(Ordering::SeqCst);
            if v & COUNT >= need {
                return Ok(());
            }
            if v & !COUNT != flags
                && self.word.compare_exchange(v, (v & COUNT) | flags, Ordering::SeqCst, Ordering::Relaxed).is_err()
            {
                continue; // an unpark arrived: re-check
            }
            let v = (v & COUNT) | flags;
            let slice = slices.then(|| Timeout::from(Deadline::from(BLIND_SLICE)));
            let until = match (timeout, &slice) {
                (Some(t), Some(_)) if t.remaining() < BLIND_SLICE => Some(t),
                (_, Some(s)) => Some(s),
                (t, None) => t,
            };
            let slept = match (ring, bell) {
                (Some((ring, seq, bit)), _) => {
                    let slept = futex::wait_bits(&ring.seq, seq, bit, until);
                    // Back from a sleep a waker of many may have ended: one of the wakes it
                    // left owed is made from here, this thread's CPU (`rings.rs`, "Owed wakes").
                    claim_owed(rings::Take::One);
                    slept
                }
                (None, None) if watch.is_empty() => futex::wait(&self.word, v, until),
                (None, bell) => {
                    let own = Watch { word: &self.word, val: v, shared: false };
                    // Relaxed: the sequence only has to be one the bell had; the own word decides.
                    let rang = bell.map(|b| Watch { word: &b.seq, val: b.seq.load(Ordering::Relaxed), shared: false });
                    let head = [own, rang.unwrap_or(own)];
                    let head = &head[..1 + usize::from(rang.is_some())];
                    match futex::waitv(head, kernel, until) {
                        // A watched word was woken by someone else's kernel wake.
                        Ok(i) if i >= head.len() && !self.reached(need) => {
                            return Err(ParkTimeout::Watched(i - head.len()))
                        }
                        Ok(_) => KernelWait::Retry,
                        Err(k) => k,
                    }
                }
            };
            // A slice that ended before the caller's deadline: look, then sleep on.
            let sliced = slept == KernelWait::TimedOut && slices && !timeout.is_some_and(Timeout::expired);
            match slept {
                _ if slept == KernelWait::Retry || sliced => match changed() {
                    Some(i) if !self.reached(need) => return Err(ParkTimeout::Watched(i)),
                    _ => {}
                },
                KernelWait::TimedOut if !self.reached(need) => return Err(ParkTimeout::TimedOut),
                KernelWait::Interrupted if !self.reached(need) => return Err(ParkTimeout::Interrupted),
                _ => return Ok(()),
            }
        }
    }

    /// End the episode. Only once every unpark owed to it has arrived.
    fn reset(&self) {
        // Relaxed: no unpark of this episode is in flight any more, and the first waker of the
        // next one reaches this thread's node only through a bucket lock taken after this.
        self.word.store(0, Ordering::Relaxed);
    }

    /// The unpark's increment is a locked instruction, which waits for its line: a waker of 128
    /// threads took 128 such misses in turn (each word was last written by its own thread), a
    /// median ~10 k TSC ticks for the 128 unparks; with the lines fetched while the waker took
    /// the nodes, ~4 k (BENCHMARKS.md, sixty-sixth session).
    fn expect_unpark(&self) {
        prefetch_write(std::ptr::from_ref(&self.word).cast());
    }

    /// Taken by a waker under the bucket lock, used after unlocking it.
    fn handle(&self) -> UnparkHandle {
        UnparkHandle { word: &self.word }
    }
}

pub(crate) struct UnparkHandle {
    word: *const AtomicU32,
}

impl UnparkHandle {
    /// Count the unpark; the word's flags before it. From the increment on, the parker's
    /// memory may be gone: only its address may still be used (for `futex_wake`).
    fn count(&self) -> u32 {
        // SAFETY:
        // - the parked thread cannot end its episode (nor return, nor exit) before this
        //   increment, because it waits for the count to include it: the word is alive here.
        // Release: publishes the dequeue to the woken thread's Acquire load. SeqCst: see
        // "Why no wakeup is lost" (module docs) for a slotted sleep.
        unsafe { &*self.word }.fetch_add(1, Ordering::SeqCst)
    }
}

/// One waker's unparks, with the kernel wakes batched: one per ring word for the threads with
/// a slot, one ring of each bell the waker may ring ([`WakeBatch::may_ring`]) when two or more
/// of the others sleep on it (module docs).
pub(crate) struct WakeBatch<'b> {
    /// The bells this waker may ring: the first `rung` are set (left unset past them, so that
    /// a wake of one thread writes none of this).
    bells: [std::mem::MaybeUninit<Rung<'b>>; BELLS],
    rung: usize,
    /// Ring words to wake, each with the bits of the threads asleep there: `(word, bits)`.
    rings: [(u32, u32); 4],
    words: usize,
}

/// A bell the waker may ring, with the first thread found asleep on it (woken alone if it stays
/// the only one) and how many were.
#[derive(Clone, Copy)]
struct Rung<'b> {
    bell: &'b Bell,
    first: *const AtomicU32,
    asleep: u32,
}

/// The most bells one batch rings (as many as a wake looks at: `queue.rs`'s `HOMES`); a thread
/// asleep on another bell gets a wake of its own.
const BELLS: usize = 8;

impl<'b> WakeBatch<'b> {
    pub(crate) fn new() -> WakeBatch<'b> {
        WakeBatch { bells: [const { std::mem::MaybeUninit::uninit() }; BELLS], rung: 0, rings: [(0, 0); 4], words: 0 }
    }

    /// The bells set so far ([`Self::may_ring`]).
    fn rung(&mut self) -> &mut [Rung<'b>] {
        // SAFETY: the first `rung` entries were written by `may_ring` (and `rung` only grows
        // there, after the write); `MaybeUninit<Rung>` has `Rung`'s layout.
        unsafe { std::slice::from_raw_parts_mut(self.bells.as_mut_ptr().cast::<Rung<'b>>(), self.rung) }
    }

    /// This waker may ring `bell`: no more nodes whose home it is stay queued than it took
    /// (`Bell::worth_ringing`). Each bell once; past [`BELLS`] of them, the others' threads get
    /// their own wakes.
    pub(crate) fn may_ring(&mut self, bell: &'b Bell) {
        debug_assert!(!self.rung().iter().any(|r| std::ptr::eq(r.bell, bell)), "each bell once");
        if self.rung < BELLS {
            self.bells[self.rung].write(Rung { bell, first: std::ptr::null(), asleep: 0 });
            self.rung += 1;
        }
    }

    /// Unpark one thread. `home`: the bell of its node's home bucket (compared, never read).
    #[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
    pub(crate) fn unpark(&mut self, handle: UnparkHandle, home: *const Bell) {
        let prev = handle.count();
        if prev & SLEEPING == 0 {
            return;
        }
        if prev & SLOTTED != 0 {
            let slot = (prev >> SLOT_SHIFT) & SLOT_MASK;
            let (word, bit) = (slot / 32, 1 << (slot % 32));
            if let Some(e) = self.rings[..self.words].iter_mut().find(|e| e.0 == word) {
                e.1 |= bit;
                return;
            }
            if self.words == self.rings.len() {
                self.wake_rings();
            }
            self.rings[self.words] = (word, bit);
            self.words += 1;
            return;
        }
        // Asleep on its home's bell (BELLED), which this waker may ring: counted for the ring.
        if prev & BELLED != 0 {
            if let Some(r) = self.rung().iter_mut().find(|r| std::ptr::eq(r.bell, home)) {
                if r.asleep == 0 {
                    r.first = handle.word;
                }
                r.asleep += 1;
                return;
            }
        }
        futex::wake_addr(handle.word, 1);
    }

    /// Wake the gathered bits of each ring word: bump every word's sequence, then make the
    /// kernel call for the first word; the others are owed, each made by a thread woken here
    /// that claims it, back from its sleep, or by this one after its own call (`rings.rs`,
    /// "Owed wakes").
    #[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
    fn wake_rings(&mut self) {
        let words = &self.rings[..self.words];
        for &(word, _) in words {
            // SeqCst: see "Why no wakeup is lost" (module docs).
            rings::ring(word as usize).seq.fetch_add(1, Ordering::SeqCst);
        }
        if let Some((&(first, bits), owed)) = words.split_first() {
            for &(word, bits) in owed {
                rings::owe(word as usize, bits);
            }
            futex::wake_bits(&rings::ring(first as usize).seq, bits);
            if !owed.is_empty() {
                claim_owed(rings::Take::All);
            }
        }
        self.words = 0;
    }

    /// Make the batched kernel wakes: one per ring word, and for each bell one `futex_wake`
    /// either way (its one thread alone, or a ring).
    pub(crate) fn finish(mut self) {
        self.wake_rings();
        for &mut Rung { bell, first, asleep } in self.rung() {
            match asleep {
                0 => {}
                1 => {
                    futex::wake_addr(first, 1);
                }
                _ => {
                    // Relaxed: every thread to wake already has its count (Release, above); a
                    // sleeper woken by the ring re-reads its own word. The bump makes a waiter
                    // that read the old sequence fail its compare instead of sleeping.
                    bell.seq.fetch_add(1, Ordering::Relaxed);
                    futex::wake(&bell.seq, i32::MAX);
                }
            }
        }
    }
}

/// Start fetching the cache line at `addr` to write it (`prefetchw`, where the CPU has it, else
/// `prefetcht0`): a hint, as `primitive::prefetch`.
#[inline(always)]
fn prefetch_write(addr: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(ufutex_loom)))]
    if has_prefetchw() {
        // (In assembly: without the `prfchw` target feature, the intrinsic's write hint becomes
        // a plain `prefetcht0`.)
        // SAFETY: `prefetchw`, which this CPU has, only hints the cache, as `prefetcht0` does
        // (`primitive::prefetch`): it reads and writes nothing the program sees and cannot fault.
        unsafe {
            std::arch::asm!("prefetchw [{a}]", a = in(reg) addr, options(nostack, preserves_flags, readonly));
        }
        return;
    }
    crate::primitive::prefetch(addr);
}

/// Whether the CPU has `prefetchw` (CPUID 0x8000_0001, ECX bit 8: every AMD64 CPU and Intel's
/// since Broadwell), asked once.
#[cfg(all(target_arch = "x86_64", not(ufutex_loom)))]
#[inline(always)]
fn has_prefetchw() -> bool {
    #[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
    static HAS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    crate::primitive::asked_once(&HAS, || std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0)
}

/// The bell protocol, model-checked on the kernel model (`kernel_model.rs`). Run with
/// `RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib`.
/// A thread left asleep shows up as a loom deadlock: a lost wakeup.
#[cfg(all(test, ufutex_loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn spawn_parker(bell: &Arc<Bell>, use_bell: bool) -> (Arc<Parker>, thread::JoinHandle<u32>) {
        let p = Arc::new(Parker::new());
        let (p2, bell) = (p.clone(), bell.clone());
        let h = thread::spawn(move || {
            p2.park(1, None, use_bell.then_some(&*bell), &[], true)
                .expect("an untimed park only returns when unparked");
            p2.word.load(Ordering::Acquire) & COUNT
        });
        (p, h)
    }

    /// A thread whose park with `bell` times out (the model times a would-be sleep out at
    /// once) and that then waits with no bell, as `wait.rs` does, for the unpark it is owed.
    fn spawn_timed_parker(bell: &Arc<Bell>) -> (Arc<Parker>, thread::JoinHandle<u32>) {
        let p = Arc::new(Parker::new());
        let (p2, bell) = (p.clone(), bell.clone());
        let h = thread::spawn(move || {
            let t = Timeout::from(crate::Deadline::from(std::time::Duration::from_secs(1)));
            if p2.park(1, Some(&t), Some(&*bell), &[], true).is_err() {
                while p2.park(1, None, None, &[], true).is_err() {}
            }
            p2.word.load(Ordering::Acquire) & COUNT
        });
        (p, h)
    }

    /// One waker: unpark each `(parker, its node's home bell)` in one batch that may ring
    /// `bells`.
    fn wake(bells: &[&Bell], who: &[(&Arc<Parker>, *const Bell)]) {
        let mut batch = WakeBatch::new();
        for &bell in bells {
            batch.may_ring(bell);
        }
        for (p, home) in who {
            batch.unpark(p.handle(), *home);
        }
        batch.finish();
    }

    /// The home bell of a node queued in `bell`'s bucket, as the waker names it.
    fn home(bell: &Arc<Bell>) -> *const Bell {
        &**bell
    }

    /// Every thread returned, having received exactly one unpark.
    fn each_woke_once(hs: Vec<thread::JoinHandle<u32>>) {
        for h in hs {
            assert_eq!(h.join().unwrap(), 1);
        }
    }

    /// Model `f` twice: with every slot taken (the threads sleep on their own word and the
    /// bell), then with the ring words' slots free (those with a bell sleep on a ring word).
    fn slotless_and_slotted(f: impl Fn() + Sync + Send + Copy + 'static) {
        super::rings::slotless(|| loom::model(f));
        loom::model(f);
    }

    /// Two threads asleep on the same bell, one ring: both wake, each counted once.
    #[test]
    fn one_ring_wakes_every_belled_sleeper() {
        slotless_and_slotted(|| {
            let bell = Arc::new(Bell::new());
            let (p1, h1) = spawn_parker(&bell, true);
            let (p2, h2) = spawn_parker(&bell, true);
            wake(&[&bell], &[(&p1, home(&bell)), (&p2, home(&bell))]);
            each_woke_once(vec![h1, h2]);
        });
    }

    /// A waker ringing one bell still reaches, on its own word, a thread asleep on another bell
    /// (a node requeued from elsewhere) and one whose node's home is the rung bell but which
    /// sleeps on no bell (a waitv thread).
    #[test]
    fn threads_not_on_the_rung_bell_get_their_own_wake() {
        slotless_and_slotted(|| {
            let (b1, b2) = (Arc::new(Bell::new()), Arc::new(Bell::new()));
            let (p1, h1) = spawn_parker(&b1, true);
            let (p2, h2) = spawn_parker(&b2, false);
            let (p3, h3) = spawn_parker(&b2, true);
            wake(&[&b2], &[(&p1, home(&b1)), (&p2, home(&b2)), (&p3, home(&b2))]);
            each_woke_once(vec![h1, h2, h3]);
        });
    }

    /// One waker took threads of two homes (their table grew, or a requeue moved them): it may
    /// ring both bells, and rings the one with two of its threads asleep on it, and wakes the
    /// one thread asleep on the other alone.
    #[test]
    fn each_bell_the_waker_may_ring_reaches_its_own_sleepers() {
        slotless_and_slotted(|| {
            let (b1, b2) = (Arc::new(Bell::new()), Arc::new(Bell::new()));
            let (p1, h1) = spawn_parker(&b1, true);
            let (p2, h2) = spawn_parker(&b2, true);
            let (p3, h3) = spawn_parker(&b1, true);
            wake(&[&b1, &b2], &[(&p1, home(&b1)), (&p2, home(&b2)), (&p3, home(&b1))]);
            each_woke_once(vec![h1, h2, h3]);
        });
    }

    /// A ring also wakes a thread on the bell that nobody unparked: it must go back to sleep
    /// (not return), and still wake for its own unpark later.
    #[test]
    fn a_ring_for_others_is_spurious_and_harmless() {
        slotless_and_slotted(|| wake_two_of_three(0, 1));
    }

    /// Three threads asleep with the same bell; one waker takes threads `a` and `b`, and the
    /// third, which the wake may reach for nothing, stays asleep until its own unpark.
    fn wake_two_of_three(a: usize, b: usize) {
        let bell = Arc::new(Bell::new());
        let (mut ps, mut hs): (Vec<_>, Vec<_>) = (0..3).map(|_| spawn_parker(&bell, true)).unzip();
        let c = 3 - a - b;
        wake(&[&bell], &[(&ps[a], home(&bell)), (&ps[b], home(&bell))]);
        let (hc, pc) = (hs.remove(c), ps.remove(c));
        each_woke_once(hs);
        assert_eq!(pc.word.load(Ordering::Acquire) & COUNT, 0);
        wake(&[], &[(&pc, home(&bell))]);
        each_woke_once(vec![hc]);
    }

    /// A timed park that gives up while a ring is on its way, then waits (with no bell, as
    /// `wait.rs` does) for the unpark it is owed: it must arrive, whichever way it is sent.
    #[test]
    fn a_timed_out_sleeper_still_gets_its_owed_unpark() {
        slotless_and_slotted(|| {
            let bell = Arc::new(Bell::new());
            let (p1, h1) = spawn_timed_parker(&bell);
            let (p2, h2) = spawn_parker(&bell, true);
            wake(&[&bell], &[(&p1, home(&bell)), (&p2, home(&bell))]);
            each_woke_once(vec![h1, h2]);
        });
    }

    /// Threads asleep on one ring word and on another: a waker of one of each wakes each word's
    /// bit once, and the thread it did not take stays asleep until its own unpark (the first
    /// two share word 0, the third has word 1: two slots a word under loom).
    #[test]
    fn ring_words_wake_exactly_the_bits_taken() {
        loom::model(|| wake_two_of_three(0, 2));
    }

    /// One batch wakes a thread on a ring word and one without a slot (all others taken: on
    /// its own word and the bell), and a late wake of a slot given back is harmless: a timed
    /// sleeper gives its slot back and waits on without one, and the slot may go to the next
    /// sleeper, whom the first one's wake may then reach for nothing.
    #[test]
    fn slotted_and_slotless_sleepers_in_one_batch() {
        loom::model(|| {
            // Take all but one slot: word 0 whole, one bit of word 1.
            let held: Vec<_> = (0..3).map(|_| super::rings::take(0).expect("a free slot")).collect();
            let bell = Arc::new(Bell::new());
            let (p1, h1) = spawn_timed_parker(&bell);
            let (p2, h2) = spawn_parker(&bell, true);
            wake(&[&bell], &[(&p1, home(&bell)), (&p2, home(&bell))]);
            each_woke_once(vec![h1, h2]);
            drop(held);
        });
    }

    /// A thread asleep with a watched word (the preload library's legacy waits) is reached by
    /// a kernel wake on that word from a waker that knows nothing of ufutex: it changes the word
    /// and wakes it, and the park ends `Watched` with no unpark counted (never asleep for good,
    /// which loom would report as a deadlock), whether the change lands before or during its
    /// sleep.
    #[test]
    fn a_kernel_wake_on_the_watched_word_ends_the_park() {
        loom::model(|| {
            let p = Arc::new(Parker::new());
            let watched = Arc::new(AtomicU32::new(7));
            let (p2, w2) = (p.clone(), watched.clone());
            let sleeper =
                thread::spawn(move || p2.park(1, None, None, &[Watch { word: &w2, val: 7, shared: false }], true));
            watched.store(0, Ordering::SeqCst);
            futex::wake(&watched, 1);
            match sleeper.join().unwrap() {
                Err(ParkTimeout::Watched(0)) => assert_eq!(p.word.load(Ordering::Acquire) & COUNT, 0),
                other => panic!("only the watched word could end this park, got {other:?}"),
            }
        });
    }

    /// A thread asleep watching several words (a waitv's, the preload library's) is reached by
    /// a kernel wake of any one of them and says which: the park ends `Watched` with that word's
    /// index, whether the change lands before or during the sleep. With an unpark racing the
    /// wake, the park ends either way, and an unpark it returned `Ok` for was counted.
    #[test]
    fn a_kernel_wake_of_one_of_several_watched_words_ends_the_park_with_its_index() {
        loom::model(|| {
            let p = Arc::new(Parker::new());
            let words = Arc::new([AtomicU32::new(7), AtomicU32::new(7), AtomicU32::new(7)]);
            let (p2, w2) = (p.clone(), words.clone());
            let sleeper = thread::spawn(move || {
                let watch = w2.each_ref().map(|w| Watch { word: w, val: 7, shared: false });
                p2.park(1, None, None, &watch, true)
            });
            let p3 = p.clone();
            let unparker = thread::spawn(move || {
                let mut batch = WakeBatch::new();
                batch.unpark(p3.handle(), std::ptr::null());
                batch.finish();
            });
            words[1].store(0, Ordering::SeqCst);
            futex::wake(&words[1], 1);
            unparker.join().unwrap();
            match sleeper.join().unwrap() {
                Ok(()) => assert_eq!(p.word.load(Ordering::Acquire) & COUNT, 1),
                Err(ParkTimeout::Watched(1)) => {}
                other => panic!("only the unpark or the second word could end this park, got {other:?}"),
            }
        });
    }
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_yields_before_sleeping_once_it_has_slept() {
        let p = Parker::new();
        assert!(!p.yield_worth_trying(), "a new thread sleeps at once");
        // A sleep that finds its unpark already there (no kernel wait needed) counts too: the
        // thread went the whole way.
        let mut batch = WakeBatch::new();
        batch.unpark(p.handle(), std::ptr::null());
        batch.finish();
        assert_eq!(p.sleep(1, None, None, &[]), Ok(()));
        p.reset();
        assert!(p.yield_worth_trying());
    }

    /// Real threads in the kernel, some on ring words and some (their slots all taken) on their
    /// own word and one of two bells (two homes), woken by one batch each way, which may ring
    /// both bells: every one wakes, once. (Which way a thread sleeps also depends on the slots
    /// other tests hold meanwhile; both are correct.)
    #[test]
    fn sleepers_with_and_without_slots_all_wake() {
        use std::sync::Arc;
        let bells = Arc::new([Bell::new(), Bell::new()]);
        let asleep = |p: &Parker| p.word.load(Ordering::SeqCst) & SLEEPING != 0;
        for slotless in [false, true] {
            let held: Vec<rings::Slot> =
                if slotless { std::iter::from_fn(|| rings::take(0)).collect() } else { Vec::new() };
            let parkers: Vec<Arc<Parker>> = (0..6).map(|_| Arc::new(Parker::new())).collect();
            let threads: Vec<_> = parkers
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (p, bells) = (p.clone(), bells.clone());
                    std::thread::spawn(move || p.sleep(1, None, Some(&bells[i % 2]), &[]))
                })
                .collect();
            while !parkers.iter().all(|p| asleep(p)) {
                std::thread::yield_now();
            }
            let mut batch = WakeBatch::new();
            batch.may_ring(&bells[0]);
            batch.may_ring(&bells[1]);
            for (i, p) in parkers.iter().enumerate() {
                batch.unpark(p.handle(), &bells[i % 2]);
            }
            batch.finish();
            for t in threads {
                assert_eq!(t.join().unwrap(), Ok(()));
            }
            for p in &parkers {
                assert_eq!(p.word.load(Ordering::SeqCst) & COUNT, 1, "one unpark each");
            }
            drop(held);
        }
    }
}
