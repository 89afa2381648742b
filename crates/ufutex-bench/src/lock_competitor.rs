//! The lock competitors: one [`BenchLock`] impl per mutex, named by a [`LockKind`]. The
//! `lock` workload is generic over [`BenchLock`] (each lock's loop is compiled on its own);
//! adding a lock is an impl here, a [`LockKind`] variant and its arm in the workload's
//! dispatch. (The futex competitors are in `competitor.rs`.)

use std::cell::UnsafeCell;

/// A lock protecting a counter.
pub trait BenchLock: Sync + Send + Default {
    /// Run `f` with the lock held.
    fn with(&self, f: impl FnOnce(&mut u64));
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

/// Lock names accepted by `--impl` for `lock`.
pub fn names() -> Vec<&'static str> {
    LockKind::ALL.iter().map(|k| k.name()).collect()
}
