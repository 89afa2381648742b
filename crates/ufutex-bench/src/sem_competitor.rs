//! The competitors of the `sem-pingpong` workload: two counting semaphores (ping, pong) that
//! two processes post and wait on. One [`SemCompetitor`] impl per kind of semaphore; the
//! workload is generic over it. Each repetition creates a fresh pair in the parent, the forked
//! child gets its own handles of it, and the pair is removed when it drops. (The futex
//! competitors are in `competitor.rs`, the locks in `lock_competitor.rs`, the keyed namespaces
//! in `keyed_competitor.rs`.)

use crate::sysv::{self, IdClaim, Limits};
use std::ffi::CString;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ufutex::named::{Namespace, Open, Semaphore};

/// Which semaphore of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Ping = 0,
    Pong = 1,
}

/// One deadline in each form the competitors take it, computed once per slice (no clock read
/// per wait).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub mono: Instant,
    /// The same instant on `CLOCK_REALTIME` (`sem_timedwait`).
    realtime: libc::timespec,
    /// The time from now to it (`semtimedop`'s timeout is relative: each wait may take this).
    relative: libc::timespec,
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
}

impl Bound {
    pub fn after(d: Duration) -> Bound {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default() + d;
        Bound { mono: Instant::now() + d, realtime: timespec(wall), relative: timespec(d) }
    }
}

/// The pair as one process sees it. Errors are errnos (`EINTR`: a signal handler ran).
pub trait Sems: Copy {
    /// Add one (`semop` +1).
    fn post(&self, s: Side) -> Result<(), i32>;
    /// Take one, sleeping while it is 0, at most until `by` (`semop` −1).
    fn wait(&self, s: Side, by: &Bound) -> Result<(), i32>;
}

/// One kind of semaphore.
pub trait SemCompetitor: Sync {
    /// A process's handles of a pair.
    type Sems: Sems;
    /// What owns a pair in the parent: it is removed (names and objects) when this drops.
    type Pair;

    fn name(&self) -> &'static str;
    /// `Some(reason)` when this competitor cannot run here.
    fn unsupported(&self) -> Option<String> {
        None
    }
    /// A new pair, both at 0, and the parent's handles of it.
    fn create(&self) -> Result<(Self::Pair, Self::Sems), String>;
    /// In the forked child: its handles of the pair (`parent`: the parent's, inherited).
    fn open_in_child(&self, pair: &Self::Pair, parent: Self::Sems) -> Result<Self::Sems, String>;
    /// In the parent, once the child has its handles: drop what only served to find the pair.
    fn child_has_opened(&self, _pair: &mut Self::Pair) {}
}

/// One SysV set of two semaphores, `semget(IPC_PRIVATE, 2, 0600)`: `semop` +1 posts,
/// `semtimedop` −1 waits. Linux starts a new set's semaphores at 0. The child uses the id.
pub struct SysvSemop {
    limits: Result<Limits, String>,
}

impl SysvSemop {
    pub const NAME: &'static str = "sysv-semop";
}

#[derive(Debug, Clone, Copy)]
pub struct SysvSems(i32);

impl Sems for SysvSems {
    #[inline]
    fn post(&self, s: Side) -> Result<(), i32> {
        sysv::semop(self.0, s as u16, 1)
    }
    #[inline]
    fn wait(&self, s: Side, by: &Bound) -> Result<(), i32> {
        sysv::semtimedop(self.0, s as u16, -1, &by.relative)
    }
}

/// The set, removed when it drops; claimed for removal on SIGINT/SIGTERM/SIGHUP meanwhile.
pub struct SysvPair {
    id: i32,
    _claim: IdClaim,
}

impl Drop for SysvPair {
    fn drop(&mut self) {
        let _ = sysv::remove(self.id);
    }
}

impl SemCompetitor for SysvSemop {
    type Sems = SysvSems;
    type Pair = SysvPair;

    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn unsupported(&self) -> Option<String> {
        match &self.limits {
            Ok(l) => l.short_of(1),
            Err(e) => Some(format!("SysV semaphores unavailable: {e}")),
        }
    }
    fn create(&self) -> Result<(SysvPair, SysvSems), String> {
        let id = sysv::semget(libc::IPC_PRIVATE, 2, 0o600)
            .map_err(|e| format!("semget(IPC_PRIVATE, 2): {}", sysv::errno_name(e)))?;
        match IdClaim::claim(id) {
            Ok(claim) => Ok((SysvPair { id, _claim: claim }, SysvSems(id))),
            Err(e) => {
                let _ = sysv::remove(id);
                Err(e.to_string())
            }
        }
    }
    fn open_in_child(&self, _: &SysvPair, parent: SysvSems) -> Result<SysvSems, String> {
        Ok(parent)
    }
}

/// Two named POSIX semaphores, `sem_open("/ufutex-bench-<pid>-ping"/"-pong", O_CREAT | O_EXCL,
/// 0600, 0)`, unlinked as soon as both are open: `sem_post`, `sem_timedwait`. The child uses
/// the parent's `sem_t`s (a `MAP_SHARED` mapping, inherited across fork).
pub struct PosixSem;

