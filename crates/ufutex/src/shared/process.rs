//! This process in the shared table: its slot (claimed with the kernel's help, safe against
//! PID reuse and PID namespaces), the liveness of other slots, its waiter records, and starting
//! afresh in a child after `fork`.
//!
//! A slot is claimed by taking an OFD write lock on its liveness byte of the segment file
//! (non-blocking): whoever gets it owns the slot until it dies, when the kernel drops the lock.
//! So "is (slot, generation) alive?" is: the slot still has that generation, and some open file
//! description holds its byte. The claimant then bumps the generation (every owner it names from
//! before is now dead), reaps what the dead previous owner left queued, and marks it live.
//!
//! After `fork` the child shares the parent's file descriptions, so its probes would not see the
//! parent's lock and the parent would look alive while the child lives: the child closes them
//! (an atfork handler) and claims a slot of its own at its first shared operation. Children
//! made without the atfork handlers (a raw `clone`) are caught too: a page mapped
//! `MADV_WIPEONFORK` reads zero in any child.

use super::lock::{Life, Liveness, Owner};
use super::queue::{lock_bucket, Host, Locked};
use super::segment::{Segment, LIVENESS_BASE, REC_IDLE, REC_QUEUED, SLOT_LIVE};
use super::SharedError;
use crate::once::{PerProcess, SetupLock};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

/// This process's view of the shared table.
pub(crate) struct Proc {
    pub(crate) seg: &'static Segment,
    pub(crate) me: Owner,
    /// Our own open file description of the segment (holds our liveness lock, probes others').
    fd: libc::c_int,
    /// `/proc/self/maps`, opened by this process (not inherited).
    pub(crate) maps_fd: libc::c_int,
    /// Our slot's free records.
    free: Mutex<Vec<u32>>,
    /// In a forked child, the parent's `Proc` as the child inherited it: never used again, but
    /// kept reachable (a leak checker would call it lost, and one fork in a signal handler
    /// could still hold a reference to it).
    _parent: *const Proc,
}

// SAFETY: `_parent` is never dereferenced; everything else is Sync (atomics, a Mutex, and the
// leaked segment).
unsafe impl Sync for Proc {}
// SAFETY: as above.
unsafe impl Send for Proc {}

/// The segment, mapped once for the life of the process (children inherit the mapping).
static SEGMENT: AtomicPtr<Segment> = AtomicPtr::new(std::ptr::null_mut());
/// This process's [`Proc`], read only where [`HERE`] says it is this process's (none yet, or
/// a forked child that has not made its own, reads none: `once::PerProcess`).
static PROC: PerProcess<Proc> = PerProcess::new();
/// `PROC`'s mark: a word in a `MADV_WIPEONFORK` page (`fork_mark.rs`'s), 1 in the process that
/// made `PROC`, 0 in its children.
static HERE: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());
/// The descriptors the atfork child handler closes.
static FDS: [AtomicI32; 2] = [AtomicI32::new(-1), AtomicI32::new(-1)];
/// The set-ups' lock (the segment's, a process slot's): one a forked child takes over from a
/// thread of the parent's that held it at the fork (`once.rs`), since the child makes its own
/// slot at its first call, whoever held the lock then. What a set-up publishes it publishes
/// with one store, so a child finds it made or not made.
static INIT: SetupLock = SetupLock::new();

/// The mapped segment, opening it the first time.
#[inline]
pub(crate) fn segment() -> Result<&'static Segment, SharedError> {
    let s = SEGMENT.load(Ordering::Acquire);
    if !s.is_null() {
        // SAFETY: a published segment is leaked and never unmapped.
        return Ok(unsafe { &*s });
    }
    open_segment()
}

#[cold]
fn open_segment() -> Result<&'static Segment, SharedError> {
    // A signal handler that interrupted its thread's set-up would wait for that thread's lock.
    let Some(_setup) = crate::reentry::setup() else {
        return Err(SharedError::Interrupted);
    };
    let _g = INIT.lock();
    let s = SEGMENT.load(Ordering::Acquire);
    if !s.is_null() {
        // SAFETY: as in `segment`.
        return Ok(unsafe { &*s });
    }
    let seg: &'static Segment = Box::leak(Box::new(Segment::open()?));
    SEGMENT.store(seg as *const Segment as *mut Segment, Ordering::Release);
    Ok(seg)
}

