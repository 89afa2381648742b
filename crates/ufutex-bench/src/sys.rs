//! Raw Linux calls the benchmark needs: the futex2 syscalls, the legacy futex, the private-hash
//! prctl, CPU affinity and thread state. Every call returns an `io::Result` (errno on failure).

use std::io;
use std::sync::atomic::AtomicU32;
use std::sync::OnceLock;

pub const SYS_FUTEX_WAITV: libc::c_long = 449;
pub const SYS_FUTEX_WAKE: libc::c_long = 454;
pub const SYS_FUTEX_WAIT: libc::c_long = 455;
pub const SYS_FUTEX_REQUEUE: libc::c_long = 456;

pub const FUTEX2_SIZE_U8: u32 = 0x00;
pub const FUTEX2_SIZE_U32: u32 = 0x02;
pub const FUTEX2_PRIVATE: u32 = 128;
/// A 32-bit private word (the kernel hashes it by this process and its address).
pub const FLAGS_U32: u32 = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE;
/// A 32-bit process-shared word (the kernel hashes it by the object behind the page).
pub const FLAGS_U32_SHARED: u32 = FUTEX2_SIZE_U32;
pub const KERNEL_WAITV_MAX: usize = 128;
pub const MATCH_ANY: u64 = u32::MAX as u64;

const PR_FUTEX_HASH: libc::c_int = 78;
const PR_FUTEX_HASH_SET_SLOTS: libc::c_ulong = 1;
const PR_FUTEX_HASH_GET_SLOTS: libc::c_ulong = 2;

/// The kernel's `struct futex_waitv` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FutexWaitv {
    pub val: u64,
    pub uaddr: u64,
    pub flags: u32,
    pub reserved: u32,
}

const _: () = assert!(std::mem::size_of::<FutexWaitv>() == 24);

impl FutexWaitv {
    /// An entry for `word` with futex2 `flags` ([`FLAGS_U32`] or [`FLAGS_U32_SHARED`]).
    pub fn new(word: &AtomicU32, val: u32, flags: u32) -> Self {
        FutexWaitv { val: val as u64, uaddr: word.as_ptr() as u64, flags, reserved: 0 }
    }
}

/// A count for a futex call's `int` argument: `n`, or `INT_MAX` above it (every count wakes or
/// moves at most all waiters, as `usize::MAX` means here).
pub fn c_count(n: usize) -> libc::c_int {
    n.min(i32::MAX as usize) as libc::c_int
}

fn ret(r: libc::c_long) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// futex2 `futex_wait` on a 32-bit word with `flags` ([`FLAGS_U32`] or [`FLAGS_U32_SHARED`]),
/// no timeout.
#[inline]
pub fn futex2_wait(word: &AtomicU32, val: u32, mask: u64, flags: u32) -> io::Result<usize> {
    // SAFETY:
    // - `word` is a live, aligned 32-bit atomic for the whole call; the kernel only reads it.
    // - a NULL timeout means "no timeout"; the clock id is ignored then.
    ret(unsafe {
        libc::syscall(
            SYS_FUTEX_WAIT,
            word.as_ptr(),
            val as libc::c_ulong,
            mask as libc::c_ulong,
            flags,
            std::ptr::null::<libc::timespec>(),
            libc::CLOCK_MONOTONIC,
        )
    })
}

/// futex2 `futex_wake` on a 32-bit word with `flags` ([`FLAGS_U32`] or [`FLAGS_U32_SHARED`]).
#[inline]
pub fn futex2_wake(word: &AtomicU32, nr: usize, mask: u64, flags: u32) -> io::Result<usize> {
    futex2_wake_flags(word.as_ptr() as *const u8, nr, mask, flags)
}

/// futex2 `futex_wake` with explicit flags (used to probe which sizes the kernel accepts).
pub fn futex2_wake_flags(addr: *const u8, nr: usize, mask: u64, flags: u32) -> io::Result<usize> {
    let nr = c_count(nr);
    // SAFETY:
    // - callers pass the address of a live word; futex_wake only hashes it and checks alignment,
    //   it never writes user memory.
    ret(unsafe { libc::syscall(SYS_FUTEX_WAKE, addr, mask as libc::c_ulong, nr, flags) })
}

/// futex2 `futex_waitv`, no timeout.
#[inline]
pub fn futex2_waitv(entries: &[FutexWaitv]) -> io::Result<usize> {
    // SAFETY:
    // - `entries` points to `entries.len()` valid `futex_waitv` structs whose `uaddr`s are live
    //   32-bit words (built by `FutexWaitv::new` from references the caller keeps alive).
    // - NULL timeout: wait forever; flags must be 0.
    ret(unsafe {
        libc::syscall(
            SYS_FUTEX_WAITV,
            entries.as_ptr(),
            entries.len() as libc::c_uint,
            0 as libc::c_uint,
            std::ptr::null::<libc::timespec>(),
            libc::CLOCK_MONOTONIC,
        )
    })
}

/// futex2 `futex_requeue` from `from` (compared with `val`) to `to`, both with `flags`.
#[inline]
pub fn futex2_requeue(
    from: &AtomicU32,
    val: u32,
    to: &AtomicU32,
    nr_wake: usize,
    nr_requeue: usize,
    flags: u32,
) -> io::Result<usize> {
    let pair = [FutexWaitv::new(from, val, flags), FutexWaitv::new(to, 0, flags)];
    // SAFETY:
    // - `pair` is two valid `futex_waitv` structs for live 32-bit words; flags argument is 0.
    ret(unsafe {
        libc::syscall(SYS_FUTEX_REQUEUE, pair.as_ptr(), 0 as libc::c_uint, c_count(nr_wake), c_count(nr_requeue))
    })
}

