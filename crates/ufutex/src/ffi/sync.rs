//! The C ABI of `ufutex::sync`: `ufutex_mutex_*` and `ufutex_cond_*` (declared in
//! `include/ufutex.h`).
//!
//! pthread conventions: every function returns 0 or an errno value (never -1 with `errno`).
//! Checks, in order: NULL pointers (`EINVAL`), the timespec (`EINVAL`: `tv_nsec` outside
//! `[0, 1e9)` or `tv_sec < 0`), then the operation. A timespec is checked even when the lock
//! is free (POSIX allows either; checking always makes a bad argument fail deterministically).
//! `ufutex_mutex_unlock` and `ufutex_cond_*wait` on an unlocked mutex return `EPERM`, and so
//! does an unlock while the lock is being handed to a waiter; otherwise the mutex cannot tell
//! which thread owns it, so unlocking one held by another thread is not detected. Every entry catches panics and returns `EINVAL` instead of unwinding into C.
//!
//! `ufutex_mutex_t` is the two-byte [`RawMutex`] and `ufutex_cond_t` the [`Condvar`]; the
//! static initializers are all-zero, which is what `RawMutex::new` and `Condvar::new` hold.

use crate::deadline::{Clock, Timeout, Timespec};
use crate::domain::default_domain;
use crate::sync::raw_mutex::{Acquired, Quiet, GRANTED, LOCKED};
use crate::sync::{Condvar, RawMutex};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

// The C typedefs in include/ufutex.h must match these layouts.
const _: () = assert!(std::mem::size_of::<RawMutex>() == 2 && std::mem::align_of::<RawMutex>() == 2);
const _: () = assert!(std::mem::size_of::<Condvar>() == 2 * std::mem::size_of::<usize>());
const _: () = assert!(std::mem::align_of::<Condvar>() == std::mem::align_of::<usize>());

/// Run `f`, turning a panic into `EINVAL`.
fn guarded(f: impl FnOnce() -> i32) -> i32 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(libc::EINVAL)
}

/// glibc's `__libc_single_threaded` (2.32 and later): nonzero while the process has one thread;
/// set to 0 by the thread that creates a second one, before that thread runs. Looked up once
/// (`dlsym`: absent from other C libraries and from static programs, where the answer is always
/// "not alone"); `dangling` until then.
static SINGLE_THREADED: AtomicPtr<AtomicU8> = AtomicPtr::new(std::ptr::dangling_mut());

/// Whether this process has only the calling thread, so that a mutex needs no atomic
/// read-modify-write (glibc's own mutexes take the same shortcut: 3 instead of 15 ns for a
/// lock and unlock on these machines). `None` before glibc's flag was looked up: the caller
/// then goes on through [`after_look_up`], a tail call, so that its own frame needs no
/// register saved for the lookup.
#[inline(always)]
fn alone_if_known() -> Option<bool> {
    let p = SINGLE_THREADED.load(Ordering::Relaxed);
    if p == std::ptr::dangling_mut() {
        return None;
    }
    if p.is_null() {
        return Some(false);
    }
    // SAFETY: the address of glibc's `char __libc_single_threaded`, which lives as long as the
    // process. Read atomically: only the thread that starts a second one writes it.
    if unsafe { (*p).load(Ordering::Relaxed) } != 0 {
        return Some(true);
    }
    // Not alone, for good as far as we care: glibc does not promise to say "alone" again, and
    // forgetting the address leaves one load on the multi-threaded path.
    SINGLE_THREADED.store(std::ptr::null_mut(), Ordering::Relaxed);
    Some(false)
}

/// The first lock, trylock or unlock of the process (`call`, on `m`): glibc's flag looked up,
/// then the call made again, which does not come back here.
///
/// # Safety
/// `call`'s contract, for `m`.
#[cold]
#[inline(never)]
unsafe fn after_look_up(call: unsafe extern "C" fn(*mut RawMutex) -> i32, m: *mut RawMutex) -> i32 {
    look_up_single_threaded();
    // SAFETY: forwarded contract.
    unsafe { call(m) }
}

/// Find glibc's flag (null if there is none) and remember where it is.
#[cold]
fn look_up_single_threaded() {
    // SAFETY: dlsym with a NUL-terminated name; it returns the symbol's address or null.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) }.cast::<AtomicU8>();
    SINGLE_THREADED.store(p, Ordering::Relaxed);
}

