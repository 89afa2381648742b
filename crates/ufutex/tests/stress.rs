//! Stress with invariants: 8 threads doing random wait / wait_bitset / waitv / wake /
//! wake_bitset / requeue on a handful of words of every size (and, on the default domain, the C
//! ABI's `FUTEX_WAKE_OP` on its 32-bit words), with random masks and deadlines
//! on both clocks, for `UFUTEX_STRESS_SECS` (2 s when unset; CI runs 10) — on the default
//! domain, on a 2-bucket domain (every key collides), and while another thread resizes the
//! table over and over.
//!
//! Every wake is accounted for: each waitv has exactly one entry that anyone can wake (its
//! other entries are on "filler" words nobody wakes or requeues), so the sum of the woken
//! counts of every wake and requeue equals the number of waits and waitvs that returned `Ok` —
//! a lost wakeup (a counted wake whose waiter timed out instead) or a double wake (a waiter
//! returning `Ok` that no waker counted) breaks the equality. A waitv returns the index of its
//! wakeable entry. Beside the 8 workers, two threads play ping-pong on a u8 word in the same
//! domain with waits that have no deadline, so a lost wakeup shows as a hang. At the end every thread has returned (a sleeper left behind would hang the
//! final drain — the watchdog turns that into a failure) and nothing is left queued.
#![cfg(not(ufutex_loom))]

mod common;

use common::{auto, fixed, stress_secs, watchdog, CountOnDrop, Rng, StopOnDrop};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};
use ufutex::{Deadline, Domain, Slots, WaitEntry, WaitError, MATCH_ANY};

const THREADS: usize = 8;
/// Live words: two of each size (index = 2 * size + k), so requeue has a same-size partner.
const LIVE: usize = 8;

struct Live {
    w8: [AtomicU8; 2],
    w16: [AtomicU16; 2],
    w32: [AtomicU32; 2],
    w64: [AtomicU64; 2],
}

/// Words only ever used as extra waitv entries: nobody wakes, requeues or changes them. They
/// hold their size's maximum.
struct Filler {
    f8: [AtomicU8; 2],
    f16: [AtomicU16; 2],
    f32: [AtomicU32; 2],
    f64: [AtomicU64; 2],
}

impl Live {
    fn new() -> Live {
        Live {
            w8: std::array::from_fn(|_| AtomicU8::new(0)),
            w16: std::array::from_fn(|_| AtomicU16::new(0)),
            w32: std::array::from_fn(|_| AtomicU32::new(0)),
            w64: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn load(&self, i: usize) -> u64 {
        let k = i % 2;
        match i / 2 {
            0 => self.w8[k].load(Ordering::SeqCst) as u64,
            1 => self.w16[k].load(Ordering::SeqCst) as u64,
            2 => self.w32[k].load(Ordering::SeqCst) as u64,
            _ => self.w64[k].load(Ordering::SeqCst),
        }
    }

    fn bump(&self, i: usize) {
        let k = i % 2;
        match i / 2 {
            0 => drop(self.w8[k].fetch_add(1, Ordering::SeqCst)),
            1 => drop(self.w16[k].fetch_add(1, Ordering::SeqCst)),
            2 => drop(self.w32[k].fetch_add(1, Ordering::SeqCst)),
            _ => drop(self.w64[k].fetch_add(1, Ordering::SeqCst)),
        }
    }

    fn wait(&self, d: &Domain, i: usize, v: u64, mask: u64, dl: Option<Deadline>) -> Result<(), WaitError> {
        let k = i % 2;
        match i / 2 {
            0 => d.wait_bitset(&self.w8[k], v as u8, mask, dl),
            1 => d.wait_bitset(&self.w16[k], v as u16, mask, dl),
            2 => d.wait_bitset(&self.w32[k], v as u32, mask, dl),
            _ => d.wait_bitset(&self.w64[k], v, mask, dl),
        }
    }

    fn entry(&self, i: usize, v: u64) -> WaitEntry<'_> {
        let k = i % 2;
        match i / 2 {
            0 => WaitEntry::new(&self.w8[k], v as u8),
            1 => WaitEntry::new(&self.w16[k], v as u16),
            2 => WaitEntry::new(&self.w32[k], v as u32),
            _ => WaitEntry::new(&self.w64[k], v),
        }
    }

    fn wake(&self, d: &Domain, i: usize, n: usize, mask: u64) -> usize {
        let k = i % 2;
        match i / 2 {
            0 => d.wake_bitset(&self.w8[k], n, mask),
            1 => d.wake_bitset(&self.w16[k], n, mask),
            2 => d.wake_bitset(&self.w32[k], n, mask),
            _ => d.wake_bitset(&self.w64[k], n, mask),
        }
    }

    /// Requeue from live word `from` to the word of the same size with `k` (0 or 1; possibly
    /// `from` itself).
    fn requeue(&self, d: &Domain, from: usize, k: usize, v: u64, nw: usize, nr: usize) -> Result<usize, WaitError> {
        let a = from % 2;
        match from / 2 {
            0 => d.requeue(&self.w8[a], v as u8, &self.w8[k], nw, nr),
            1 => d.requeue(&self.w16[a], v as u16, &self.w16[k], nw, nr),
            2 => d.requeue(&self.w32[a], v as u32, &self.w32[k], nw, nr),
            _ => d.requeue(&self.w64[a], v, &self.w64[k], nw, nr),
        }
    }
}

impl Filler {
    fn new() -> Filler {
        Filler {
            f8: std::array::from_fn(|_| AtomicU8::new(u8::MAX)),
            f16: std::array::from_fn(|_| AtomicU16::new(u16::MAX)),
            f32: std::array::from_fn(|_| AtomicU32::new(u32::MAX)),
            f64: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
        }
    }

