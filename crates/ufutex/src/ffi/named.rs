//! The C ABI of `ufutex::named` (declared in `include/ufutex.h`): namespaces, semaphores,
//! events, mutexes and raw words found by 64-bit key.
//!
//! Conventions: like the futex calls, `-1` and `errno` on failure. An `open` returns 0 when it
//! created the object and 1 when the object existed (Windows' `ERROR_ALREADY_EXISTS`). A named
//! mutex's lock returns `EOWNERDEAD` (positive) when it took the mutex from a process that died
//! holding it: the caller owns it then. Deadlines are absolute, on `CLOCK_MONOTONIC` or
//! `CLOCK_REALTIME`, NULL for none. A `ufutex_ns_t *` is one this library returned (anything
//! else is `EINVAL`); an object handle names its object for as long as it lives (`EIDRM` after).
//! Every entry catches panics (`EINVAL`).

use super::abi::{UFUTEX_SIZE_U16, UFUTEX_SIZE_U32, UFUTEX_SIZE_U64, UFUTEX_SIZE_U8};
use super::validate;
use super::{entry, Errno};
use crate::deadline::{Clock, Deadline, Timeout};
use crate::named::{Acquired, Event, Mutex, NamedError, Namespace, Open, Semaphore};
use crate::word::Futex;
use libc::{c_char, c_int, c_long, c_uint, c_void, clockid_t, timespec};
use std::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, UNIX_EPOCH};

/// `flags` of the `open` calls.
pub const UFUTEX_CREAT: c_uint = 0x1;
pub const UFUTEX_EXCL: c_uint = 0x2;

/// An object handle (`struct ufutex_obj`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UfutexObj {
    pub ns: *const Namespace,
    pub slot: u32,
    pub gen: u32,
}

/// The namespaces this process opened (by name), never unmapped: a `ufutex_ns_t *` is one of
/// these. At most this many distinct names per process.
const MAX_NAMESPACES: usize = 64;
static OPEN: [AtomicPtr<(String, Namespace)>; MAX_NAMESPACES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_NAMESPACES];
static OPENING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn errno(e: NamedError) -> Errno {
    Errno(e.errno())
}

/// The namespace a pointer names, if this library returned it.
fn namespace(p: *const Namespace) -> Result<&'static Namespace, Errno> {
    OPEN.iter()
        .map(|slot| slot.load(Ordering::Acquire))
        .filter(|e| !e.is_null())
        // SAFETY: a published entry is leaked and never freed.
        .map(|e| unsafe { &(*e).1 })
        .find(|ns| std::ptr::eq(*ns, p))
        .ok_or(Errno::EINVAL)
}

/// A NUL-terminated name, read without trusting it.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string readable for the call.
unsafe fn name_of(name: *const c_char) -> Result<String, Errno> {
    if name.is_null() {
        return Err(Errno::EFAULT);
    }
    // SAFETY: NUL-terminated and readable, per the contract.
    let s = unsafe { std::ffi::CStr::from_ptr(name) };
    s.to_str().map(str::to_string).map_err(|_| Errno::EINVAL)
}

fn how(flags: c_uint) -> Result<Open, Errno> {
    match flags {
        0 => Ok(Open::Existing),
        UFUTEX_CREAT => Ok(Open::Create),
        f if f == UFUTEX_CREAT | UFUTEX_EXCL => Ok(Open::CreateNew),
        _ => Err(Errno::EINVAL),
    }
}

/// An absolute deadline from the caller's timespec (NULL: none).
fn deadline(ts: *const timespec, clockid: clockid_t) -> Result<Option<Deadline>, Errno> {
    Ok(validate::timeout(ts as usize, clockid)?.map(|t: Timeout| match t.clock {
        Clock::Monotonic => Deadline::from(t.remaining()),
        Clock::Realtime => Deadline::Realtime(UNIX_EPOCH + Duration::new(t.at.sec as u64, t.at.nsec)),
    }))
}

/// # Safety
/// `o` is NULL or points to a readable `struct ufutex_obj`.
unsafe fn obj(o: *const UfutexObj) -> Result<(&'static Namespace, u32, u32), Errno> {
    // SAFETY: NULL or readable, per the contract.
    let o = unsafe { o.as_ref() }.ok_or(Errno::EFAULT)?;
    Ok((namespace(o.ns)?, o.slot, o.gen))
}

/// A timed operation on an object: the handle and the deadline checked (in that order), then `f`.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`; `timeout` NULL or a readable timespec.
unsafe fn timed(
    o: *const UfutexObj,
    timeout: *const timespec,
    clockid: clockid_t,
    f: impl FnOnce(&'static Namespace, u32, u32, Option<Deadline>) -> Result<c_long, NamedError>,
) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let (ns, slot, gen) = unsafe { obj(o) }?;
        let d = deadline(timeout, clockid)?;
        f(ns, slot, gen, d).map_err(errno)
    })
}