/// This process's [`Proc`], claiming a slot the first time (and again in a forked child).
#[inline]
pub(crate) fn proc() -> Result<&'static Proc, SharedError> {
    match claimed() {
        Some(p) => Ok(p),
        None => new_proc(),
    }
}

/// This process's [`Proc`] if it has claimed its slot, without claiming one: loads only, so a
/// forked child may ask before it has made anything of its own (and a thread's exit there
/// need not claim a slot just to learn that a record is its parent's).
#[inline]
pub(crate) fn claimed() -> Option<&'static Proc> {
    let here = HERE.load(Ordering::Acquire);
    // SAFETY: `here` is null or a word of a leaked page that is never unmapped.
    unsafe { here.as_ref() }.and_then(|h| PROC.get(h))
}

#[cold]
fn new_proc() -> Result<&'static Proc, SharedError> {
    // The segment first: a set-up of its own, not nested in this one.
    let seg = segment()?;
    // As in `open_segment`.
    let Some(_setup) = crate::reentry::setup() else {
        return Err(SharedError::Interrupted);
    };
    let _g = INIT.lock();
    let here = here_word()?;
    if let Some(p) = PROC.get(here) {
        return Ok(p);
    }
    // A first call, or a child: the parent's descriptions (if any) are not ours.
    close_inherited();
    let mut fresh = Proc::claim(seg)?;
    fresh._parent = PROC.inherited();
    let p: &'static Proc = Box::leak(Box::new(fresh));
    FDS[0].store(p.fd, Ordering::Relaxed);
    FDS[1].store(p.maps_fd, Ordering::Relaxed);
    PROC.publish(here, p);
    Ok(p)
}

/// The wipe-on-fork word, mapped (and the atfork handler registered) the first time.
fn here_word() -> Result<&'static AtomicU32, SharedError> {
    let h = HERE.load(Ordering::Acquire);
    if !h.is_null() {
        // SAFETY: a leaked page, never unmapped.
        return Ok(unsafe { &*h });
    }
    // Without WIPEONFORK (kernels before 4.14) a raw clone child is not detected; the atfork
    // handler still catches fork().
    let word = crate::fork_mark::shared_word().ok_or(SharedError::NoMemory)?;
    extern "C" fn child() {
        close_inherited();
        let h = HERE.load(Ordering::Relaxed);
        if !h.is_null() {
            // SAFETY: the leaked page, inherited by the child.
            unsafe { &*h }.store(0, Ordering::Relaxed);
        }
    }
    // SAFETY: registers a handler that only closes descriptors and stores to atomics
    // (async-signal-safe, as a child handler of a multithreaded parent must be).
    unsafe { libc::pthread_atfork(None, None, Some(child)) };
    HERE.store(std::ptr::from_ref(word).cast_mut(), Ordering::Release);
    Ok(word)
}

/// Close the descriptors a parent's [`Proc`] held (in a child, or before the first claim).
fn close_inherited() {
    for f in &FDS {
        let fd = f.swap(-1, Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: a descriptor we opened and nobody else uses in this process any more.
            unsafe { libc::close(fd) };
        }
    }
}