    fn entry(&self, r: u64) -> WaitEntry<'_> {
        let k = (r / 4 % 2) as usize;
        let e = match r % 4 {
            0 => WaitEntry::new(&self.f8[k], u8::MAX),
            1 => WaitEntry::new(&self.f16[k], u16::MAX),
            2 => WaitEntry::new(&self.f32[k], u32::MAX),
            _ => WaitEntry::new(&self.f64[k], u64::MAX),
        };
        e.with_mask(MATCH_ANY)
    }
}

/// The shared books.
#[derive(Default)]
struct Books {
    /// Sum of the woken counts returned by wake, wake_bitset and the wake part of requeue.
    woken: AtomicUsize,
    /// Waits and waitvs that returned Ok.
    oks: AtomicUsize,
    ops: AtomicUsize,
    sleeps_ended_by_timeout: AtomicUsize,
    wouldblocks: AtomicUsize,
    /// Moves made in the ping-pong games.
    moves: AtomicUsize,
}

const MASKS: [u64; 4] = [0b01, 0b10, 0b11, MATCH_ANY];

fn deadline(rng: &mut Rng) -> Option<Deadline> {
    // Mostly short, sometimes longer; rarely none (such a sleeper needs a wake to go on).
    let us = if rng.below(4) == 0 { rng.below(3000) } else { rng.below(300) };
    match rng.below(16) {
        0 => None,
        1 => Some(Deadline::Monotonic(Instant::now() + Duration::from_micros(us))),
        2 => Some(Deadline::Realtime(SystemTime::now() + Duration::from_micros(us))),
        _ => Some(Duration::from_micros(us).into()),
    }
}

fn record(books: &Books, r: Result<(), WaitError>, seed: u64) {
    match r {
        Ok(()) => books.oks.fetch_add(1, Ordering::Relaxed),
        Err(WaitError::TimedOut) => books.sleeps_ended_by_timeout.fetch_add(1, Ordering::Relaxed),
        Err(WaitError::WouldBlock) => books.wouldblocks.fetch_add(1, Ordering::Relaxed),
        Err(WaitError::Interrupted) => panic!("seed {seed}: Interrupted without any signal"),
    };
}

