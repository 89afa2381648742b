//! The lock competitors: one [`BenchLock`] impl per mutex, named by a [`LockKind`]. The
//! `lock` workload is generic over [`BenchLock`] (each lock's loop is compiled on its own);
//! adding a lock is an impl here, a [`LockKind`] variant and its arm in the workload's
//! dispatch. ufutex also runs as variants under other spin and handoff policies
//! ([`LockEntry`]). (The futex competitors are in `competitor.rs`.)

use std::cell::UnsafeCell;
use std::time::Duration;
use ufutex::sync::{set_spin_policy, set_starvation_policy, SpinPolicy, Starvation};

/// A lock protecting a counter.
pub trait BenchLock: Sync + Send + Default {
    /// Run `f` with the lock held.
    fn with(&self, f: impl FnOnce(&mut u64));

    /// [`BenchLock::with`], returning what `f` returns.
    fn with_result<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
        let mut out = None;
        self.with(|d| out = Some(f(d)));
        out.expect("`with` runs its closure")
    }
}

#[derive(Default)]
pub struct StdMutex(std::sync::Mutex<u64>);
impl BenchLock for StdMutex {
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[derive(Default)]
pub struct ParkingLotMutex(parking_lot::Mutex<u64>);
impl BenchLock for ParkingLotMutex {
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.0.lock())
    }
}

/// glibc's pthread_mutex (default type), boxed so it never moves after initialisation.
pub struct PthreadMutex {
    m: Box<UnsafeCell<libc::pthread_mutex_t>>,
    data: UnsafeCell<u64>,
}

// SAFETY:
// - the pthread mutex is made for sharing between threads, and `data` is only touched while
//   it is held (in `with`).
unsafe impl Sync for PthreadMutex {}
// SAFETY:
// - an unlocked pthread mutex may be moved between threads (it is boxed, so it never moves).
unsafe impl Send for PthreadMutex {}

impl Default for PthreadMutex {
    fn default() -> Self {
        PthreadMutex { m: Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)), data: UnsafeCell::new(0) }
    }
}

impl BenchLock for PthreadMutex {
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        // SAFETY:
        // - `m` is a statically initialised default mutex at a stable (boxed) address.
        // - `data` is only accessed between lock and unlock, so the `&mut` is exclusive.
        // - a default mutex locked and unlocked by the same thread cannot fail.
        unsafe {
            libc::pthread_mutex_lock(self.m.get());
            f(&mut *self.data.get());
            libc::pthread_mutex_unlock(self.m.get());
        }
    }
}

impl Drop for PthreadMutex {
    fn drop(&mut self) {
        // SAFETY: the mutex is unlocked (every `with` unlocked it) and not used again.
        unsafe {
            libc::pthread_mutex_destroy(self.m.get());
        }
    }
}

/// ufutex's handoff mutex (`ufutex::sync`).
#[derive(Default)]
pub struct UfutexMutex(ufutex::sync::Mutex<u64>);

impl BenchLock for UfutexMutex {
    #[inline]
    fn with(&self, f: impl FnOnce(&mut u64)) {
        f(&mut self.0.lock())
    }
}

/// Which lock a competitor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Ufutex,
    Pthread,
    Std,
    ParkingLot,
}

impl LockKind {
    /// Every lock, in the default `--impl` order.
    pub const ALL: [LockKind; 4] = [LockKind::Ufutex, LockKind::Pthread, LockKind::Std, LockKind::ParkingLot];

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Ufutex => "ufutex",
            LockKind::Pthread => "pthread",
            LockKind::Std => "std",
            LockKind::ParkingLot => "parking_lot",
        }
    }

    pub fn by_name(name: &str) -> Option<LockKind> {
        LockKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The locks `lock` runs when `--impl` is not given (the ufutex variants run only when named).
pub fn names() -> Vec<&'static str> {
    LockKind::ALL.iter().map(|k| k.name()).collect()
}

/// ufutex's process-global lock policies for one competitor; `None` is the library default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    pub starvation: Option<Starvation>,
    pub spin: Option<SpinPolicy>,
}

/// A lock picked with `--impl`: which lock, and for ufutex the policies it runs under.
///
/// Names: the plain locks ([`LockKind::name`]), and ufutex variants that are not run unless
/// named:
/// - `ufutex-nohandoff`: never hands the lock to a starving waiter ([`Starvation::Never`]);
/// - `ufutex-handoff-<T>`: hands off after a waiter tried for `T` (`50us`, `200us`, `1ms`;
///   units ns, us/µs, ms, s), or `ufutex-handoff-<N>wakeups` after `N` lost wakeups;
/// - `ufutex-spin-<B>x<F>-<Y>y[-c<C>]`: `B` busy rounds, the first `F` CPU hints (a power of
///   two, doubling each round), then `Y` yields; at most `C` busy rounds while others are
///   registered to park on the lock (`B` if not given: no cut); the default is
///   `ufutex-spin-5x16-7y` (no cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    pub name: String,
    pub kind: LockKind,
    pub policy: Policy,
}

