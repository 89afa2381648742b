//! The C ABI of `ufutex::named` (declared in `include/ufutex.h`): namespaces, semaphores,
//! events, mutexes and raw words found by 64-bit key or (`UFUTEX_BYNAME`) by name, and
//! `ufutex_wait_any` over any of them.
//!
//! Conventions: like the futex calls, `-1` and `errno` on failure. An `open` returns 0 when it
//! created the object and 1 when the object existed (Windows' `ERROR_ALREADY_EXISTS`); with
//! `UFUTEX_COUNTED` the object is a counted one and the open a handle to close
//! (`ufutex_obj_close`). A named mutex's lock returns `EOWNERDEAD` (positive) when it took the
//! mutex from a process that died holding it, or a thread that ended holding it: the caller owns
//! it then. Deadlines are absolute, on `CLOCK_MONOTONIC` or
//! `CLOCK_REALTIME`, NULL for none. A `ufutex_ns_t *` is one this library returned (anything
//! else is `EINVAL`); an object handle names its object for as long as it lives (`EIDRM` after).
//! Every entry catches panics (`EINVAL`).
//!
//! A C handle does not carry its object's kind, so every call on a handle asks the object
//! ([`Namespace::kind`]: a few more loads of the slot line the operation reads next anyway) and
//! checks, in this order (the header states it):
//!
//! 1. a NULL handle → `EFAULT`;
//! 2. a namespace pointer this library did not return → `EINVAL`;
//! 3. a removed object → `EIDRM`;
//! 4. an object of another kind than the call's (`ufutex_sem_post` on a mutex) → `EINVAL`;
//! 5. the deadline, as the futex calls check it (clock, then the timespec: `EINVAL`, `EFAULT`).
//!
//! The kind is checked before the deadline because it is a property of the handle, like 1–3;
//! an object removed after the check fails the operation itself with `EIDRM` (its generation
//! is checked again there), never with an operation on a recycled slot.

use super::abi::{UFUTEX_SIZE_U16, UFUTEX_SIZE_U32, UFUTEX_SIZE_U64, UFUTEX_SIZE_U8};
use super::{entry, fault, validate, Errno};
use crate::deadline::{Clock, Deadline, Timeout};
use crate::named::{self, Acquired, Event, Kind, Mutex, NamedError, Namespace, Open, Semaphore, Waitable, Word};
use crate::word::{Futex, Size};
use libc::{c_char, c_int, c_long, c_uint, c_void, clockid_t, timespec};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, UNIX_EPOCH};

/// `flags` of the `open` calls.
pub const UFUTEX_CREAT: c_uint = 0x1;
pub const UFUTEX_EXCL: c_uint = 0x2;
/// Open a counted object: it lives while some process holds a handle from a counted open, and
/// dies with the last `ufutex_obj_close` (or its process's death).
pub const UFUTEX_COUNTED: c_uint = 0x4;
/// The open's `key` is the address of a NUL-terminated name (1 to [`named::NAME_MAX`] bytes),
/// not a number: names and numbers are apart, as in the Rust API's `Key`.
pub const UFUTEX_BYNAME: c_uint = 0x8;

/// An object handle (`struct ufutex_obj`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UfutexObj {
    pub ns: *const Namespace,
    pub slot: u32,
    pub gen: u32,
}

/// One object of `ufutex_wait_any` (`struct ufutex_waitable`): a handle, and for a raw word the
/// value it is ready to differ from (at the word's size); 0 for the other kinds (reserved).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UfutexWaitable {
    pub obj: UfutexObj,
    pub val: u64,
}

/// Or'ed into `ufutex_wait_any`'s index when the object it took is an abandoned mutex
/// (`ufutex_nmutex_lock`'s `EOWNERDEAD`). Above any index (at most 1023).
pub const UFUTEX_WAIT_ABANDONED: c_long = 0x1_0000;

// The header's layout (it asserts the same on its side); `ufutex_wait_any` reads entries by
// these offsets.
const _: () = {
    assert!(size_of::<UfutexObj>() == 16);
    assert!(offset_of!(UfutexObj, slot) == 8 && offset_of!(UfutexObj, gen) == 12);
    assert!(size_of::<UfutexWaitable>() == 24);
    assert!(offset_of!(UfutexWaitable, val) == 16);
    assert!(UFUTEX_WAIT_ABANDONED > crate::WAITV_MAX as c_long);
};