/// One worker: random operations until `end`.
fn worker(d: &Domain, live: &Live, filler: &Filler, books: &Books, end: Instant, seed: u64) {
    let mut rng = Rng::new(seed);
    // The C ABI's wake-op works on the default domain's tables only.
    let wake_ops = std::ptr::eq(d, Domain::default_domain());
    while Instant::now() < end {
        books.ops.fetch_add(1, Ordering::Relaxed);
        let i = rng.below(LIVE as u64) as usize;
        match rng.below(20) {
            0..=6 => {
                let (v, mask) = (live.load(i), MASKS[rng.below(4) as usize]);
                record(books, live.wait(d, i, v, mask, deadline(&mut rng)), seed);
            }
            7..=9 => {
                let len = 1 + rng.below(6) as usize;
                let at = rng.below(len as u64) as usize;
                let entries: Vec<WaitEntry<'_>> = (0..len)
                    .map(|j| {
                        if j == at {
                            live.entry(i, live.load(i)).with_mask(MASKS[rng.below(4) as usize])
                        } else {
                            filler.entry(rng.next())
                        }
                    })
                    .collect();
                match d.waitv(&entries, deadline(&mut rng)) {
                    Ok(got) => {
                        assert_eq!(got, at, "seed {seed}: only entry {at} of {len} can be woken");
                        record(books, Ok(()), seed);
                    }
                    Err(e) => record(books, Err(e), seed),
                }
            }
            10..=15 if wake_ops && i / 2 == 2 && rng.below(3) == 0 => {
                // ADD 0 or 1 to the other 32-bit word (or the same), whose waiters are woken
                // too when its old value compares so: both wakes are counted in the result.
                let (a, b) = (&live.w32[i % 2], &live.w32[rng.below(2) as usize]);
                let cmp = [common::CMP_EQ, common::CMP_LT, common::CMP_GE][rng.below(3) as usize];
                let op = common::futex_op(common::OP_ADD, rng.below(2) as u32, cmp, rng.below(4) as u32);
                let (n1, n2) = (rng.below(3) as i32, rng.below(3) as i32);
                let woken = common::private_wake_op(a, b, n1, n2, op)
                    .unwrap_or_else(|errno| panic!("seed {seed}: wake-op failed, errno {errno}"));
                assert!(woken <= (n1 + n2) as usize, "seed {seed}: wake-op({n1}, {n2}) woke {woken}");
                books.woken.fetch_add(woken, Ordering::Relaxed);
            }
            10..=15 => {
                if rng.below(2) == 0 {
                    live.bump(i);
                }
                let n = [1, 2, 3, usize::MAX][rng.below(4) as usize];
                let mask = if rng.below(2) == 0 { MATCH_ANY } else { MASKS[rng.below(4) as usize] };
                let woken = live.wake(d, i, n, mask);
                assert!(woken <= n, "seed {seed}: wake({n}) woke {woken}");
                books.woken.fetch_add(woken, Ordering::Relaxed);
            }
            _ => {
                let k = rng.below(2) as usize;
                let v = live.load(i).wrapping_add(u64::from(rng.below(8) == 0)); // sometimes stale
                let nw = rng.below(3) as usize;
                let nr = [0, 1, usize::MAX][rng.below(3) as usize];
                if let Ok(n) = live.requeue(d, i, k, v, nw, nr) {
                    // Waiters are taken wake-first, so the woken part is min(n, nr_wake).
                    assert!(n <= nw.saturating_add(nr), "seed {seed}: requeue({nw}, {nr}) took {n}");
                    books.woken.fetch_add(n.min(nw), Ordering::Relaxed);
                }
            }
        }
    }
}

/// The ping-pong word's "finished" value; turns count 0..PINGPONG_MOD (an even number of values,
/// so even/odd alternate across the wrap).
const PINGPONG_DONE: u8 = u8::MAX;
const PINGPONG_MOD: u16 = 254;

