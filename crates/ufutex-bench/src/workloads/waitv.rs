//! `waitv`: a wait on 1 … 1024 words that fails because the first or the last value mismatches
//! (ns per call), the same on 8, 16 and 64-bit words for the competitors that have them (ufutex,
//! in Rust and through its C ABI), and the wake-up latency of a thread asleep in a waitv when its last
//! entry is woken (µs from the wake call to the waiter running).

use super::{padded_words, skip_reason, Common, Padded, Waiters, STACK};
use crate::competitor::{dispatch, Competitor, Op, Wait, Word, ANY};
use crate::result::{Bench, Metric};
use crate::sched::Plan;
use crate::sys::KERNEL_WAITV_MAX;
use std::hint::black_box;
use std::io;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    MismatchFirst,
    MismatchLast,
    /// [`Mode::MismatchLast`] on words of another size than the kernel's (private only).
    MismatchLastOf(Width),
    /// Wake-up latency of a sleeping waitv, woken on its last entry.
    Latency,
}

/// A word size that the kernel's futex_waitv has not (it takes 32-bit words only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    U8,
    U16,
    U64,
}

impl Width {
    fn bits(self) -> u32 {
        match self {
            Width::U8 => 8,
            Width::U16 => 16,
            Width::U64 => 64,
        }
    }
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::MismatchFirst => "mismatch first",
            Mode::MismatchLast => "mismatch last",
            Mode::MismatchLastOf(Width::U8) => "mismatch last, 8-bit words",
            Mode::MismatchLastOf(Width::U16) => "mismatch last, 16-bit words",
            Mode::MismatchLastOf(Width::U64) => "mismatch last, 64-bit words",
            Mode::Latency => "wake-up latency",
        }
    }
}

/// One repetition of a failing waitv: ns per call.
pub fn fail_once<C: Competitor>(
    c: &C,
    entries: usize,
    first: bool,
    runtime: Duration,
    shared: bool,
) -> io::Result<f64> {
    let words = padded_words(entries, shared)?;
    let bad = if first { 0 } else { entries - 1 };
    let list: Vec<(&AtomicU32, u32)> = words.iter().enumerate().map(|(i, w)| (&w.0, u32::from(i == bad))).collect();
    let v = c.prepare_waitv(&list);
    fail_loop(c, &v, runtime)
}

/// [`fail_once`] on words of `width`, mismatching on the last: ns per call. Only for a
/// competitor with such a waitv ([`Competitor::prepare_waitv_sized`]).
pub fn fail_once_of<C: Competitor>(c: &C, width: Width, entries: usize, runtime: Duration) -> io::Result<f64> {
    match width {
        Width::U8 => fail_once_sized::<C, AtomicU8>(c, entries, runtime),
        Width::U16 => fail_once_sized::<C, AtomicU16>(c, entries, runtime),
        Width::U64 => fail_once_sized::<C, AtomicU64>(c, entries, runtime),
    }
}

/// Whether `c` has a waitv of words of `width` ([`Competitor::prepare_waitv_sized`]).
fn has_waitv_of<C: Competitor>(c: &C, width: Width) -> bool {
    match width {
        Width::U8 => c.prepare_waitv_sized::<AtomicU8>(&[]).is_some(),
        Width::U16 => c.prepare_waitv_sized::<AtomicU16>(&[]).is_some(),
        Width::U64 => c.prepare_waitv_sized::<AtomicU64>(&[]).is_some(),
    }
}

/// [`fail_once_of`] at the word type `W`.
fn fail_once_sized<C: Competitor, W: Word>(c: &C, entries: usize, runtime: Duration) -> io::Result<f64> {
    let words = crate::shm::Words::<Padded<W>>::new(entries, false)?;
    let list: Vec<(&W, u64)> = words.iter().enumerate().map(|(i, w)| (&w.0, u64::from(i == entries - 1))).collect();
    let v = c.prepare_waitv_sized(&list).ok_or_else(|| {
        io::Error::other(format!("{}: no waitv of {}-bit words", c.name(), 8 * std::mem::size_of::<W>()))
    })?;
    fail_loop(c, &v, runtime)
}

/// Time a waitv `v` that must fail with a mismatch: ns per call.
fn fail_loop<C: Competitor>(c: &C, v: &C::Waitv<'_>, runtime: Duration) -> io::Result<f64> {
    if c.waitv(v) != Err(Wait::Mismatch) {
        return Err(io::Error::other(format!("{}: a waitv with a mismatching entry did not fail", c.name())));
    }
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < runtime {
        for _ in 0..64 {
            let _ = black_box(c.waitv(black_box(v)));
        }
        calls += 64;
    }
    Ok(start.elapsed().as_nanos() as f64 / calls as f64)
}