/// An absolute `CLOCK_MONOTONIC` deadline, validated.
///
/// # Safety
/// `ts` is NULL or points to a readable `struct timespec`.
unsafe fn monotonic_deadline(ts: *const libc::timespec) -> Result<Timeout, i32> {
    // SAFETY: NULL or readable, per the contract.
    let ts = unsafe { ts.as_ref() }.ok_or(libc::EINVAL)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(libc::EINVAL);
    }
    Ok(Timeout::new(Clock::Monotonic, Timespec { sec: ts.tv_sec, nsec: ts.tv_nsec as u32 }))
}

/// Lock `m`, waiting as long as it takes.
///
/// # Safety
/// `m` is NULL or points to a `ufutex_mutex_t` (initialised with `UFUTEX_MUTEX_INIT`) that
/// stays valid for the call.
#[no_mangle]
pub unsafe extern "C" fn ufutex_mutex_lock(m: *mut RawMutex) -> i32 {
    // SAFETY: NULL or a live mutex, per the contract; only shared access is taken.
    let Some(r) = (unsafe { m.as_ref() }) else { return libc::EINVAL };
    // The uncontended lock here, with no unwinding guard (it cannot panic); the rest out of line.
    match alone_if_known() {
        // SAFETY: forwarded contract.
        None => return unsafe { after_look_up(ufutex_mutex_lock, m) },
        Some(alone) if (alone && r.swap_alone(0, LOCKED)) || r.fast_lock() => return 0,
        Some(_) => {}
    }
    lock_contended(r)
}

#[inline(never)]
fn lock_contended(m: &RawMutex) -> i32 {
    guarded(|| {
        m.lock_in(default_domain());
        0
    })
}

/// Lock `m` if it is free; `EBUSY` otherwise.
///
/// # Safety
/// As [`ufutex_mutex_lock`].
#[no_mangle]
pub unsafe extern "C" fn ufutex_mutex_trylock(m: *mut RawMutex) -> i32 {
    // SAFETY: as in `ufutex_mutex_lock`.
    let Some(r) = (unsafe { m.as_ref() }) else { return libc::EINVAL };
    // (A CAS loop: it cannot panic.)
    match alone_if_known() {
        // SAFETY: forwarded contract.
        None => unsafe { after_look_up(ufutex_mutex_trylock, m) },
        Some(alone) if (alone && r.swap_alone(0, LOCKED)) || r.try_lock_in() => 0,
        Some(_) => libc::EBUSY,
    }
}

/// Lock `m`, giving up at the absolute `CLOCK_MONOTONIC` time `abs` (`ETIMEDOUT`).
///
/// # Safety
/// As [`ufutex_mutex_lock`]; `abs` is NULL or points to a readable `struct timespec`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_mutex_timedlock(m: *mut RawMutex, abs: *const libc::timespec) -> i32 {
    // SAFETY: as in `ufutex_mutex_lock`.
    let Some(m) = (unsafe { m.as_ref() }) else { return libc::EINVAL };
    // SAFETY: NULL or readable, per the contract.
    let timeout = match unsafe { monotonic_deadline(abs) } {
        Ok(t) => t,
        Err(e) => return e,
    };
    guarded(|| match m.lock_until_in(default_domain(), Some(timeout)) {
        Acquired::Yes => 0,
        Acquired::TimedOut => libc::ETIMEDOUT,
    })
}

/// Unlock `m`; `EPERM` if it is not locked.
///
/// # Safety
/// As [`ufutex_mutex_lock`].
#[no_mangle]
pub unsafe extern "C" fn ufutex_mutex_unlock(m: *mut RawMutex) -> i32 {
    // SAFETY: as in `ufutex_mutex_lock`.
    let Some(r) = (unsafe { m.as_ref() }) else { return libc::EINVAL };
    // The uncontended unlock (from LOCKED alone, so certainly the caller's to unlock) here:
    // a plain store while the process has one thread, or while nobody is registered to park
    // on the mutex (the Rust unlock's (4q)), else a CAS.
    match alone_if_known() {
        // SAFETY: forwarded contract.
        None => return unsafe { after_look_up(ufutex_mutex_unlock, m) },
        Some(true) if r.swap_alone(LOCKED, 0) => return 0,
        Some(_) => {}
    }
    match r.unlock_quiet() {
        Quiet::Done => 0,
        Quiet::Repair => unlock_repair(r),
        Quiet::No if r.fast_unlock() => 0,
        Quiet::No => unlock_contended(r),
    }
}

#[inline(never)]
fn unlock_repair(m: &RawMutex) -> i32 {
    guarded(|| {
        m.unlock_repair(default_domain());
        0
    })
}