/// One side of a ping-pong on a u8 word with waits that have no deadline: a lost wakeup (a
/// waiter sleeping although the value changed, with its wake gone) hangs here. `parity` 0
/// moves on even values, 1 on odd ones; side 0 ends the game at `end`. `jitter`: each move
/// first waits a random 0–20 µs, so that the partner's wait is caught in every phase — its
/// spin, its barrier, its compare, its sleep — by a wake that has no fence of its own.
fn ping_pong(d: &Domain, w: &AtomicU8, parity: u8, books: &Books, end: Instant, jitter: Option<u64>) {
    let mut rng = jitter.map(Rng::new);
    loop {
        let v = w.load(Ordering::SeqCst);
        if v == PINGPONG_DONE {
            return;
        }
        if v % 2 == parity {
            if let Some(rng) = rng.as_mut() {
                let until = Instant::now() + Duration::from_nanos(rng.below(20_000));
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }
            let last = parity == 0 && Instant::now() >= end;
            let next = if last { PINGPONG_DONE } else { ((u16::from(v) + 1) % PINGPONG_MOD) as u8 };
            w.store(next, Ordering::SeqCst);
            books.woken.fetch_add(d.wake(w, 1), Ordering::Relaxed);
            books.moves.fetch_add(1, Ordering::Relaxed);
            if last {
                return;
            }
        } else if d.wait(w, v, None) == Ok(()) {
            books.oks.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Run the workers on `d` (plus an optional resizer) and check the books.
fn stress(name: &str, d: &Domain, resize: bool) {
    watchdog();
    let secs = stress_secs();
    let seed = std::env::var("UFUTEX_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64);
    eprintln!("{name}: {secs} s, seed {seed} (rerun with UFUTEX_STRESS_SEED={seed})");
    let (live, filler, books) = (Live::new(), Filler::new(), Books::default());
    let end = Instant::now() + Duration::from_secs(secs);
    let done = AtomicUsize::new(0);
    let (token, jittered) = (AtomicU8::new(0), AtomicU8::new(0));
    let stop_resizing = AtomicBool::new(false);
    let resizes = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop_resizing);
        let resizer = resize.then(|| {
            s.spawn(|| {
                let sizes = [Slots::Fixed(2), Slots::Fixed(16), Slots::Auto, Slots::Fixed(256), Slots::Large];
                let mut n = 0;
                while !stop_resizing.load(Ordering::SeqCst) {
                    d.set_slots(sizes[n % sizes.len()]).expect("valid size");
                    n += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                n
            })
        });
        for t in 0..THREADS {
            let (live, filler, books, done) = (&live, &filler, &books, &done);
            s.spawn(move || {
                let _done = CountOnDrop(done); // counted even if the worker panics: no hang
                worker(d, live, filler, books, end, seed.wrapping_add(t as u64 * 0x1234_5678_9ABC));
            });
        }
        let (token, jittered) = (&token, &jittered);
        for parity in 0..2 {
            let (books, done) = (&books, &done);
            s.spawn(move || {
                let _done = CountOnDrop(done);
                ping_pong(d, token, parity, books, end, None);
            });
            s.spawn(move || {
                let _done = CountOnDrop(done);
                ping_pong(d, jittered, parity, books, end, Some(seed ^ u64::from(parity)));
            });
        }
        // Drain: once the time is up, wake every live word until every worker has returned
        // (waits without a deadline end only this way).
        while done.load(Ordering::SeqCst) < THREADS + 4 {
            if Instant::now() >= end {
                for i in 0..LIVE {
                    books.woken.fetch_add(live.wake(d, i, usize::MAX, MATCH_ANY), Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        stop_resizing.store(true, Ordering::SeqCst);
        resizer.map_or(0, |r| r.join().unwrap())
    });
    let (woken, oks) = (books.woken.into_inner(), books.oks.into_inner());
    eprintln!(
        "{name}: {} ops, {} ping-pong moves, {oks} woken waits, {} timed out, {} would block, {resizes} resizes",
        books.ops.into_inner(),
        books.moves.into_inner(),
        books.sleeps_ended_by_timeout.into_inner(),
        books.wouldblocks.into_inner()
    );
    assert_eq!(woken, oks, "{name} (seed {seed}): wakes counted vs waits that returned Ok");
    assert_eq!(d.queued_waiters(), 0, "{name} (seed {seed}): waiters left queued");
    assert_eq!(d.homed_waiters(), 0, "{name} (seed {seed}): home counts left");
    for i in 0..LIVE {
        assert_eq!(live.wake(d, i, usize::MAX, MATCH_ANY), 0, "{name} (seed {seed}): word {i} still has waiters");
    }
}

#[test]
fn stress_default_domain() {
    stress("default domain", Domain::default_domain(), false);
}

#[test]
fn stress_two_buckets() {
    stress("Fixed(2) domain", &fixed(2), false);
}

#[test]
fn stress_with_resizes() {
    stress("resizing domain", &auto(), true);
}