/// The namespaces this process opened (by name), never unmapped: a `ufutex_ns_t *` is one of
/// these. At most this many distinct names per process.
const MAX_NAMESPACES: usize = 64;
static OPEN: [AtomicPtr<(String, Namespace)>; MAX_NAMESPACES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_NAMESPACES];
/// Openers, one at a time: a lock a forked child takes over from a thread of the parent's that
/// held it at the fork (`once.rs`); an opener publishes its entry with one store.
static OPENING: crate::once::SetupLock = crate::once::SetupLock::new();

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

/// The longest namespace name, in bytes (`Namespace::open` says which are valid).
const NAME_LEN_MAX: usize = 64;

/// The NUL-terminated string at `at`, of at most `N` bytes, read byte by byte without trusting
/// the pointer: its bytes and length, or `None` if no NUL ends it within `N` bytes; `EFAULT` if
/// `at` is NULL or does not read before its NUL.
fn c_string<const N: usize>(at: usize) -> Result<Option<([u8; N], usize)>, Errno> {
    if at == 0 {
        return Err(Errno::EFAULT);
    }
    let mut bytes = [0u8; N];
    for i in 0..=N {
        match fault::read_word(at.checked_add(i).ok_or(Errno::EFAULT)?, Size::U8)? as u8 {
            0 => return Ok(Some((bytes, i))),
            _ if i == N => break,
            b => bytes[i] = b,
        }
    }
    Ok(None)
}

/// A NUL-terminated namespace name, read without trusting the pointer: `EFAULT` if NULL or
/// unreadable before its NUL, `EINVAL` if longer than a name can be or not UTF-8.
fn name_of(name: *const c_char) -> Result<String, Errno> {
    let (bytes, len) = c_string::<NAME_LEN_MAX>(name as usize)?.ok_or(Errno::EINVAL)?;
    String::from_utf8(bytes[..len].to_vec()).map_err(|_| Errno::EINVAL)
}

/// An open's flags: how, and whether the object is a counted one.
fn how(flags: c_uint) -> Result<(Open, bool), Errno> {
    let how = match flags & !(UFUTEX_COUNTED | UFUTEX_BYNAME) {
        0 => Open::Existing,
        UFUTEX_CREAT => Open::Create,
        f if f == UFUTEX_CREAT | UFUTEX_EXCL => Open::CreateNew,
        _ => return Err(Errno::EINVAL),
    };
    Ok((how, flags & UFUTEX_COUNTED != 0))
}

/// An open's key as the caller gave it: a number, or (`UFUTEX_BYNAME`) a name read from the
/// caller's memory.
enum KeyArg {
    Id(u64),
    Name { bytes: [u8; named::NAME_MAX], len: usize },
}

impl KeyArg {
    /// `key` under `flags`; a name is read byte by byte without trusting the pointer: `EFAULT`
    /// if NULL or unreadable before its NUL, `EINVAL` if empty, `ENAMETOOLONG` past
    /// [`named::NAME_MAX`] bytes.
    fn read(key: u64, flags: c_uint) -> Result<KeyArg, Errno> {
        if flags & UFUTEX_BYNAME == 0 {
            return Ok(KeyArg::Id(key));
        }
        let at = usize::try_from(key).map_err(|_| Errno::EFAULT)?;
        match c_string::<{ named::NAME_MAX }>(at)? {
            None => Err(errno(NamedError::NameTooLong)),
            Some((_, 0)) => Err(Errno::EINVAL),
            Some((bytes, len)) => Ok(KeyArg::Name { bytes, len }),
        }
    }

    fn key(&self) -> named::Key<'_> {
        match self {
            KeyArg::Id(k) => (*k).into(),
            KeyArg::Name { bytes, len } => bytes[..*len].into(),
        }
    }
}

/// An absolute deadline from the caller's timespec (NULL: none).
fn deadline(ts: *const timespec, clockid: clockid_t) -> Result<Option<Deadline>, Errno> {
    Ok(validate::timeout(ts as usize, clockid)?.map(|t: Timeout| match t.clock {
        Clock::Monotonic => Deadline::from(t.remaining()),
        Clock::Realtime => Deadline::Realtime(UNIX_EPOCH + Duration::new(t.at().sec as u64, t.at().nsec)),
    }))
}