/// # Safety
/// `out` is NULL or points to a writable `struct ufutex_obj`.
unsafe fn give(out: *mut UfutexObj, ns: &Namespace, slot: u32, gen: u32, existed: bool) -> Result<c_long, Errno> {
    // SAFETY: NULL or writable, per the contract.
    let out = unsafe { out.as_mut() }.ok_or(Errno::EFAULT)?;
    *out = UfutexObj { ns, slot, gen };
    Ok(c_long::from(existed))
}

/// Open (or create) the namespace `name`; the same pointer for the same name in one process.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ufutex_ns_open(name: *const c_char) -> *mut Namespace {
    let r = entry(|| {
        // SAFETY: forwarded contract.
        let name = unsafe { name_of(name) }?;
        let _g = OPENING.lock().unwrap_or_else(|e| e.into_inner());
        for slot in &OPEN {
            let e = slot.load(Ordering::Acquire);
            // SAFETY: a published entry is leaked and never freed.
            if !e.is_null() && unsafe { &(*e).0 } == &name {
                // SAFETY: as above.
                return Ok(unsafe { &(*e).1 } as *const Namespace as c_long);
            }
        }
        let free = OPEN.iter().find(|s| s.load(Ordering::Relaxed).is_null()).ok_or(Errno(libc::EMFILE))?;
        let ns = Namespace::open(&name).map_err(errno)?;
        let e = Box::leak(Box::new((name, ns)));
        free.store(e, Ordering::Release);
        Ok(&e.1 as *const Namespace as c_long)
    });
    if r == -1 {
        std::ptr::null_mut()
    } else {
        r as *mut Namespace
    }
}

/// Remove the namespace `name`'s file (processes keep their mapping).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ufutex_ns_unlink(name: *const c_char) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let name = unsafe { name_of(name) }?;
        Namespace::unlink(&name).map(|()| 0).map_err(errno)
    })
}

/// Remove the object `key` now: its handles fail with `EIDRM`, its waiters wake to it.
///
/// # Safety
/// `ns` is any pointer (checked).
#[no_mangle]
pub unsafe extern "C" fn ufutex_obj_remove(ns: *const Namespace, key: u64) -> c_long {
    entry(|| namespace(ns)?.remove(key).map(|()| 0).map_err(errno))
}

/// Open or create the counting semaphore `key` (`initial`: a new one's count).
///
/// # Safety
/// `ns` is any pointer (checked); `out` is NULL or a writable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_open(
    ns: *const Namespace,
    key: u64,
    flags: c_uint,
    initial: c_uint,
    out: *mut UfutexObj,
) -> c_long {
    entry(|| {
        let ns = namespace(ns)?;
        let (s, existed) = ns.semaphore(key, how(flags)?, initial).map_err(errno)?;
        // SAFETY: forwarded contract.
        unsafe { give(out, ns, s.slot, s.gen, existed) }
    })
}

/// Add `n` to the count, waking up to `n` waiters.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_post(o: *const UfutexObj, n: c_uint) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let (ns, slot, gen) = unsafe { obj(o) }?;
        Semaphore { ns, slot, gen }.post(n).map(|()| 0).map_err(errno)
    })
}

/// Take one from the count, sleeping while it is 0, until the absolute `timeout` on `clockid`.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`; `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_wait(o: *const UfutexObj, timeout: *const timespec, clockid: clockid_t) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { timed(o, timeout, clockid, |ns, slot, gen, d| Semaphore { ns, slot, gen }.wait(d).map(|()| 0)) }
}

/// Take one from the count if it is above 0, else `EAGAIN`.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_trywait(o: *const UfutexObj) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let (ns, slot, gen) = unsafe { obj(o) }?;
        match (Semaphore { ns, slot, gen }).try_wait().map_err(errno)? {
            true => Ok(0),
            false => Err(Errno::EAGAIN),
        }
    })
}

/// Open or create the event `key` (`manual`: manual reset; `signaled`: a new one's state).
///
/// # Safety
/// `ns` is any pointer (checked); `out` is NULL or a writable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_open(
    ns: *const Namespace,
    key: u64,
    flags: c_uint,
    manual: c_int,
    signaled: c_int,
    out: *mut UfutexObj,
) -> c_long {
    entry(|| {
        let ns = namespace(ns)?;
        let (e, existed) = ns.event(key, how(flags)?, manual != 0, signaled != 0).map_err(errno)?;
        // SAFETY: forwarded contract.
        unsafe { give(out, ns, e.slot, e.gen, existed) }
    })
}

/// Event operations: 0 set, 1 reset, 2 pulse.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
unsafe fn event_op(o: *const UfutexObj, op: u8) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let (ns, slot, gen) = unsafe { obj(o) }?;
        let e = Event { ns, slot, gen };
        match op {
            0 => e.set(),
            1 => e.reset(),
            _ => e.pulse(),
        }
        .map(|()| 0)
        .map_err(errno)
    })
}

/// Signal the event.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_set(o: *const UfutexObj) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { event_op(o, 0) }
}

/// Make the event unsignaled.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_reset(o: *const UfutexObj) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { event_op(o, 1) }
}

