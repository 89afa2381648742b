//! SysV semaphore sets for the `keyed` and `sem-pingpong` workloads: the calls they time
//! (`semget`, `semctl` `IPC_RMID`, `semop`, `semtimedop`), the limits they must respect (read
//! from /proc, never changed), and the cleanup of the sets a run creates — by key range or by
//! id — when the process is killed by SIGINT, SIGTERM or SIGHUP (a [`Cleanup`] or [`IdClaim`]
//! while they may exist; the `Drop` guards in the workloads cover errors and panics). The same
//! handler unlinks the files of a [`FileClaim`] (a ufutex namespace that new processes must find
//! by name while a run lives).

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use std::sync::Once;

/// `semget(key, nsems, flags)`: the set's id, or the errno.
#[inline]
pub fn semget(key: libc::key_t, nsems: i32, flags: i32) -> Result<i32, i32> {
    // SAFETY: semget takes integers only; no memory is passed.
    let id = unsafe { libc::semget(key, nsems, flags) };
    if id < 0 {
        Err(errno())
    } else {
        Ok(id)
    }
}

/// `semctl(id, 0, IPC_RMID)`.
#[inline]
pub fn remove(id: i32) -> Result<(), i32> {
    // SAFETY: IPC_RMID takes no fourth argument (none is passed); integers only.
    if unsafe { libc::semctl(id, 0, libc::IPC_RMID) } < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// `semop(id, {num, op, 0}, 1)`: add `op` to semaphore `num` of set `id` (−1 sleeps while it
/// is 0).
#[inline]
pub fn semop(id: i32, num: u16, op: i16) -> Result<(), i32> {
    let mut sop = libc::sembuf { sem_num: num, sem_op: op, sem_flg: 0 };
    // SAFETY: `sop` is one valid sembuf that lives across the call, and 1 is its count.
    if unsafe { libc::semop(id, &mut sop, 1) } < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// As [`semop`], sleeping at most `timeout` (relative; `EAGAIN` when it passes).
#[inline]
pub fn semtimedop(id: i32, num: u16, op: i16, timeout: &libc::timespec) -> Result<(), i32> {
    let mut sop = libc::sembuf { sem_num: num, sem_op: op, sem_flg: 0 };
    // SAFETY: `sop` is one valid sembuf and `timeout` a valid timespec, both living across the
    // call; 1 is the count of `sop`.
    if unsafe { ffi::semtimedop(id, &mut sop, 1, timeout) } < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

mod ffi {
    extern "C" {
        /// glibc's (the libc crate does not declare it).
        pub fn semtimedop(
            semid: libc::c_int,
            sops: *mut libc::sembuf,
            nsops: libc::size_t,
            timeout: *const libc::timespec,
        ) -> libc::c_int;
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The errno's name and text, e.g. "ENOSPC (No space left on device)".
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::ENOENT => "ENOENT",
        libc::EEXIST => "EEXIST",
        libc::ENOSPC => "ENOSPC",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::EIDRM => "EIDRM",
        libc::EPERM => "EPERM",
        libc::ENOMEM => "ENOMEM",
        libc::ENOSYS => "ENOSYS",
        libc::EINTR => "EINTR",
        libc::EAGAIN => "EAGAIN",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => return io::Error::from_raw_os_error(e).to_string(),
    };
    let text = io::Error::from_raw_os_error(e).to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    format!("{name} ({text})")
}

/// The semaphore limits of this IPC namespace and what is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// SEMMNS: semaphores, all sets together.
    pub semmns: u64,
    /// SEMMNI: sets.
    pub semmni: u64,
    pub sets_in_use: u64,
    pub sems_in_use: u64,
}

impl Limits {
    pub fn read() -> Result<Limits, String> {
        let sem = std::fs::read_to_string("/proc/sys/kernel/sem").map_err(|e| format!("/proc/sys/kernel/sem: {e}"))?;
        let used = std::fs::read_to_string("/proc/sysvipc/sem").map_err(|e| format!("/proc/sysvipc/sem: {e}"))?;
        Limits::parse(&sem, &used)
    }

    /// From `/proc/sys/kernel/sem` (SEMMSL SEMMNS SEMOPM SEMMNI) and `/proc/sysvipc/sem` (a
    /// header line, then one line per set; nsems is its fourth column).
    pub fn parse(sem: &str, sysvipc: &str) -> Result<Limits, String> {
        let f: Vec<u64> = sem.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let [_, semmns, _, semmni] = f[..] else {
            return Err(format!("/proc/sys/kernel/sem: expected 4 numbers, read {sem:?}"));
        };
        let sets: Vec<&str> = sysvipc.lines().skip(1).filter(|l| !l.trim().is_empty()).collect();
        let sems = sets.iter().filter_map(|l| l.split_whitespace().nth(3)?.parse::<u64>().ok()).sum();
        Ok(Limits { semmns, semmni, sets_in_use: sets.len() as u64, sems_in_use: sems })
    }

    /// Why `sets` more sets of one semaphore cannot be created now, if they cannot.
    pub fn short_of(&self, sets: usize) -> Option<String> {
        let free_sets = self.semmni.saturating_sub(self.sets_in_use);
        let free_sems = self.semmns.saturating_sub(self.sems_in_use);
        if sets as u64 > free_sets {
            Some(format!(
                "needs {sets} semaphore sets, {free_sets} free (SEMMNI {} in /proc/sys/kernel/sem, {} in use in \
                 /proc/sysvipc/sem); sysctls are left alone",
                self.semmni, self.sets_in_use
            ))
        } else if sets as u64 > free_sems {
            Some(format!(
                "needs {sets} semaphores, {free_sems} free (SEMMNS {}, {} in use); sysctls are left alone",
                self.semmns, self.sems_in_use
            ))
        } else {
            None
        }
    }
}

/// Key ranges that may hold sets this process created: (first key, length; 0 = a free slot).
const SLOTS: usize = 8;
static FIRST: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static LEN: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

/// A key range registered for removal if the process is killed by SIGINT, SIGTERM or SIGHUP
/// while the claim lives. The range must have been checked empty before the claim (the
/// handler removes every set it finds in it).
pub struct Cleanup(usize);

impl Cleanup {
    /// Register `[first, first + len)`; installs the signal handlers the first time.
    pub fn claim(first: libc::key_t, len: usize) -> io::Result<Cleanup> {
        INSTALL.call_once(install_handlers);
        let len = i32::try_from(len).map_err(io::Error::other)?;
        for (i, l) in LEN.iter().enumerate() {
            // Publish the first key before the length: the handler reads the length first.
            if l.load(Ordering::Acquire) == 0
                && FIRST[i].compare_exchange(0, first, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                l.store(len, Ordering::Release);
                return Ok(Cleanup(i));
            }
        }
        Err(io::Error::other(format!("more than {SLOTS} key ranges in use at once")))
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        LEN[self.0].store(0, Ordering::Release);
        FIRST[self.0].store(0, Ordering::Release);
    }
}

/// Sets by id (`IPC_PRIVATE` ones, which no key finds): id + 1, 0 = a free slot.
static IDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

/// A set registered by id for removal if the process is killed by SIGINT, SIGTERM or SIGHUP
/// while the claim lives (remove the set before dropping the claim).
pub struct IdClaim(usize);

impl IdClaim {
    /// Register the set `id`; installs the signal handlers the first time.
    pub fn claim(id: i32) -> io::Result<IdClaim> {
        INSTALL.call_once(install_handlers);
        let v = id.checked_add(1).filter(|v| *v > 0).ok_or_else(|| io::Error::other(format!("bad set id {id}")))?;
        for (i, slot) in IDS.iter().enumerate() {
            if slot.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return Ok(IdClaim(i));
            }
        }
        Err(io::Error::other(format!("more than {SLOTS} semaphore sets claimed at once")))
    }
}

impl Drop for IdClaim {
    fn drop(&mut self) {
        IDS[self.0].store(0, Ordering::Release);
    }
}

/// Files to unlink: NUL-terminated paths, leaked (a handler may be reading one when its claim
/// drops); null = a free slot.
static FILES: [AtomicPtr<libc::c_char>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// A file registered for unlinking if the process is killed by SIGINT, SIGTERM or SIGHUP while
/// the claim lives (unlink it yourself before dropping the claim on the other exit paths).
pub struct FileClaim(usize);

impl FileClaim {
    /// Register `path`; installs the signal handlers the first time. Its few bytes leak.
    pub fn claim(path: &str) -> io::Result<FileClaim> {
        let raw = CString::new(path).map_err(io::Error::other)?.into_raw();
        INSTALL.call_once(install_handlers);
        for (i, slot) in FILES.iter().enumerate() {
            if slot.compare_exchange(std::ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return Ok(FileClaim(i));
            }
        }
        Err(io::Error::other(format!("more than {SLOTS} files claimed at once")))
    }
}

impl Drop for FileClaim {
    fn drop(&mut self) {
        FILES[self.0].store(std::ptr::null_mut(), Ordering::Release);
    }
}

static INSTALL: Once = Once::new();

/// SIGINT, SIGTERM and SIGHUP run [`on_signal`], where their action was the default one (a
/// signal the caller ignores stays ignored).
fn install_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY:
        // - `act` and `old` are zeroed sigactions that live across the calls; `on_signal` is an
        //   `extern "C" fn(c_int)`, the handler shape without SA_SIGINFO.
        // - reading the old action first and restoring it when it was not SIG_DFL leaves
        //   ignored or handled signals as they were.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut act.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL {
                libc::sigaction(sig, &act, std::ptr::null_mut());
            }
        }
    }
}