impl PosixSem {
    pub const NAME: &'static str = "posix-sem";
}

#[derive(Debug, Clone, Copy)]
pub struct PosixSems([*mut libc::sem_t; 2]);

// SAFETY: a `sem_t` is made to be used from any thread (and process) at once; the pointers stay
// valid while the `PosixPair` that closes them lives, which the workload keeps past every use.
unsafe impl Send for PosixSems {}
// SAFETY: as above.
unsafe impl Sync for PosixSems {}

impl Sems for PosixSems {
    #[inline]
    fn post(&self, s: Side) -> Result<(), i32> {
        // SAFETY: an open semaphore of this process (see `PosixSems`' Send).
        if unsafe { libc::sem_post(self.0[s as usize]) } == 0 {
            Ok(())
        } else {
            Err(errno())
        }
    }
    #[inline]
    fn wait(&self, s: Side, by: &Bound) -> Result<(), i32> {
        // SAFETY: an open semaphore, and a valid timespec that lives across the call.
        if unsafe { libc::sem_timedwait(self.0[s as usize], &by.realtime) } == 0 {
            Ok(())
        } else {
            Err(errno())
        }
    }
}

/// The two `sem_t`s, closed when it drops (their names are gone already).
pub struct PosixPair(PosixSems);

impl Drop for PosixPair {
    fn drop(&mut self) {
        for s in self.0 .0 {
            // SAFETY: opened by `create`, closed once, here; nothing uses it after (the workload
            // drops the pair last).
            unsafe { libc::sem_close(s) };
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `sem_open(name, O_CREAT | O_EXCL, 0600, 0)`, then `sem_unlink(name)`.
fn posix_open_unlinked(name: &CString) -> Result<*mut libc::sem_t, String> {
    // SAFETY: `name` is NUL-terminated; the variadic mode and value are passed as the C types
    // sem_open reads (mode_t promoted to unsigned int, unsigned int).
    let s = unsafe {
        libc::sem_open(name.as_ptr(), libc::O_CREAT | libc::O_EXCL, 0o600 as libc::c_uint, 0 as libc::c_uint)
    };
    if s == libc::SEM_FAILED {
        return Err(format!("sem_open({name:?}, O_CREAT | O_EXCL): {}", sysv::errno_name(errno())));
    }
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::sem_unlink(name.as_ptr()) };
    Ok(s)
}

impl SemCompetitor for PosixSem {
    type Sems = PosixSems;
    type Pair = PosixPair;

    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn create(&self) -> Result<(PosixPair, PosixSems), String> {
        let pid = std::process::id();
        let name = |side: &str| CString::new(format!("/ufutex-bench-{pid}-{side}")).expect("no NUL");
        let (ping, pong) = (name("ping"), name("pong"));
        for n in [&ping, &pong] {
            // A name with our pid left by a dead process of the same pid (never another's).
            // SAFETY: `n` is NUL-terminated.
            unsafe { libc::sem_unlink(n.as_ptr()) };
        }
        let a = posix_open_unlinked(&ping)?;
        let b = match posix_open_unlinked(&pong) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: opened just above, used by nothing else.
                unsafe { libc::sem_close(a) };
                return Err(e);
            }
        };
        let sems = PosixSems([a, b]);
        Ok((PosixPair(sems), sems))
    }
    fn open_in_child(&self, _: &PosixPair, parent: PosixSems) -> Result<PosixSems, String> {
        Ok(parent)
    }
}

/// Two `ufutex::named` semaphores (keys 1 and 2) in a namespace of the repetition's own,
/// `bench-sem-<pid>-<n>`: the child opens the namespace by name and the semaphores by key
/// (`Open::Existing`), the real path of two unrelated processes; the parent unlinks the name
/// once the child has them. Posts are `post(1)`, waits `wait(Some(deadline))`.
pub struct UfutexNamed;

impl UfutexNamed {
    pub const NAME: &'static str = "ufutex-named";
    const KEYS: [u64; 2] = [1, 2];

    fn ns_name() -> String {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("bench-sem-{}-{n}", std::process::id())
    }

