//! The competitors of the `keyed` workload: namespaces of named cross-process objects, created,
//! looked up and removed by key. One [`Keyed`] impl per namespace; the workload is generic over
//! it (each competitor's loops are compiled on their own). Adding one (ufutex's keyed objects,
//! issue 15) is an impl here, an [`AnyKeyed`] variant and its arm in [`dispatch_keyed!`].
//! (The futex competitors are in `competitor.rs`, the locks in `lock_competitor.rs`.)

use crate::sysv::{self, Cleanup, Limits};
use std::io;

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
}

/// The competitor names `--impl` accepts for `keyed`, in their default order.
pub const NAMES: &[&str] = &[KernelSemget::NAME, UFUTEX_KEYED];

/// ufutex's keyed objects (issue 15): listed, skipped until they exist.
pub const UFUTEX_KEYED: &str = "ufutex-keyed";
const UFUTEX_KEYED_MISSING: &str = "ufutex keyed objects: not built yet (issue 15)";

/// A keyed competitor picked on the command line (static dispatch through
/// [`dispatch_keyed!`]), or one that does not exist yet.
pub enum AnyKeyed {
    KernelSemget(KernelSemget),
    NotBuilt { name: &'static str, reason: &'static str },
}

impl AnyKeyed {
    pub fn by_name(name: &str) -> Result<AnyKeyed, String> {
        match name {
            KernelSemget::NAME => Ok(AnyKeyed::KernelSemget(KernelSemget::new())),
            UFUTEX_KEYED => Ok(AnyKeyed::NotBuilt { name: UFUTEX_KEYED, reason: UFUTEX_KEYED_MISSING }),
            other => Err(format!("unknown competitor {other:?}; expected one of: {}", NAMES.join(", "))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            AnyKeyed::KernelSemget(k) => k.name(),
            AnyKeyed::NotBuilt { name, .. } => name,
        }
    }

    /// Why it cannot run at all, if it cannot.
    pub fn unsupported(&self) -> Option<String> {
        match self {
            AnyKeyed::KernelSemget(k) => k.unsupported(),
            AnyKeyed::NotBuilt { reason, .. } => Some(reason.to_string()),
        }
    }

    /// Why it cannot run with `objects` objects, if it cannot.
    pub fn skip_reason(&self, objects: usize) -> Option<String> {
        self.unsupported().or_else(|| dispatch_keyed!(self, k => k.short_of(objects), |_| None))
    }
}

/// Run `$body` with `$k` bound to the concrete [`Keyed`] inside an [`AnyKeyed`]; `$missing`
/// (a closure taking the reason) for a competitor not built yet.
#[macro_export]
macro_rules! dispatch_keyed {
    ($any:expr, $k:ident => $body:expr, $missing:expr) => {
        match $any {
            $crate::keyed_competitor::AnyKeyed::KernelSemget($k) => $body,
            $crate::keyed_competitor::AnyKeyed::NotBuilt { reason, .. } => ($missing)(*reason),
        }
    };
}
pub use dispatch_keyed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_ufutex_waits_for_issue_15() {
        for n in NAMES {
            assert_eq!(AnyKeyed::by_name(n).unwrap().name(), *n);
        }
        let u = AnyKeyed::by_name(UFUTEX_KEYED).unwrap();
        assert_eq!(u.skip_reason(1).unwrap(), "ufutex keyed objects: not built yet (issue 15)");
        assert!(AnyKeyed::by_name("kernel").err().unwrap().contains("kernel-semget"));
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
