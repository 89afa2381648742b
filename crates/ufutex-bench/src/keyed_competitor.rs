//! The competitors of the `keyed` workload: namespaces of named cross-process objects, created,
//! looked up and removed by key. One [`Keyed`] impl per namespace; the workload is generic over
//! it (each competitor's loops are compiled on their own). Adding one (ufutex's keyed objects,
//! issue 15) is an impl here, an [`AnyKeyed`] variant and its arm in [`dispatch_keyed!`].
//! (The futex competitors are in `competitor.rs`, the locks in `lock_competitor.rs`.)

use crate::sysv::{self, Cleanup, FileClaim, Limits};
use std::io;
use ufutex::named::Namespace;

/// How a `get` treats the key, in SysV terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Get {
    /// Create if absent, else open (`IPC_CREAT`): the seed's loop.
    Create,
    /// Create, failing with EEXIST if present (`IPC_CREAT | IPC_EXCL`).
    Exclusive,
    /// Open, failing with ENOENT if absent (no `IPC_CREAT`).
    Open,
}

/// One namespace of keyed objects. Errors are errnos, with SysV's meanings.
pub trait Keyed: Sync {
    /// What `get` returns and `remove` takes.
    type Handle: Copy + Eq + Send + Sync + std::fmt::Debug;
    /// Keeps a key range registered for cleanup on a fatal signal while it lives.
    type Claim;

    fn name(&self) -> &'static str;
    /// `Some(reason)` when this competitor cannot run here.
    fn unsupported(&self) -> Option<String>;
    /// `Some(reason)` when `objects` more objects cannot be created now.
    fn short_of(&self, objects: usize) -> Option<String>;
    fn get(&self, key: u64, how: Get) -> Result<Self::Handle, i32>;
    fn remove(&self, h: Self::Handle) -> Result<(), i32>;
    /// Register `[first, first + len)`, checked empty, as holding this run's objects.
    fn claim(&self, first: u64, len: usize) -> io::Result<Self::Claim>;
    /// How a new process finds this namespace (`keyed-child --namespace`): `None` where keys
    /// are system-wide (SysV).
    fn reach(&self) -> Option<&str>;
    /// In a new process: what a new program does before its first lookup, given what
    /// [`Keyed::reach`] said (ufutex: open the namespace by name, mapping it; SysV: nothing).
    /// Meant to create nothing.
    fn attach(reach: Option<&str>) -> Result<Self, String>
    where
        Self: Sized;
    /// In a new process, after a lookup failed: undo what [`Keyed::attach`] may have created.
    fn detach_failed(&self) {}
}

/// SysV semaphore sets of one semaphore each, mode 0600: `semget(key, 1, flags | 0600)` and
/// `semctl(id, 0, IPC_RMID)`. Keys must fit `key_t` (checked by the options).
pub struct KernelSemget {
    limits: Result<Limits, String>,
}

impl KernelSemget {
    pub const NAME: &'static str = "kernel-semget";

    /// Reads the limits and the sets in use once, now.
    pub fn new() -> Self {
        KernelSemget { limits: Limits::read() }
    }

    pub fn limits(&self) -> Option<&Limits> {
        self.limits.as_ref().ok()
    }
}

impl Keyed for KernelSemget {
    type Handle = i32;
    type Claim = Cleanup;

    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn unsupported(&self) -> Option<String> {
        self.limits.as_ref().err().map(|e| format!("SysV semaphores unavailable: {e}"))
    }
    fn short_of(&self, objects: usize) -> Option<String> {
        match &self.limits {
            Ok(l) => l.short_of(objects),
            Err(e) => Some(e.clone()),
        }
    }
    #[inline]
    fn get(&self, key: u64, how: Get) -> Result<i32, i32> {
        let flags = match how {
            Get::Create => libc::IPC_CREAT,
            Get::Exclusive => libc::IPC_CREAT | libc::IPC_EXCL,
            Get::Open => 0,
        };
        sysv::semget(key as libc::key_t, 1, flags | 0o600)
    }
    #[inline]
    fn remove(&self, id: i32) -> Result<(), i32> {
        sysv::remove(id)
    }
    fn claim(&self, first: u64, len: usize) -> io::Result<Cleanup> {
        Cleanup::claim(first as libc::key_t, len)
    }
    fn reach(&self) -> Option<&str> {
        None
    }
    /// Nothing to open: keys are system-wide. (The limits are not read: a new program does
    /// not, and the child only looks up.)
    fn attach(_: Option<&str>) -> Result<Self, String> {
        Ok(KernelSemget { limits: Err("not read in a new process".into()) })
    }
}