/// The caller's `struct ufutex_obj` at `at`, read without trusting the pointer: `EFAULT` if it
/// is NULL or does not read.
fn read_obj(at: usize) -> Result<UfutexObj, Errno> {
    if at == 0 {
        return Err(Errno::EFAULT);
    }
    let [ns, ids] = fault::read_u64s(at).ok_or(Errno::EFAULT)?;
    let ids = ids.to_ne_bytes();
    Ok(UfutexObj {
        ns: ns as usize as *const Namespace,
        slot: u32::from_ne_bytes([ids[0], ids[1], ids[2], ids[3]]),
        gen: u32::from_ne_bytes([ids[4], ids[5], ids[6], ids[7]]),
    })
}

/// Whether `len` bytes at `at` (8-aligned) can be written: `EFAULT` if `at` is NULL, misaligned
/// or not writable. Checked before an open, so that a bad out-pointer changes nothing.
fn writable(at: usize, len: usize) -> Result<(), Errno> {
    if at == 0 || !at.is_multiple_of(8) {
        return Err(Errno::EFAULT);
    }
    for off in (0..len).step_by(8) {
        fault::check_writable(at.checked_add(off).ok_or(Errno::EFAULT)?, Size::U64)?;
    }
    Ok(())
}

/// The live object a handle names, of kind `want`: checks 1–4 of the module docs, in order.
///
/// `o` is read fault-safely (`EFAULT` if it does not read).
fn handle(o: *const UfutexObj, want: Kind) -> Result<(&'static Namespace, u32, u32), Errno> {
    let o = read_obj(o as usize)?;
    let ns = namespace(o.ns)?;
    if ns.kind(o.slot, o.gen).map_err(errno)? != want {
        return Err(Errno::EINVAL);
    }
    Ok((ns, o.slot, o.gen))
}

/// The semaphore a handle names (see [`handle`]).
fn semaphore(o: *const UfutexObj) -> Result<Semaphore<'static>, Errno> {
    let (ns, slot, gen) = handle(o, Kind::Semaphore)?;
    Ok(Semaphore { ns, slot, gen })
}

/// The event a handle names (see [`handle`]).
fn event(o: *const UfutexObj) -> Result<Event<'static>, Errno> {
    let (ns, slot, gen) = handle(o, Kind::Event)?;
    Ok(Event { ns, slot, gen })
}

/// The mutex a handle names (see [`handle`]).
fn mutex(o: *const UfutexObj) -> Result<Mutex<'static>, Errno> {
    let (ns, slot, gen) = handle(o, Kind::Mutex)?;
    Ok(Mutex { ns, slot, gen })
}

/// Hand a new handle out through `out`, which [`writable`] passed before the open.
///
/// # Safety
/// `out` was found writable for a `struct ufutex_obj` (memory found mapped stays mapped for the
/// call: the module's contract).
unsafe fn give(out: *mut UfutexObj, ns: &'static Namespace, (slot, gen): (u32, u32), existed: bool) -> c_long {
    // SAFETY: writable and 8-aligned, checked by the caller.
    unsafe { out.write(UfutexObj { ns, slot, gen }) };
    c_long::from(existed)
}