    /// Namespace `name` mapped for the life of the process (ufutex never unmaps one either),
    /// so that its semaphores are `'static`. One mapping per repetition: address space only
    /// (a sparse file of which the two semaphores' pages are touched).
    fn open(name: &str) -> Result<&'static Namespace, String> {
        Namespace::open(name).map(|ns| &*Box::leak(Box::new(ns))).map_err(|e| format!("namespace {name}: {e}"))
    }

    fn semaphores(ns: &'static Namespace, how: Open) -> Result<UfutexSems, String> {
        let [a, b] = Self::KEYS.map(|k| ns.semaphore(k, how, 0).map(|(s, _)| s));
        match (a, b) {
            (Ok(a), Ok(b)) => Ok(UfutexSems([a, b])),
            (Err(e), _) | (_, Err(e)) => Err(format!("semaphore ({how:?}): {e}")),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct UfutexSems([Semaphore<'static>; 2]);

impl Sems for UfutexSems {
    #[inline]
    fn post(&self, s: Side) -> Result<(), i32> {
        self.0[s as usize].post(1).map_err(|e| e.errno())
    }
    #[inline]
    fn wait(&self, s: Side, by: &Bound) -> Result<(), i32> {
        self.0[s as usize].wait(Some(by.mono.into())).map_err(|e| e.errno())
    }
}

/// The repetition's namespace: its semaphores removed and its name unlinked (if still there)
/// when it drops.
pub struct UfutexPair {
    ns: &'static Namespace,
    name: String,
    linked: bool,
}

impl Drop for UfutexPair {
    fn drop(&mut self) {
        for k in UfutexNamed::KEYS {
            let _ = self.ns.remove(k);
        }
        if self.linked {
            let _ = Namespace::unlink(&self.name);
        }
    }
}

impl SemCompetitor for UfutexNamed {
    type Sems = UfutexSems;
    type Pair = UfutexPair;

    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn create(&self) -> Result<(UfutexPair, UfutexSems), String> {
        let name = Self::ns_name();
        // A namespace with our pid left by a dead process of the same pid (never another's).
        let _ = Namespace::unlink(&name);
        let pair = UfutexPair { ns: Self::open(&name)?, name, linked: true };
        let sems = Self::semaphores(pair.ns, Open::CreateNew)?;
        Ok((pair, sems))
    }
    fn open_in_child(&self, pair: &UfutexPair, _: UfutexSems) -> Result<UfutexSems, String> {
        Self::semaphores(Self::open(&pair.name)?, Open::Existing)
    }
    fn child_has_opened(&self, pair: &mut UfutexPair) {
        pair.linked = false;
        let _ = Namespace::unlink(&pair.name);
    }
}

/// The competitor names `--impl` accepts for `sem-pingpong`, in their default order.
pub const NAMES: &[&str] = &[UfutexNamed::NAME, SysvSemop::NAME, PosixSem::NAME];

/// A semaphore competitor picked on the command line (static dispatch through
/// [`dispatch_sem!`]).
pub enum AnySem {
    Ufutex(UfutexNamed),
    Sysv(SysvSemop),
    Posix(PosixSem),
}

impl AnySem {
    pub fn by_name(name: &str) -> Result<AnySem, String> {
        match name {
            UfutexNamed::NAME => Ok(AnySem::Ufutex(UfutexNamed)),
            SysvSemop::NAME => Ok(AnySem::Sysv(SysvSemop { limits: Limits::read() })),
            PosixSem::NAME => Ok(AnySem::Posix(PosixSem)),
            other => Err(format!("unknown competitor {other:?}; expected one of: {}", NAMES.join(", "))),
        }
    }

    pub fn name(&self) -> &'static str {
        dispatch_sem!(self, s => s.name())
    }

    pub fn unsupported(&self) -> Option<String> {
        dispatch_sem!(self, s => s.unsupported())
    }
}

/// Run `$body` with `$s` bound to the concrete [`SemCompetitor`] inside an [`AnySem`].
#[macro_export]
macro_rules! dispatch_sem {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            $crate::sem_competitor::AnySem::Ufutex($s) => $body,
            $crate::sem_competitor::AnySem::Sysv($s) => $body,
            $crate::sem_competitor::AnySem::Posix($s) => $body,
        }
    };
}
pub use dispatch_sem;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve() {
        for n in NAMES {
            assert_eq!(AnySem::by_name(n).unwrap().name(), *n);
        }
        assert!(AnySem::by_name("semop").err().unwrap().contains("sysv-semop"));
    }

    /// One process plays both sides: post, then wait takes it; a wait on 0 times out.
    fn counts<C: SemCompetitor>(c: &C) {
        if c.unsupported().is_some() {
            return;
        }
        let (mut pair, sems) = c.create().unwrap();
        let again = c.open_in_child(&pair, sems).unwrap();
        c.child_has_opened(&mut pair);
        let by = Bound::after(Duration::from_millis(20));
        let seen =
            [sems.post(Side::Ping), again.wait(Side::Ping, &by), again.post(Side::Pong), sems.wait(Side::Pong, &by)];
        assert_eq!(seen, [Ok(()); 4], "{}", c.name());
        let late = sems.wait(Side::Ping, &Bound::after(Duration::from_millis(2)));
        assert!(matches!(late, Err(libc::ETIMEDOUT | libc::EAGAIN)), "{}: {late:?}", c.name());
    }

    #[test]
    fn every_competitor_counts_and_times_out() {
        counts(&UfutexNamed);
        counts(&SysvSemop { limits: Limits::read() });
        counts(&PosixSem);
    }

    #[test]
    fn the_ufutex_namespace_is_unlinked_once_the_child_has_it() {
        let (mut pair, _) = UfutexNamed.create().unwrap();
        assert!(Namespace::list().unwrap().contains(&pair.name));
        UfutexNamed.child_has_opened(&mut pair);
        assert!(!Namespace::list().unwrap().contains(&pair.name));
    }
}
