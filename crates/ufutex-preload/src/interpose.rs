//! The interposers: `syscall()` and `prctl()`, the two libc functions through which an
//! unmodified program reaches the futex (Rust's std, parking_lot, libstdc++, abseil, perf bench
//! futex, ...), and the load-time constructor.
//!
//! Both are variadic in C, and stable Rust cannot define a variadic function. They are defined
//! here with fixed `c_long` arguments instead, which is sound on the platforms this library is
//! built for (x86_64 and aarch64 Linux): there a variadic call passes integer arguments in the
//! same registers as a fixed-argument call, and a callee that reads six of them reads what
//! glibc's own `syscall()` reads (registers the caller did not set hold junk that no system
//! call with fewer arguments looks at).
//!
//! Re-entry: the library's own kernel calls (its parker, its bucket lock) are futex calls made
//! through libc's `syscall()`, which resolves to this one. A thread-local flag (`reentry.rs`)
//! marks "inside the dispatcher": calls made from there go straight to libc's `syscall()`.

use crate::reentry;
use libc::{c_int, c_long, c_ulong, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
compile_error!("the fixed-argument interposers are sound only where variadic calls pass integers like fixed ones");

/// Run `f` as the dispatcher, unless this thread is inside it already (`None` then).
#[inline(always)]
fn outermost<R>(f: impl FnOnce() -> Option<R>) -> Option<R> {
    if reentry::replace(true) {
        return None;
    }
    let r = f();
    reentry::replace(false);
    r
}

/// libc's definition of `name` (the next one after this library's), looked up once.
fn next(cache: &AtomicPtr<c_void>, name: &std::ffi::CStr) -> *mut c_void {
    // Relaxed: every thread that looks it up finds the same address.
    let mut p = cache.load(Ordering::Relaxed);
    if p.is_null() {
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT asks for the next definition in load order.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        cache.store(p, Ordering::Relaxed);
    }
    p
}

/// `long syscall(long number, ...)`.
///
/// # Safety
/// As libc's `syscall()`: the arguments must be valid for the system call.
#[no_mangle]
#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")] // hot_code.rs
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    // The common call on its own: a legacy futex operation that ufutex takes, on a private word,
    // with no statistics to count. Told in a few instructions and made in this small frame; the
    // general dispatch (every other call, and these when counted) has a frame of its own: in it
    // a requeue ran ~50 instructions more (BENCHMARKS.md, eighty-fourth session). (No
    // `catch_unwind` here: `run` only picks a C ABI function, and those catch their own panics.)
    let Some(cmd) = crate::legacy::plain_private(number, a2) else {
        // SAFETY: forwarded contract.
        return unsafe { general(number, a1, a2, a3, a4, a5, a6) };
    };
    // SAFETY: forwarded contract (`plain_private` told a taken command).
    match outermost(|| Some(unsafe { crate::legacy::run(cmd, true, false, [a1, a2, a3, a4, a5, a6]) })) {
        Some(r) => r,
        // Inside the dispatcher: the library's own call, for the kernel.
        // SAFETY: forwarded contract.
        None => unsafe { kernel(number, a1, a2, a3, a4, a5, a6) },
    }
}

/// [`syscall`] for every call but the common one: ufutex's answer, else the kernel's.
///
/// # Safety
/// As [`syscall`].
#[inline(never)]
unsafe fn general(number: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long {
    // SAFETY: forwarded contract.
    if let Some(r) = outermost(|| unsafe { crate::dispatch_syscall(number, [a1, a2, a3, a4, a5, a6]) }) {
        return r;
    }
    // SAFETY: forwarded contract.
    unsafe { kernel(number, a1, a2, a3, a4, a5, a6) }
}

/// The call made by libc's `syscall()`.
///
/// # Safety
/// As [`syscall`].
#[inline(never)]
unsafe fn kernel(number: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long {
    static NEXT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f = next(&NEXT, c"syscall");
    // SAFETY: `f` is libc's `syscall`, variadic, called with the caller's six arguments as the
    // caller called us (see the module docs for why that is the same call).
    unsafe {
        let f: unsafe extern "C" fn(c_long, ...) -> c_long = std::mem::transmute(f);
        f(number, a1, a2, a3, a4, a5, a6)
    }
}

/// `int prctl(int option, ...)`.
///
/// # Safety
/// As libc's `prctl()`.
#[no_mangle]
pub unsafe extern "C" fn prctl(option: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> c_int {
    if let Some(r) = outermost(|| crate::dispatch_prctl(option.into(), a2, a3, a4)) {
        return r as c_int;
    }
    static NEXT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
    let f = next(&NEXT, c"prctl");
    // SAFETY: `f` is libc's `prctl`, variadic, called with the caller's arguments.
    unsafe {
        let f: unsafe extern "C" fn(c_int, ...) -> c_int = std::mem::transmute(f);
        f(option, a2, a3, a4, a5)
    }
}

/// Read the environment once, at load time, and register the statistics report.
extern "C" fn init() {
    crate::config::init();
    if crate::config::stats() {
        extern "C" fn report() {
            crate::stats::report();
        }
        // SAFETY: `report` is a plain `extern "C" fn()` that lives as long as the library.
        unsafe { libc::atexit(report) };
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