/// Legacy `FUTEX_WAIT_PRIVATE`, no timeout.
#[inline]
pub fn legacy_wait(word: &AtomicU32, val: u32) -> io::Result<usize> {
    // SAFETY:
    // - `word` is a live aligned 32-bit atomic; NULL timeout; unused arguments are ignored.
    ret(unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            val,
            std::ptr::null::<libc::timespec>(),
        )
    })
}

/// Legacy `FUTEX_WAKE_PRIVATE`.
#[inline]
pub fn legacy_wake(word: &AtomicU32, nr: usize) -> io::Result<usize> {
    let nr = c_count(nr);
    // SAFETY:
    // - `word` is a live aligned 32-bit atomic; FUTEX_WAKE never writes user memory.
    ret(unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, nr) })
}

/// `prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, n, 0)`: 0 = global hash (final).
pub fn futex_hash_set_slots(n: usize) -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    let r = unsafe { libc::prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, n as libc::c_ulong, 0 as libc::c_ulong) };
    ret(r as libc::c_long).map(|_| ())
}

/// `prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS)`: the private hash size, 0 for global.
pub fn futex_hash_get_slots() -> io::Result<usize> {
    // SAFETY: prctl with integer arguments only; no memory is passed.
    let r = unsafe { libc::prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    ret(r as libc::c_long)
}

/// What this kernel offers, probed once.
#[derive(Debug, Clone)]
pub struct KernelSupport {
    /// `None` when futex2 wait/wake/waitv/requeue exist; else why not.
    pub futex2: Option<String>,
    /// `None` when PR_FUTEX_HASH works; else why not.
    pub futex_hash: Option<String>,
    /// `None` when futex2 accepts 8-bit words; else why not (6.18 accepts only 32-bit).
    pub small_sizes: Option<String>,
}

fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => "ENOSYS (syscall missing on this kernel)".into(),
        Some(libc::EINVAL) => "EINVAL (not supported by this kernel)".into(),
        _ => e.to_string(),
    }
}

pub fn kernel_support() -> &'static KernelSupport {
    static SUPPORT: OnceLock<KernelSupport> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        let w = AtomicU32::new(0);
        let futex2 = futex2_wake(&w, 1, MATCH_ANY, FLAGS_U32).err().map(|e| format!("futex_wake: {}", describe(&e)));
        let futex_hash = futex_hash_get_slots().err().map(|e| format!("PR_FUTEX_HASH: {}", describe(&e)));
        let byte = 0u8;
        let small_sizes = match futex2_wake_flags(&byte, 1, 0xff, FUTEX2_SIZE_U8 | FUTEX2_PRIVATE) {
            Ok(_) => None,
            Err(e) => Some(format!("futex2 with 8/16/64-bit words: {}", describe(&e))),
        };
        KernelSupport { futex2, futex_hash, small_sizes }
    })
}

/// Pin the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY:
    // - `set` is a zeroed cpu_set_t that lives across the call; CPU_SET bounds-checks `cpu`
    //   against the set's size (it is a no-op past it).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The calling thread pinned to one CPU while this lives; its previous CPU set again after.
pub struct Pinned {
    old: libc::cpu_set_t,
}

impl Pinned {
    pub fn to(cpu: usize) -> io::Result<Pinned> {
        // SAFETY: `old` is a zeroed cpu_set_t that lives across the call, of the size passed.
        let old = unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
                return Err(io::Error::last_os_error());
            }
            old
        };
        pin_to_cpu(cpu)?;
        Ok(Pinned { old })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: `old` is the set read in `to`, of the size passed.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old) };
    }
}

/// The ids of the CPUs the calling thread may run on, lowest first (they need not start at 0:
/// `taskset -c 1` allows CPU 1 alone); CPU 0 if the kernel will not say.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a zeroed cpu_set_t that lives across the call, of the size passed;
    // CPU_ISSET reads it within its bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
        if cpus.is_empty() {
            vec![0]
        } else {
            cpus
        }
    }
}

/// How many CPUs this process may run on.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The calling thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The state letter of a thread of this process ('R', 'S', ...), from /proc.
pub fn thread_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the state follows the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_thread_is_running() {
        assert_eq!(thread_state(gettid()), Some('R'));
    }

    #[test]
    fn mismatching_waits_fail_with_eagain() {
        let w = AtomicU32::new(1);
        assert_eq!(legacy_wait(&w, 0).unwrap_err().raw_os_error(), Some(libc::EAGAIN));
        if kernel_support().futex2.is_none() {
            for flags in [FLAGS_U32, FLAGS_U32_SHARED] {
                assert_eq!(futex2_wait(&w, 0, MATCH_ANY, flags).unwrap_err().raw_os_error(), Some(libc::EAGAIN));
                let v = [FutexWaitv::new(&w, 0, flags)];
                assert_eq!(futex2_waitv(&v).unwrap_err().raw_os_error(), Some(libc::EAGAIN));
                assert_eq!(futex2_wake(&w, 1, MATCH_ANY, flags).unwrap(), 0);
                let to = AtomicU32::new(0);
                assert_eq!(futex2_requeue(&w, 0, &to, 1, 1, flags).unwrap_err().raw_os_error(), Some(libc::EAGAIN));
            }
        }
    }
}