#[inline(never)]
fn unlock_contended(m: &RawMutex) -> i32 {
    // Unlocked, or being handed to a waiter (so not the caller's): not ours to unlock.
    if m.state() & (LOCKED | GRANTED) != LOCKED {
        return libc::EPERM;
    }
    guarded(|| {
        m.unlock_in(default_domain());
        0
    })
}

/// The shared part of the two waits.
///
/// # Safety
/// `c` and `m` are NULL or point to live, initialised objects; `abs` as in
/// [`ufutex_mutex_timedlock`] when `timed`.
unsafe fn cond_wait(c: *mut Condvar, m: *mut RawMutex, abs: Option<*const libc::timespec>) -> i32 {
    // SAFETY: NULL or live objects, per the contract; only shared access is taken.
    let (Some(c), Some(m)) = (unsafe { c.as_ref() }, unsafe { m.as_ref() }) else { return libc::EINVAL };
    let timeout = match abs {
        None => None,
        // SAFETY: NULL or readable, per the contract.
        Some(abs) => match unsafe { monotonic_deadline(abs) } {
            Ok(t) => Some(t),
            Err(e) => return e,
        },
    };
    guarded(|| {
        if m.state() & LOCKED == 0 {
            return libc::EPERM;
        }
        if c.wait_timeout_in(default_domain(), m, timeout) {
            libc::ETIMEDOUT
        } else {
            0
        }
    })
}

/// Unlock `m`, wait for a signal or broadcast on `c`, relock `m`. Wakeups may be spurious.
///
/// # Safety
/// `c` and `m` are NULL or point to live objects initialised with their `_INIT` values; the
/// caller holds `m`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_cond_wait(c: *mut Condvar, m: *mut RawMutex) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { cond_wait(c, m, None) }
}

/// [`ufutex_cond_wait`], giving up at the absolute `CLOCK_MONOTONIC` time `abs` (`ETIMEDOUT`,
/// with `m` relocked).
///
/// # Safety
/// As [`ufutex_cond_wait`]; `abs` is NULL or points to a readable `struct timespec`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_cond_timedwait(c: *mut Condvar, m: *mut RawMutex, abs: *const libc::timespec) -> i32 {
    // SAFETY: forwarded contract.
    unsafe { cond_wait(c, m, Some(abs)) }
}

/// Wake one waiter of `c`, if any.
///
/// # Safety
/// `c` is NULL or points to a live `ufutex_cond_t`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_cond_signal(c: *mut Condvar) -> i32 {
    // SAFETY: NULL or live, per the contract.
    let Some(c) = (unsafe { c.as_ref() }) else { return libc::EINVAL };
    guarded(|| {
        c.notify_one_in(default_domain());
        0
    })
}

/// Wake every waiter of `c`: one now, the others requeued onto their mutex.
///
/// # Safety
/// As [`ufutex_cond_signal`].
#[no_mangle]
pub unsafe extern "C" fn ufutex_cond_broadcast(c: *mut Condvar) -> i32 {
    // SAFETY: NULL or live, per the contract.
    let Some(c) = (unsafe { c.as_ref() }) else { return libc::EINVAL };
    guarded(|| {
        c.notify_all_in(default_domain());
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_in_order() {
        let mut m = RawMutex::new();
        let mut c = Condvar::new();
        let bad = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000_000 };
        let past = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: every pointer is NULL or to a live local.
        unsafe {
            assert_eq!(ufutex_mutex_lock(std::ptr::null_mut()), libc::EINVAL);
            assert_eq!(ufutex_mutex_unlock(&mut m), libc::EPERM);
            assert_eq!(ufutex_mutex_timedlock(&mut m, std::ptr::null()), libc::EINVAL);
            assert_eq!(ufutex_mutex_timedlock(&mut m, &bad), libc::EINVAL);
            assert_eq!(ufutex_mutex_timedlock(&mut m, &past), 0, "free: taken even past the deadline");
            assert_eq!(ufutex_mutex_trylock(&mut m), libc::EBUSY);
            assert_eq!(ufutex_mutex_timedlock(&mut m, &past), libc::ETIMEDOUT);
            assert_eq!(ufutex_cond_timedwait(&mut c, &mut m, &bad), libc::EINVAL);
            assert_eq!(ufutex_cond_timedwait(&mut c, &mut m, &past), libc::ETIMEDOUT);
            assert_eq!(ufutex_mutex_unlock(&mut m), 0);
            assert_eq!(ufutex_cond_wait(&mut c, &mut m), libc::EPERM);
            assert_eq!(ufutex_cond_signal(&mut c), 0);
            assert_eq!(ufutex_cond_broadcast(std::ptr::null_mut()), libc::EINVAL);
        }
    }
}