/// The competitor names `--impl` accepts for `keyed`, in their default order.
pub const NAMES: &[&str] = &[KernelSemget::NAME, UfutexKeyed::NAME];

/// ufutex's named objects (`ufutex::named`): counting semaphores in a namespace of this run's
/// own (`bench-keyed-<pid>-<n>`), looked up without a system call. The handle is the key
/// (removal is by key). The name stays linked while the competitor lives, since a new process
/// must find the namespace by name (the per-process phase); it is unlinked when the competitor
/// drops and, on SIGINT, SIGTERM or SIGHUP, by the signal cleanup ([`FileClaim`]). Only SIGKILL
/// leaves it behind.
pub struct UfutexKeyed {
    ns: Result<Namespace, String>,
    name: String,
    /// `Some` when this process made the namespace, and unlinks it.
    claim: Option<FileClaim>,
}

impl UfutexKeyed {
    pub const NAME: &'static str = "ufutex-keyed";

    pub fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("bench-keyed-{}-{n}", std::process::id());
        // A namespace left by a dead process of the same pid (never another's).
        let _ = Namespace::unlink(&name);
        let made = Namespace::open(&name).map_err(|e| e.to_string()).and_then(|ns| {
            let path = mapped_file(&name)?;
            let claim = FileClaim::claim(&path).map_err(|e| format!("{path}: {e}"))?;
            Ok((ns, claim))
        });
        match made {
            Ok((ns, claim)) => UfutexKeyed { ns: Ok(ns), name, claim: Some(claim) },
            Err(e) => {
                let _ = Namespace::unlink(&name);
                UfutexKeyed { ns: Err(format!("ufutex namespace {name}: {e}")), name, claim: None }
            }
        }
    }

    fn ns(&self) -> &Namespace {
        self.ns.as_ref().expect("checked by unsupported()")
    }
}

impl Drop for UfutexKeyed {
    fn drop(&mut self) {
        if self.claim.is_some() {
            let _ = Namespace::unlink(&self.name);
        }
    }
}

/// The path of the namespace file `name` that this process has mapped, linked (the library
/// keeps its directory to itself; /proc/self/maps shows it).
fn mapped_file(name: &str) -> Result<String, String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
    path_in_maps(&maps, name).ok_or_else(|| "its file is not in /proc/self/maps".into())
}

/// In the text of a maps file, the first path whose file is namespace `name`'s: `ns-<name>`,
/// alone or after a `-` (`ufutex-ns-<name>` under $XDG_RUNTIME_DIR). A deleted file (a
/// " (deleted)" suffix) is not found.
fn path_in_maps(maps: &str, name: &str) -> Option<String> {
    let stem = format!("ns-{name}");
    let ours = |file: &str| file.strip_suffix(stem.as_str()).is_some_and(|pre| pre.is_empty() || pre.ends_with('-'));
    maps.lines()
        .filter_map(|l| l.find('/').map(|i| &l[i..]))
        .find(|path| path.rsplit('/').next().is_some_and(ours))
        .map(String::from)
}

