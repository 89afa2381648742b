//! Setting the calling thread's `errno` without a call into libc.
//!
//! `__errno_location()` is a call through the PLT; on the C ABI's most common failure (a wait
//! whose value differs, `EAGAIN`) it was half the time of the whole call (3 of 6 ns). glibc and
//! musl keep `errno` in static TLS (libc's own thread-local data, initial-exec): in every
//! thread it lies at the same offset from the thread pointer. The offset is learned once, from
//! one thread's `__errno_location()` and thread pointer; from then on a failure stores at
//! `thread pointer + offset`, a load and a store.

#[cfg(ufutex_fixup)]
use std::sync::atomic::{AtomicIsize, Ordering};

/// `errno`'s offset from the thread pointer; 0 until learned (it is never 0: the thread
/// pointer points at the thread control block, not at `errno`).
#[cfg(ufutex_fixup)]
#[cfg_attr(target_os = "linux", link_section = ".data.ufutex_hot")] // hot_code.rs
static OFFSET: AtomicIsize = AtomicIsize::new(0);

/// The thread pointer. On x86-64, the first word of the thread control block, which points to
/// itself (the TLS ABI's "variant II"; glibc and musl both keep it so); on aarch64, the
/// register TPIDR_EL0 ("variant I").
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[inline(always)]
fn thread_pointer() -> isize {
    let tp: isize;
    // SAFETY: reads 8 bytes at FS:0, which every thread of a process that runs libc has set up
    // (the TCB's self pointer); no other effect.
    unsafe { std::arch::asm!("mov {}, qword ptr fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
    tp
}

/// [`thread_pointer`] on aarch64.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[inline(always)]
fn thread_pointer() -> isize {
    let tp: isize;
    // SAFETY: reads the thread's software thread ID register, which libc sets to the thread
    // pointer and user code may read; no memory, no other effect.
    unsafe { std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags)) };
    tp
}

/// Set this thread's `errno` to `e` and return -1, as a failed system call does. The way
/// through libc is a function of its own, called only from the cold branch, so a caller's fast
/// path saves no register for it.
#[inline(always)]
pub(crate) fn fail(e: i32) -> std::ffi::c_long {
    #[cfg(ufutex_fixup)]
    {
        // Relaxed: the offset is a fact about the process (the same for every thread), not a
        // publication of other data; a thread that reads 0 asks libc.
        let offset = OFFSET.load(Ordering::Relaxed);
        if offset != 0 {
            // SAFETY: `thread_pointer() + offset` is this thread's `errno` (see the module
            // documentation: libc's static TLS is at one offset from the thread pointer in every
            // thread, and `fail_and_learn` checked it on the thread that learned it); an aligned
            // `int` the thread may write, as `*__errno_location() = e` would.
            unsafe { *((thread_pointer() + offset) as *mut i32) = e };
            return -1;
        }
    }
    fail_and_learn(e)
}

/// [`fail`] through libc, learning the offset on the way.
#[cold]
#[inline(never)]
fn fail_and_learn(e: i32) -> std::ffi::c_long {
    // SAFETY: `__errno_location` returns this thread's errno, always valid to write.
    let at = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    unsafe { *at = e };
    #[cfg(ufutex_fixup)]
    {
        let offset = at as isize - thread_pointer();
        // (A second look through libc must agree before the offset is used.)
        // SAFETY: as above.
        if offset != 0 && unsafe { libc::__errno_location() } as isize == thread_pointer() + offset {
            OFFSET.store(offset, Ordering::Relaxed);
        }
    }
    // Opaque to the optimiser: a caller that knew the -1 would call here and then return its
    // own constant; it jumps here instead, and returns ours.
    std::hint::black_box(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> i32 {
        // SAFETY: this thread's errno, always valid to read.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn every_thread_sets_its_own_errno() {
        assert_eq!(fail(libc::EAGAIN), -1); // (learns the offset, on this thread)
        assert_eq!(errno(), libc::EAGAIN);
        let others: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    assert_eq!(fail(libc::EINTR + i), -1);
                    errno()
                })
            })
            .collect();
        for (i, t) in others.into_iter().enumerate() {
            assert_eq!(t.join().unwrap(), libc::EINTR + i as i32);
        }
        assert_eq!(errno(), libc::EAGAIN, "another thread's errno is not ours");
        assert_eq!(fail(libc::ETIMEDOUT), -1);
        assert_eq!(errno(), libc::ETIMEDOUT);
    }
}