/// Open (or create) the namespace `name`; the same pointer for the same name in one process.
///
/// # Safety
/// `name` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_ns_open(name: *const c_char) -> *mut Namespace {
    let r = entry(|| {
        let name = name_of(name)?;
        let _g = OPENING.lock();
        for slot in &OPEN {
            let e = slot.load(Ordering::Acquire);
            // SAFETY: a published entry is leaked and never freed.
            if !e.is_null() && unsafe { &(*e).0 } == &name {
                // SAFETY: as above.
                let ns = unsafe { &(*e).1 };
                // As `Namespace::open` does: objects only dead processes held die now.
                let _ = ns.reap();
                return Ok(ns as *const Namespace as c_long);
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
/// `name` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_ns_unlink(name: *const c_char) -> c_long {
    entry(|| {
        let name = name_of(name)?;
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

/// Remove the object named `name` now, as [`ufutex_obj_remove`] does the object of a key.
///
/// # Safety
/// `ns` is any pointer (checked); `name` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_obj_remove_name(ns: *const Namespace, name: *const c_char) -> c_long {
    entry(|| {
        let ns = namespace(ns)?;
        let name = KeyArg::read(name as u64, UFUTEX_BYNAME)?;
        ns.remove(name.key()).map(|()| 0).map_err(errno)
    })
}

/// Let go of one handle from a counted open (`UFUTEX_COUNTED`): the object dies with the last
/// handle of the last process that holds it. `EBADF` if this process holds none.
///
/// # Safety
/// None: `o` is read fault-safely (`EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_obj_close(o: *const UfutexObj) -> c_long {
    entry(|| {
        let o = read_obj(o as usize)?;
        match namespace(o.ns)?.let_go(o.slot, o.gen).map_err(errno)? {
            true => Ok(0),
            false => Err(Errno(libc::EBADF)),
        }
    })
}

/// Open or create the counting semaphore `key` (`initial`: a new one's count).
///
/// # Safety
/// `ns` is any pointer (checked); `out` is any pointer (checked writable before the open: `EFAULT`).
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
        let (how, counted) = how(flags)?;
        writable(out as usize, size_of::<UfutexObj>())?;
        let key = KeyArg::read(key, flags)?;
        let (s, existed) = ns.open_semaphore(key.key(), how, initial, counted).map_err(errno)?;
        // SAFETY: `out` found writable above.
        Ok(unsafe { give(out, ns, (s.slot, s.gen), existed) })
    })
}

/// Add `n` to the count, waking up to `n` waiters.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_post(o: *const UfutexObj, n: c_uint) -> c_long {
    entry(|| {
        let s = semaphore(o)?;
        s.post(n).map(|()| 0).map_err(errno)
    })
}

/// Take one from the count, sleeping while it is 0, until the absolute `timeout` on `clockid`.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`); `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_wait(o: *const UfutexObj, timeout: *const timespec, clockid: clockid_t) -> c_long {
    entry(|| {
        let s = semaphore(o)?;
        s.wait(deadline(timeout, clockid)?).map(|()| 0).map_err(errno)
    })
}

/// Take one from the count if it is above 0, else `EAGAIN`.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_sem_trywait(o: *const UfutexObj) -> c_long {
    entry(|| {
        let s = semaphore(o)?;
        match s.try_wait().map_err(errno)? {
            true => Ok(0),
            false => Err(Errno::EAGAIN),
        }
    })
}

/// Open or create the event `key` (`manual`: manual reset; `signaled`: a new one's state).
///
/// # Safety
/// `ns` is any pointer (checked); `out` is any pointer (checked writable before the open: `EFAULT`).
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
        let (how, counted) = how(flags)?;
        writable(out as usize, size_of::<UfutexObj>())?;
        let key = KeyArg::read(key, flags)?;
        let (e, existed) = ns.open_event(key.key(), how, (manual != 0, signaled != 0), counted).map_err(errno)?;
        // SAFETY: `out` found writable above.
        Ok(unsafe { give(out, ns, (e.slot, e.gen), existed) })
    })
}

/// Event operations: 0 set, 1 reset, 2 pulse.
fn event_op(o: *const UfutexObj, op: u8) -> c_long {
    entry(|| {
        let e = event(o)?;
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
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_set(o: *const UfutexObj) -> c_long {
    event_op(o, 0)
}

/// Make the event unsignaled.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_reset(o: *const UfutexObj) -> c_long {
    event_op(o, 1)
}

/// Release the event's current waiters, leaving it unsignaled.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_pulse(o: *const UfutexObj) -> c_long {
    event_op(o, 2)
}

/// Wait until the event is signaled (auto: taking it) or pulsed, until `timeout`.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`); `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_event_wait(
    o: *const UfutexObj,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    entry(|| {
        let e = event(o)?;
        e.wait(deadline(timeout, clockid)?).map(|()| 0).map_err(errno)
    })
}