/// The ufutex variants' name patterns, for error messages (`--help` spells them in `cli.rs`).
const VARIANTS: &str = "ufutex-nohandoff, ufutex-handoff-<T> (T: 50us, 1ms, … or <N>wakeups), \
                            ufutex-spin-<B>x<F>-<Y>y[-c<C>] (B busy rounds from F hints, then Y yields; \
                            C busy rounds while others wait)";

impl LockEntry {
    pub fn by_name(name: &str) -> Result<LockEntry, String> {
        let entry = |kind, policy| LockEntry { name: name.to_string(), kind, policy };
        if let Some(kind) = LockKind::by_name(name) {
            return Ok(entry(kind, Policy::default()));
        }
        let policy = match name.strip_prefix("ufutex-") {
            Some("nohandoff") => Policy { starvation: Some(Starvation::Never), spin: None },
            Some(rest) if rest.starts_with("handoff-") => {
                let t = &rest["handoff-".len()..];
                Policy { starvation: Some(threshold(t).map_err(|e| format!("{name:?}: {e}"))?), spin: None }
            }
            Some(rest) if rest.starts_with("spin-") => {
                let s = &rest["spin-".len()..];
                Policy { starvation: None, spin: Some(spin(s).map_err(|e| format!("{name:?}: {e}"))?) }
            }
            _ => {
                return Err(format!("unknown competitor {name:?}; expected one of: {}, {VARIANTS}", names().join(", ")))
            }
        };
        Ok(entry(LockKind::Ufutex, policy))
    }

    /// Put this entry's policies in force for one run; dropping the guard restores the
    /// defaults. The policies are process-global and the scheduler interleaves competitors in
    /// one process, so every run sets them first and leaves the defaults behind.
    pub fn knobs(&self) -> Knobs {
        set_starvation_policy(self.policy.starvation);
        set_spin_policy(self.policy.spin);
        Knobs(())
    }

    /// What a ufutex variant changes, in words; `None` for the locks as they come.
    pub fn describe(&self) -> Option<String> {
        let handoff = self.policy.starvation.map(|s| match s {
            Starvation::Never => "never hands off (a plain barging lock)".to_string(),
            Starvation::After(d) => format!("hands off to a waiter that has tried for {d:?}"),
            Starvation::Wakeups(n) => format!("hands off to a waiter after {n} lost wakeup(s)"),
        });
        let spin = self.policy.spin.map(|p| {
            let crowded = if p.crowded_rounds < p.busy_rounds {
                format!(" ({} while others wait on the lock)", p.crowded_rounds)
            } else {
                String::new()
            };
            format!(
                "spins {} busy round(s){crowded} from {} CPU hints, then {} yield(s)",
                p.busy_rounds,
                1u32 << p.first_shift,
                p.yield_rounds
            )
        });
        let parts: Vec<String> = handoff.into_iter().chain(spin).collect();
        (!parts.is_empty()).then(|| format!("ufutex::sync::Mutex that {}", parts.join(" and ")))
    }
}

/// The policies of one run in force; restores the defaults when dropped.
#[must_use = "the policies are restored when the guard drops"]
pub struct Knobs(());

impl Drop for Knobs {
    fn drop(&mut self) {
        set_starvation_policy(None);
        set_spin_policy(None);
    }
}