/// Release the event's current waiters, leaving it unsignaled.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_pulse(o: *const UfutexObj) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { event_op(o, 2) }
}

/// Wait until the event is signaled (auto: taking it) or pulsed, until `timeout`.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`; `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_wait(
    o: *const UfutexObj,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { timed(o, timeout, clockid, |ns, slot, gen, d| Event { ns, slot, gen }.wait(d).map(|()| 0)) }
}

/// Open or create the mutex `key`.
///
/// # Safety
/// `ns` is any pointer (checked); `out` is NULL or a writable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_open(
    ns: *const Namespace,
    key: u64,
    flags: c_uint,
    out: *mut UfutexObj,
) -> c_long {
    entry(|| {
        let ns = namespace(ns)?;
        let (m, existed) = ns.mutex(key, how(flags)?).map_err(errno)?;
        // SAFETY: forwarded contract.
        unsafe { give(out, ns, m.slot, m.gen, existed) }
    })
}

fn acquired(a: Acquired) -> c_long {
    match a {
        Acquired::Acquired => 0,
        Acquired::Abandoned => c_long::from(libc::EOWNERDEAD),
    }
}

/// Lock the mutex (recursively for its owner thread), until `timeout`: 0, or `EOWNERDEAD`
/// (positive) when taken from a dead owner.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`; `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_lock(
    o: *const UfutexObj,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    // SAFETY: forwarded contract.
    unsafe { timed(o, timeout, clockid, |ns, slot, gen, d| Mutex { ns, slot, gen }.lock(d).map(acquired)) }
}

/// Lock the mutex if it can be had at once: 0 or `EOWNERDEAD` as for lock; `EBUSY` if held.
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_trylock(o: *const UfutexObj) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let (ns, slot, gen) = unsafe { obj(o) }?;
        Mutex { ns, slot, gen }.try_lock().map_err(errno)?.map(acquired).ok_or(Errno(libc::EBUSY))
    })
}

/// Release the mutex once (its owner thread only: else `EPERM`).
///
/// # Safety
/// `o` is NULL or a readable `struct ufutex_obj`.
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_unlock(o: *const UfutexObj) -> c_long {
    entry(|| {
        // SAFETY: forwarded contract.
        let (ns, slot, gen) = unsafe { obj(o) }?;
        Mutex { ns, slot, gen }.unlock().map(|()| 0).map_err(errno)
    })
}

/// Open or create the raw 32-bit word `key` (a new one holds 0); `*word` gets its address, a
/// process-shared futex word for `ufutex_wait`/`ufutex_wake` (without `UFUTEX_PRIVATE`).
///
/// # Safety
/// `ns` is any pointer (checked); `out` NULL or a writable `struct ufutex_obj`; `word` NULL or
/// a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn ufutex_word_open(
    ns: *const Namespace,
    key: u64,
    flags: c_uint,
    out: *mut UfutexObj,
    word: *mut *mut u32,
) -> c_long {
    // SAFETY: forwarded contract (a `*mut u32` out-pointer is a `*mut c_void` one).
    unsafe { ufutex_word_open_sized(ns, key, flags, UFUTEX_SIZE_U32, out, word.cast()) }
}

/// [`ufutex_word_open`] at any size: `size` is one of `UFUTEX_SIZE_U8/U16/U32/U64` (else
/// `EINVAL`); a word made at one size is `EINVAL` at another.
///
/// # Safety
/// As [`ufutex_word_open`].
#[no_mangle]
pub unsafe extern "C" fn ufutex_word_open_sized(
    ns: *const Namespace,
    key: u64,
    flags: c_uint,
    size: c_uint,
    out: *mut UfutexObj,
    word: *mut *mut c_void,
) -> c_long {
    fn open<F: Futex>(ns: &Namespace, key: u64, how: Open) -> Result<(*mut c_void, u32, u32, bool), Errno> {
        let (w, existed) = ns.word_of::<F>(key, how).map_err(errno)?;
        let at = std::ptr::from_ref(w.get().map_err(errno)?).cast_mut().cast();
        Ok((at, w.slot, w.gen, existed))
    }
    entry(|| {
        let ns = namespace(ns)?;
        // SAFETY: NULL or writable, per the contract.
        let word = unsafe { word.as_mut() }.ok_or(Errno::EFAULT)?;
        let how = how(flags)?;
        let (at, slot, gen, existed) = match size {
            UFUTEX_SIZE_U8 => open::<AtomicU8>(ns, key, how)?,
            UFUTEX_SIZE_U16 => open::<AtomicU16>(ns, key, how)?,
            UFUTEX_SIZE_U32 => open::<AtomicU32>(ns, key, how)?,
            UFUTEX_SIZE_U64 => open::<AtomicU64>(ns, key, how)?,
            _ => return Err(Errno::EINVAL),
        };
        *word = at;
        // SAFETY: forwarded contract.
        unsafe { give(out, ns, slot, gen, existed) }
    })
}