impl Keyed for UfutexKeyed {
    type Handle = u64;
    type Claim = ();

    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn unsupported(&self) -> Option<String> {
        self.ns.as_ref().err().cloned()
    }
    fn short_of(&self, _objects: usize) -> Option<String> {
        None // (a namespace grows: past half load it adds a level)
    }
    #[inline]
    fn get(&self, key: u64, how: Get) -> Result<u64, i32> {
        let how = match how {
            Get::Create => ufutex::named::Open::Create,
            Get::Exclusive => ufutex::named::Open::CreateNew,
            Get::Open => ufutex::named::Open::Existing,
        };
        self.ns().semaphore(key, how, 0).map(|_| key).map_err(|e| e.errno())
    }
    #[inline]
    fn remove(&self, key: u64) -> Result<(), i32> {
        self.ns().remove(key).map_err(|e| e.errno())
    }
    fn claim(&self, first: u64, len: usize) -> io::Result<()> {
        // The namespace is this run's own: a key in the range exists only if this run made it.
        match (first..first + len as u64).find(|&k| self.get(k, Get::Open).is_ok()) {
            Some(k) => Err(io::Error::other(format!("key {k:#x} exists in this run's namespace"))),
            None => Ok(()),
        }
    }
    fn reach(&self) -> Option<&str> {
        Some(&self.name)
    }
    /// `Namespace::open` by name: the file's open, lock and checks, and its mapping.
    fn attach(reach: Option<&str>) -> Result<Self, String> {
        let name = reach.ok_or("the namespace's name is missing (--namespace)")?;
        let ns = Namespace::open(name).map_err(|e| format!("ufutex namespace {name}: {e}"))?;
        Ok(UfutexKeyed { ns: Ok(ns), name: name.into(), claim: None })
    }
    /// `Namespace::open` creates a namespace that is not there: an empty one is ours (the
    /// run's holds the keys looked up, or its parent is gone), and is unlinked.
    fn detach_failed(&self) {
        if self.ns.as_ref().is_ok_and(Namespace::is_empty) {
            let _ = Namespace::unlink(&self.name);
        }
    }
}

/// A keyed competitor picked on the command line (static dispatch through
/// [`dispatch_keyed!`]).
pub enum AnyKeyed {
    KernelSemget(KernelSemget),
    Ufutex(UfutexKeyed),
}

impl AnyKeyed {
    pub fn by_name(name: &str) -> Result<AnyKeyed, String> {
        match name {
            KernelSemget::NAME => Ok(AnyKeyed::KernelSemget(KernelSemget::new())),
            UfutexKeyed::NAME => Ok(AnyKeyed::Ufutex(UfutexKeyed::new())),
            other => Err(format!("unknown competitor {other:?}; expected one of: {}", NAMES.join(", "))),
        }
    }

    pub fn name(&self) -> &'static str {
        dispatch_keyed!(self, k => k.name())
    }

    /// Why it cannot run at all, if it cannot.
    pub fn unsupported(&self) -> Option<String> {
        dispatch_keyed!(self, k => k.unsupported())
    }

    /// Why it cannot run with `objects` objects, if it cannot.
    pub fn skip_reason(&self, objects: usize) -> Option<String> {
        self.unsupported().or_else(|| dispatch_keyed!(self, k => k.short_of(objects)))
    }
}