/// `50us`, `1ms`, … or `3wakeups`.
fn threshold(t: &str) -> Result<Starvation, String> {
    if let Some(n) = t.strip_suffix("wakeups").or_else(|| t.strip_suffix("wakeup")) {
        return n.parse().map(Starvation::Wakeups).map_err(|_| format!("{n:?} is not a number of wakeups"));
    }
    const UNITS: [(&str, u64); 5] = [("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)];
    let (n, per) = UNITS
        .iter()
        .find_map(|&(u, per)| t.strip_suffix(u).map(|n| (n, per)))
        .ok_or_else(|| format!("threshold {t:?}: a time (50us, 1ms, …) or <N>wakeups"))?;
    let n: u64 = n.parse().map_err(|_| format!("threshold {t:?}: {n:?} is not a number"))?;
    let nanos = n.checked_mul(per).ok_or_else(|| format!("threshold {t:?} is too long"))?;
    Ok(Starvation::After(Duration::from_nanos(nanos)))
}

/// `<B>x<F>-<Y>y[-c<C>]`: `B` busy rounds, the first `F` hints long, then `Y` yields; at most
/// `C` busy rounds while other waiters are registered on the lock (default `B`: no cut).
fn spin(s: &str) -> Result<SpinPolicy, String> {
    let shape =
        || format!("spin policy {s:?}: <busy rounds>x<first hints>-<yields>y[-c<crowded rounds>], e.g. 2x16-7y");
    let (s_main, crowded) = match s.rsplit_once("-c") {
        Some((main, c)) => (main, Some(c)),
        None => (s, None),
    };
    let (busy, yields) = s_main.split_once('-').ok_or_else(shape)?;
    let (rounds, first) = busy.split_once('x').ok_or_else(shape)?;
    let yields = yields.strip_suffix('y').ok_or_else(shape)?;
    let byte =
        |v: &str, what: &str| v.parse::<u8>().map_err(|_| format!("spin policy {s:?}: {what} {v:?} is not 0 … 255"));
    let first: u32 = first.parse().map_err(|_| shape())?;
    if !first.is_power_of_two() || first > 1 << 20 {
        return Err(format!("spin policy {s:?}: the first round's {first} hints must be a power of two ≤ 2^20"));
    }
    let busy_rounds = byte(rounds, "busy rounds")?;
    Ok(SpinPolicy {
        first_shift: first.trailing_zeros() as u8,
        busy_rounds,
        yield_rounds: byte(yields, "yields")?,
        crowded_rounds: crowded.map_or(Ok(busy_rounds), |c| byte(c, "crowded rounds"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str) -> Policy {
        let e = LockEntry::by_name(name).unwrap();
        assert_eq!((e.name.as_str(), e.kind), (name, LockKind::Ufutex));
        e.policy
    }

    #[test]
    fn plain_locks_run_under_the_defaults() {
        for k in LockKind::ALL {
            let e = LockEntry::by_name(k.name()).unwrap();
            assert_eq!((e.kind, e.policy), (k, Policy::default()));
            assert_eq!(e.describe(), None);
        }
    }

    #[test]
    fn handoff_variants_parse() {
        assert_eq!(policy("ufutex-nohandoff").starvation, Some(Starvation::Never));
        let after = |d| Some(Starvation::After(d));
        assert_eq!(policy("ufutex-handoff-50us").starvation, after(Duration::from_micros(50)));
        assert_eq!(policy("ufutex-handoff-200µs").starvation, after(Duration::from_micros(200)));
        assert_eq!(policy("ufutex-handoff-1ms").starvation, after(Duration::from_millis(1)));
        assert_eq!(policy("ufutex-handoff-1wakeup").starvation, Some(Starvation::Wakeups(1)));
        assert_eq!(policy("ufutex-handoff-3wakeups").starvation, Some(Starvation::Wakeups(3)));
        assert!(LockEntry::by_name("ufutex-nohandoff").unwrap().describe().unwrap().contains("never hands off"));
    }

    #[test]
    fn spin_variants_parse() {
        assert_eq!(policy("ufutex-spin-5x16-7y").spin, Some(SpinPolicy::DEFAULT));
        let p = policy("ufutex-spin-6x1-0y").spin.unwrap();
        assert_eq!((p.first_shift, p.busy_rounds, p.yield_rounds, p.crowded_rounds), (0, 6, 0, 6));
        let p = policy("ufutex-spin-5x16-7y-c2").spin.unwrap();
        assert_eq!((p.first_shift, p.busy_rounds, p.yield_rounds, p.crowded_rounds), (4, 5, 7, 2));
        let d = LockEntry::by_name("ufutex-spin-5x16-7y-c1").unwrap().describe().unwrap();
        assert!(d.contains("5 busy round(s) (1 while others wait on the lock) from 16"), "{d}");
        let d = LockEntry::by_name("ufutex-spin-1x32-7y").unwrap().describe().unwrap();
        assert!(d.contains("1 busy round(s) from 32 CPU hints, then 7 yield(s)"), "{d}");
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        let err = |n: &str| LockEntry::by_name(n).unwrap_err();
        assert!(err("kernel").contains("unknown competitor \"kernel\""));
        assert!(err("kernel").contains("ufutex-spin-<B>x<F>-<Y>y"));
        assert!(err("ufutex-handoff-5min").contains("threshold"));
        assert!(err("ufutex-handoff-xwakeups").contains("wakeups"));
        assert!(err("ufutex-spin-2x3-7y").contains("power of two"));
        assert!(err("ufutex-spin-2x4-7y-cx").contains("crowded rounds"));
        assert!(err("ufutex-spin-2x16").contains("e.g. 2x16-7y"));
        assert!(err("ufutex-spin-300x16-7y").contains("busy rounds"));
        assert!(err("ufutex-fast").contains("unknown competitor"));
    }
}