/// Remove every set in the claimed ranges and every claimed id, unlink every claimed file, then
/// die of the same signal (SA_RESETHAND made its action the default again; it is delivered when
/// the handler returns). Only atomics loads and the `semget`/`semctl`/`unlink` system calls
/// (thin glibc wrappers: no lock, no allocation).
extern "C" fn on_signal(sig: libc::c_int) {
    for i in 0..SLOTS {
        let len = LEN[i].load(Ordering::Acquire);
        let first = FIRST[i].load(Ordering::Acquire);
        if first <= 0 {
            continue; // freed meanwhile; key 0 would be IPC_PRIVATE, which always creates
        }
        for key in (0..len).map(|k| first.wrapping_add(k)) {
            if let Ok(id) = semget(key, 0, 0) {
                let _ = remove(id);
            }
        }
    }
    for id in &IDS {
        let v = id.load(Ordering::Acquire);
        if v > 0 {
            let _ = remove(v - 1);
        }
    }
    for f in &FILES {
        let p = f.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a claimed path is a leaked NUL-terminated string, never freed.
            unsafe { libc::unlink(p) };
        }
    }
    // SAFETY: raise is async-signal-safe; the signal stays blocked until this handler returns.
    unsafe {
        libc::raise(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_and_say_what_is_short() {
        let used = "       key      semid perms      nsems   uid\n   4342338          0   600          1  1000\n   \
                    0          1   600          3  1000\n";
        let l = Limits::parse("32000\t1024000000\t500\t32000\n", used).unwrap();
        assert_eq!(l, Limits { semmns: 1_024_000_000, semmni: 32000, sets_in_use: 2, sems_in_use: 4 });
        assert_eq!(l.short_of(31_998), None);
        let why = l.short_of(31_999).unwrap();
        assert!(why.contains("31998 free") && why.contains("SEMMNI 32000"), "{why}");
        let tight = Limits::parse("250 10 32 128", used).unwrap();
        assert!(tight.short_of(7).unwrap().contains("SEMMNS 10"));
        assert!(Limits::parse("1 2 3", used).is_err());
    }

    #[test]
    fn errnos_are_named() {
        assert!(errno_name(libc::ENOSPC).starts_with("ENOSPC ("));
        assert!(!errno_name(libc::EBADF).is_empty());
    }

    #[test]
    fn claims_take_and_free_slots() {
        let a = Cleanup::claim(0x7100_0000, 4).unwrap();
        let b = Cleanup::claim(0x7200_0000, 4).unwrap();
        assert_ne!(a.0, b.0);
        assert_eq!(LEN[a.0].load(Ordering::SeqCst), 4);
        let slot = a.0;
        drop(a);
        assert_eq!(LEN[slot].load(Ordering::SeqCst), 0);
        let f = FileClaim::claim("/nonexistent/x").unwrap();
        assert!(!FILES[f.0].load(Ordering::SeqCst).is_null());
        let slot = f.0;
        drop(f);
        assert!(FILES[slot].load(Ordering::SeqCst).is_null());
        let c = IdClaim::claim(41).unwrap();
        assert_eq!(IDS[c.0].load(Ordering::SeqCst), 42);
        let slot = c.0;
        drop(c);
        assert_eq!(IDS[slot].load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_private_set_of_two_counts_across_semop_and_times_out() {
        let Ok(id) = semget(libc::IPC_PRIVATE, 2, 0o600) else { return };
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        let seen = [semop(id, 1, 1), semtimedop(id, 1, -1, &zero), semtimedop(id, 0, -1, &zero)];
        let removed = remove(id);
        assert_eq!(seen, [Ok(()), Ok(()), Err(libc::EAGAIN)]);
        assert_eq!(removed, Ok(()));
    }
}