/// One repetition of the latency case: µs from the wake call to the waiter's return.
pub fn latency_once<C: Competitor>(c: &C, entries: usize, shared: bool) -> io::Result<f64> {
    let words = padded_words(entries, shared)?;
    let list: Vec<(&AtomicU32, u32)> = words.iter().map(|w| (&w.0, 0)).collect();
    let v = c.prepare_waitv(&list);
    let waiters = Waiters::new(1);
    let last = &words[entries - 1].0;
    std::thread::scope(|s| {
        std::thread::Builder::new().stack_size(STACK).spawn_scoped(s, || {
            waiters.arrive();
            while last.load(Ordering::SeqCst) == 0 {
                let _ = c.waitv(&v);
            }
            waiters.done(0);
        })?;
        // A waitv queues one node per entry.
        let settled = waiters.settle(c, entries);
        let start = waiters.base.elapsed().as_nanos() as u64;
        last.store(1, Ordering::SeqCst);
        c.wake(last, 1, ANY);
        settled?;
        waiters.wait_finished();
        Ok(waiters.last_done_ns().saturating_sub(start) as f64 / 1e3)
    })
}

pub fn run(common: &Common, entries: &[usize], modes: &[Mode]) -> io::Result<Vec<Bench>> {
    let comps = common.competitors()?;
    let sched = common.scheduler();
    let (runtime, shared) = (common.runtime, common.shared);
    let mut out = Vec::new();
    // (The other sizes are private only: no shared competitor has such a waitv.)
    for &mode in modes.iter().filter(|&&m| !(shared && matches!(m, Mode::MismatchLastOf(_)))) {
        for &n in entries {
            let metric = match mode {
                Mode::Latency => Metric::lower("wake-up", "µs"),
                _ => Metric::lower("call", "ns"),
            };
            let plan = Plan {
                workload: "waitv",
                case: common.case(format!("{}, entries={n}", mode.label())),
                metrics: vec![metric],
                baseline: common.baseline(),
            };
            let skip = |c: &crate::competitor::AnyCompetitor| {
                let missing = match mode {
                    Mode::MismatchLastOf(width) => (!dispatch!(c, c => has_waitv_of(c, width))).then_some(width),
                    _ => None,
                };
                skip_reason(c, &[Op::Waitv])
                    .or_else(|| {
                        missing.map(|w| format!("no waitv of {}-bit words (the kernel's are 32-bit)", w.bits()))
                    })
                    .or_else(|| {
                        (c.name().starts_with("kernel") && n > KERNEL_WAITV_MAX)
                            .then(|| format!("the kernel's futex_waitv takes at most {KERNEL_WAITV_MAX} entries"))
                    })
            };
            let bench = sched.run(
                plan,
                &comps,
                |c| c.name(),
                skip,
                |c| {
                    let v = match mode {
                        Mode::Latency => dispatch!(c, c => latency_once(c, n, shared)),
                        Mode::MismatchFirst => dispatch!(c, c => fail_once(c, n, true, runtime, shared)),
                        Mode::MismatchLast => dispatch!(c, c => fail_once(c, n, false, runtime, shared)),
                        Mode::MismatchLastOf(width) => dispatch!(c, c => fail_once_of(c, width, n, runtime)),
                    };
                    v.map(|v| vec![v])
                },
            )?;
            out.push(bench);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::Mock;

    #[test]
    fn failing_waitv_is_timed_at_both_ends() {
        let m = Mock::default();
        for shared in [false, true] {
            assert!(fail_once(&m, 16, true, Duration::from_millis(5), shared).unwrap() > 0.0);
            assert!(fail_once(&m, 16, false, Duration::from_millis(5), shared).unwrap() > 0.0);
        }
        assert_eq!(m.queued(), Some(0));
    }

    #[test]
    fn a_waitv_of_8_16_and_64_bit_words_is_timed_where_there_is_one() {
        use crate::competitor::{Ufutex, UfutexC};
        let runtime = Duration::from_millis(2);
        for width in [Width::U8, Width::U16, Width::U64] {
            assert!(has_waitv_of(&Ufutex::default_domain(), width) && has_waitv_of(&UfutexC, width), "{width:?}");
            assert!(!has_waitv_of(&Mock::default(), width), "{width:?}: the mock has none");
            assert!(fail_once_of(&Ufutex::default_domain(), width, 16, runtime).unwrap() > 0.0, "{width:?}");
            assert!(fail_once_of(&UfutexC, width, 16, runtime).unwrap() > 0.0, "{width:?}");
            assert!(fail_once_of(&Mock::default(), width, 16, runtime).is_err(), "the mock has none");
        }
    }

    #[test]
    fn sleeping_waitv_is_woken_on_its_last_entry() {
        let m = Mock::default();
        assert!(latency_once(&m, 8, false).unwrap() > 0.0);
        assert!(latency_once(&m, 8, true).unwrap() > 0.0);
        assert_eq!(m.queued(), Some(0));
    }
}