/// Run `$body` with `$k` bound to the concrete [`Keyed`] inside an [`AnyKeyed`].
#[macro_export]
macro_rules! dispatch_keyed {
    ($any:expr, $k:ident => $body:expr) => {
        match $any {
            $crate::keyed_competitor::AnyKeyed::KernelSemget($k) => $body,
            $crate::keyed_competitor::AnyKeyed::Ufutex($k) => $body,
        }
    };
}
pub use dispatch_keyed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve() {
        for n in NAMES {
            assert_eq!(AnyKeyed::by_name(n).unwrap().name(), *n);
        }
        assert!(AnyKeyed::by_name("kernel").err().unwrap().contains("kernel-semget"));
    }

    #[test]
    fn ufutex_keyed_gives_sysv_errnos() {
        let k = UfutexKeyed::new();
        assert_eq!(k.unsupported(), None);
        assert_eq!(k.get(7, Get::Open), Err(libc::ENOENT));
        k.claim(7, 1).unwrap();
        assert_eq!(k.get(7, Get::Create), Ok(7));
        assert_eq!(
            [k.get(7, Get::Create), k.get(7, Get::Open), k.get(7, Get::Exclusive)],
            [Ok(7), Ok(7), Err(libc::EEXIST)]
        );
        assert!(k.claim(7, 1).is_err());
        assert_eq!(k.remove(7), Ok(()));
        assert_eq!(k.get(7, Get::Open), Err(libc::ENOENT));
        assert_eq!(k.remove(7), Err(libc::ENOENT));
        assert!(k.short_of(10).is_none());
        let name = k.reach().unwrap().to_string();
        assert!(Namespace::list().unwrap().contains(&name), "{name} linked while the competitor lives");
        drop(k);
        assert!(!Namespace::list().unwrap().contains(&name), "{name} unlinked when it drops");
    }

    /// A new process's side: the run's namespace found by name, nothing unlinked but an empty
    /// namespace the attach made itself.
    #[test]
    fn ufutex_keyed_attaches_by_name() {
        let k = UfutexKeyed::new();
        assert_eq!(k.get(9, Get::Create), Ok(9));
        let a = UfutexKeyed::attach(k.reach()).unwrap();
        assert_eq!(a.get(9, Get::Open), Ok(9));
        a.detach_failed();
        drop(a);
        let name = k.reach().unwrap().to_string();
        assert!(Namespace::list().unwrap().contains(&name), "an attach never unlinks the run's namespace");
        assert_eq!(k.remove(9), Ok(()));
        let stray = format!("{name}-stray");
        let s = UfutexKeyed::attach(Some(&stray)).unwrap();
        assert_eq!(s.get(9, Get::Open), Err(libc::ENOENT));
        s.detach_failed();
        assert!(!Namespace::list().unwrap().contains(&stray), "the empty namespace an attach made is unlinked");
        assert!(UfutexKeyed::attach(None).is_err());
    }

    #[test]
    fn namespace_files_are_found_in_maps() {
        let maps = "7f00-7f01 rw-s 00000000 00:1a 42    /dev/shm/ufutex-1000/ns-bench-keyed-7-10\n\
                    7f02-7f03 rw-s 00000000 00:1a 43    /run/user/1000/ufutex-ns-bench-keyed-7-1\n\
                    7f04-7f05 rw-s 00000000 00:1a 44    /dev/shm/ufutex-1000/ns-bench-keyed-7-2 (deleted)\n\
                    7f06-7f07 r-xp 00000000 08:01 45    /usr/lib/libc.so.6\n";
        assert_eq!(path_in_maps(maps, "bench-keyed-7-10").as_deref(), Some("/dev/shm/ufutex-1000/ns-bench-keyed-7-10"));
        assert_eq!(path_in_maps(maps, "bench-keyed-7-1").as_deref(), Some("/run/user/1000/ufutex-ns-bench-keyed-7-1"));
        assert_eq!(path_in_maps(maps, "bench-keyed-7-0"), None);
        assert_eq!(path_in_maps(maps, "bench-keyed-7-2"), None);
        assert_eq!(path_in_maps(maps, "keyed-7-10"), None);
    }

    #[test]
    fn semget_flags_give_sysv_errnos() {
        let k = KernelSemget::new();
        if k.unsupported().is_some() {
            return;
        }
        // A key this test owns alone (refused if taken), removed before the test ends.
        let key = 0x5e00_0000 + u64::from(std::process::id() & 0xffff) * 4;
        assert_eq!(k.get(key, Get::Open), Err(libc::ENOENT), "key {key:#x} in use");
        let _claim = k.claim(key, 1).unwrap();
        let id = k.get(key, Get::Create).unwrap();
        // Every call before the first assertion, so that a failure cannot leak the set.
        let seen = [k.get(key, Get::Create), k.get(key, Get::Open), k.get(key, Get::Exclusive)];
        let removed = k.remove(id);
        assert_eq!(seen, [Ok(id), Ok(id), Err(libc::EEXIST)]);
        assert_eq!(removed, Ok(()));
        assert_eq!(k.get(key, Get::Open), Err(libc::ENOENT));
        assert!(k.remove(id).is_err());
    }
}