impl Proc {
    /// Claim a free (or dead) slot: open our own description of the segment and
    /// `/proc/self/maps`, lock a liveness byte no live process holds, bump the slot's
    /// generation, reap what its dead previous owner left.
    fn claim(seg: &'static Segment) -> Result<Proc, SharedError> {
        let path = std::ffi::CString::new(super::file::segment_path()?).map_err(|_| SharedError::Invalid)?;
        // SAFETY: NUL-terminated paths that outlive the calls.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(SharedError::Access);
        }
        // SAFETY: as above.
        let maps_fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        let close = || {
            // SAFETY: our own descriptors, not yet shared.
            unsafe {
                libc::close(fd);
                if maps_fd >= 0 {
                    libc::close(maps_fd);
                }
            }
        };
        for slot in 0..seg.layout.procs {
            if !try_lock_byte(fd, slot) {
                continue;
            }
            let s = seg.slot(slot)?;
            // Every owner named with an older generation of this slot is now dead.
            let gen = s.gen.load(Ordering::Relaxed).wrapping_add(1);
            s.gen.store(gen, Ordering::SeqCst);
            // SAFETY: getpid has no arguments and cannot fail.
            s.pid.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
            s.state.store(SLOT_LIVE, Ordering::SeqCst);
            super::fault::arm_from_env();
            let base = slot * seg.layout.records;
            let p = Proc {
                seg,
                me: Owner { slot, gen },
                fd,
                maps_fd,
                free: Mutex::new((base..base + seg.layout.records).rev().collect()),
                _parent: std::ptr::null(),
            };
            if let Err(e) = p.reap(slot) {
                close();
                return Err(e);
            }
            return Ok(p);
        }
        close();
        Err(SharedError::NoSpace)
    }

    /// Take back every record of `slot`'s previous owner: out of any queue it is still in, its
    /// filter count returned, its thread counted out of the bell it slept on.
    fn reap(&self, slot: u32) -> Result<(), SharedError> {
        let s = self.seg.slot(slot)?;
        let base = slot * self.seg.layout.records;
        let used = s.used.load(Ordering::Relaxed).min(self.seg.layout.records);
        for r in base..base + used {
            let rec = self.seg.record(r)?;
            while rec.state.load(Ordering::Acquire) == REC_QUEUED {
                let b = rec.bucket();
                if self.seg.bucket(b).is_err() {
                    break; // a corrupt bucket index: the record is in no queue
                }
                let g = self.lock_bucket(b)?;
                if rec.state.load(Ordering::Relaxed) == REC_QUEUED && rec.bucket() == b {
                    g.begin();
                    g.unlink(r)?;
                    rec.state.store(REC_IDLE, Ordering::Release);
                    g.end();
                }
            }
            rec.state.store(REC_IDLE, Ordering::Relaxed);
            super::park::forget_sleep(self.seg, rec);
            self.release_filter(r)?;
        }
        s.used.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// A free record of ours, marked used.
    pub(crate) fn alloc(&self) -> Result<u32, SharedError> {
        let r = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop().ok_or(SharedError::NoSpace)?;
        let s = self.seg.slot(self.me.slot)?;
        let n = r - self.me.slot * self.seg.layout.records + 1;
        s.used.fetch_max(n, Ordering::Relaxed);
        Ok(r)
    }

    /// Give back a record from [`Proc::alloc`] (idle, holding no filter count).
    pub(crate) fn free(&self, r: u32) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(r);
    }

    /// Drop the filter count record `r` holds, if any.
    pub(crate) fn release_filter(&self, r: u32) -> Result<(), SharedError> {
        self.seg.release_filter(r)
    }

    /// Lock bucket `b` as this process (see [`lock_bucket`]).
    pub(crate) fn lock_bucket(&self, b: u32) -> Result<Locked<'_>, SharedError> {
        lock_bucket(self, b)
    }
}

impl Host for Proc {
    fn seg(&self) -> &Segment {
        self.seg
    }
    fn me(&self) -> Owner {
        self.me
    }
}

impl Liveness for Proc {
    fn life(&self, o: Owner) -> Life {
        let Ok(s) = self.seg.slot(o.slot) else { return Life::Corrupt };
        if o.slot == self.me.slot {
            // Our own description's lock does not show in our own probe.
            return if o.gen == self.me.gen { Life::Alive } else { Life::Dead };
        }
        if s.gen.load(Ordering::SeqCst) != o.gen || s.state.load(Ordering::Relaxed) != SLOT_LIVE {
            return Life::Dead;
        }
        if byte_is_locked(self.fd, o.slot) {
            Life::Alive
        } else {
            Life::Dead
        }
    }
}

fn liveness_lock(slot: u32, ty: libc::c_int) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value of the plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = ty as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = LIVENESS_BASE + i64::from(slot);
    fl.l_len = 1;
    fl
}

/// Take slot `slot`'s liveness byte for our description, if no other description holds it.
fn try_lock_byte(fd: libc::c_int, slot: u32) -> bool {
    let mut fl = liveness_lock(slot, libc::F_WRLCK);
    // SAFETY: `fl` is a valid flock; OFD locks need l_pid 0 (zeroed).
    unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut fl) == 0 }
}

/// Whether some other open file description holds slot `slot`'s liveness byte.
fn byte_is_locked(fd: libc::c_int, slot: u32) -> bool {
    let mut fl = liveness_lock(slot, libc::F_WRLCK);
    // SAFETY: `fl` is a valid flock the kernel overwrites with the conflicting lock, if any.
    let r = unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut fl) };
    // If the probe itself fails, say alive: never take a live owner's lock.
    r != 0 || fl.l_type != libc::F_UNLCK as libc::c_short
}