/// Open or create the mutex `key`.
///
/// # Safety
/// `ns` is any pointer (checked); `out` is any pointer (checked writable before the open: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_open(
    ns: *const Namespace,
    key: u64,
    flags: c_uint,
    out: *mut UfutexObj,
) -> c_long {
    entry(|| {
        let ns = namespace(ns)?;
        let (how, counted) = how(flags)?;
        writable(out as usize, size_of::<UfutexObj>())?;
        let key = KeyArg::read(key, flags)?;
        let (m, existed) = ns.open_mutex(key.key(), how, counted).map_err(errno)?;
        // SAFETY: `out` found writable above.
        Ok(unsafe { give(out, ns, (m.slot, m.gen), existed) })
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
/// `o` is any pointer (read fault-safely: `EFAULT`); `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_lock(
    o: *const UfutexObj,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    entry(|| {
        let m = mutex(o)?;
        m.lock(deadline(timeout, clockid)?).map(acquired).map_err(errno)
    })
}

/// Lock the mutex if it can be had at once: 0 or `EOWNERDEAD` as for lock; `EBUSY` if held.
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_trylock(o: *const UfutexObj) -> c_long {
    entry(|| {
        let m = mutex(o)?;
        m.try_lock().map_err(errno)?.map(acquired).ok_or(Errno(libc::EBUSY))
    })
}

/// Release the mutex once (its owner thread only: else `EPERM`).
///
/// # Safety
/// `o` is any pointer (read fault-safely: `EFAULT`).
#[no_mangle]
pub unsafe extern "C" fn ufutex_nmutex_unlock(o: *const UfutexObj) -> c_long {
    entry(|| {
        let m = mutex(o)?;
        m.unlock().map(|()| 0).map_err(errno)
    })
}

/// Open or create the raw 32-bit word `key` (a new one holds 0); `*word` gets its address, a
/// process-shared futex word for `ufutex_wait`/`ufutex_wake` (without `UFUTEX_PRIVATE`).
///
/// # Safety
/// `ns` is any pointer (checked); `out` and `word` are any pointers (checked writable before the open: `EFAULT`).
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
    fn open<F: Futex>(
        ns: &Namespace,
        key: named::Key<'_>,
        (how, counted): (Open, bool),
    ) -> Result<(*mut c_void, u32, u32, bool), Errno> {
        let (w, existed) = ns.open_word::<F>(key, how, counted).map_err(errno)?;
        match w.get() {
            Ok(at) => Ok((std::ptr::from_ref(at).cast_mut().cast(), w.slot, w.gen, existed)),
            Err(e) => {
                // Removed already, by another process: a counted open's reference goes back.
                if counted {
                    let _ = ns.let_go(w.slot, w.gen);
                }
                Err(errno(e))
            }
        }
    }
    entry(|| {
        let ns = namespace(ns)?;
        writable(word as usize, size_of::<*mut c_void>())?;
        let how = how(flags)?;
        if ![UFUTEX_SIZE_U8, UFUTEX_SIZE_U16, UFUTEX_SIZE_U32, UFUTEX_SIZE_U64].contains(&size) {
            return Err(Errno::EINVAL);
        }
        writable(out as usize, size_of::<UfutexObj>())?;
        let key = KeyArg::read(key, flags)?;
        let key = key.key();
        let (at, slot, gen, existed) = match size {
            UFUTEX_SIZE_U8 => open::<AtomicU8>(ns, key, how)?,
            UFUTEX_SIZE_U16 => open::<AtomicU16>(ns, key, how)?,
            UFUTEX_SIZE_U32 => open::<AtomicU32>(ns, key, how)?,
            UFUTEX_SIZE_U64 => open::<AtomicU64>(ns, key, how)?,
            _ => return Err(Errno::EINVAL),
        };
        // SAFETY: `word` found writable (and 8-aligned) above.
        unsafe { word.write(at) };
        // SAFETY: `out` found writable above.
        Ok(unsafe { give(out, ns, (slot, gen), existed) })
    })
}

/// One `ufutex_wait_any` entry as a handle of its object's kind, its value checked for it.
enum Entry {
    Semaphore(Semaphore<'static>),
    Event(Event<'static>),
    Mutex(Mutex<'static>),
    Word(Word<'static, AtomicU32>, u32),
    Word8(Word<'static, AtomicU8>, u8),
    Word16(Word<'static, AtomicU16>, u16),
    Word64(Word<'static, AtomicU64>, u64),
}

impl Entry {
    /// The entry `e` names, checked in this order: the handle as [`handle`] checks it (without
    /// its NULL: the array was read), then `val` (`EINVAL` if wider than a raw word's size, or
    /// not 0 for another kind).
    fn of(e: UfutexWaitable) -> Result<Entry, Errno> {
        let ns = namespace(e.obj.ns)?;
        let (slot, gen, val) = (e.obj.slot, e.obj.gen, e.val);
        let kind = ns.kind(slot, gen).map_err(errno)?;
        let fits = |max: u64| if val <= max { Ok(val) } else { Err(Errno::EINVAL) };
        let reserved = |e: Entry| if val == 0 { Ok(e) } else { Err(Errno::EINVAL) };
        Ok(match kind {
            Kind::Semaphore => reserved(Entry::Semaphore(Semaphore { ns, slot, gen }))?,
            Kind::Event => reserved(Entry::Event(Event { ns, slot, gen }))?,
            Kind::Mutex => reserved(Entry::Mutex(Mutex { ns, slot, gen }))?,
            Kind::Word8 => {
                let v = fits(u8::MAX.into())? as u8;
                Entry::Word8(Word::from_parts(ns, slot, gen), v)
            }
            Kind::Word16 => {
                let v = fits(u16::MAX.into())? as u16;
                Entry::Word16(Word::from_parts(ns, slot, gen), v)
            }
            Kind::Word => {
                let v = fits(u32::MAX.into())? as u32;
                Entry::Word(Word::from_parts(ns, slot, gen), v)
            }
            Kind::Word64 => Entry::Word64(Word::from_parts(ns, slot, gen), val),
        })
    }

    fn waitable(&self) -> Waitable<'_> {
        match self {
            Entry::Semaphore(s) => Waitable::Semaphore(s),
            Entry::Event(e) => Waitable::Event(e),
            Entry::Mutex(m) => Waitable::Mutex(m),
            Entry::Word(w, v) => Waitable::Word(w, *v),
            Entry::Word8(w, v) => Waitable::Word8(w, *v),
            Entry::Word16(w, v) => Waitable::Word16(w, *v),
            Entry::Word64(w, v) => Waitable::Word64(w, *v),
        }
    }
}

/// Entry `i` of the caller's array at `objs`, read without trusting it (`EFAULT` if any of its
/// bytes does not read).
fn read_entry(objs: usize, i: usize) -> Result<UfutexWaitable, Errno> {
    let at = i.checked_mul(size_of::<UfutexWaitable>()).and_then(|off| objs.checked_add(off)).ok_or(Errno::EFAULT)?;
    let obj = read_obj(at)?;
    Ok(UfutexWaitable { obj, val: fault::read_u64(at.checked_add(16).ok_or(Errno::EFAULT)?)? })
}

/// Wait until one of `n` objects is ready and take it: its index, with
/// [`UFUTEX_WAIT_ABANDONED`] or'ed in for an abandoned mutex. See
/// `include/ufutex.h` for when each kind is ready and the errors, checked in this order: `n`
/// (`EINVAL`), `objs` NULL (`EFAULT`), each entry in index order — unreadable (`EFAULT`), then
/// as [`Entry::of`] — then the deadline.
///
/// # Safety
/// `objs` is any pointer (each entry is read through `fault`: unreadable is `EFAULT`);
/// `timeout` NULL or a readable timespec.
#[no_mangle]
pub unsafe extern "C" fn ufutex_wait_any(
    objs: *const UfutexWaitable,
    n: c_uint,
    timeout: *const timespec,
    clockid: clockid_t,
) -> c_long {
    entry(|| {
        let n = n as usize;
        if n == 0 || n > crate::WAITV_MAX {
            return Err(Errno::EINVAL);
        }
        if objs.is_null() {
            return Err(Errno::EFAULT);
        }
        // Each entry read once, into a buffer of at most WAITV_MAX: what is checked is what is
        // waited on, whatever the caller's other threads write to the array meanwhile.
        let mut entries = Vec::new();
        entries.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        for i in 0..n {
            entries.push(Entry::of(read_entry(objs as usize, i)?)?);
        }
        let deadline = deadline(timeout, clockid)?;
        let mut objects = Vec::new();
        objects.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        objects.extend(entries.iter().map(Entry::waitable));
        let (i, how) = named::wait_any_acquired(&objects, deadline).map_err(errno)?;
        Ok(match how {
            Acquired::Acquired => i as c_long,
            Acquired::Abandoned => i as c_long | UFUTEX_WAIT_ABANDONED,
        })
    })
}
