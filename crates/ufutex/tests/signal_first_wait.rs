//! A thread's first wait, made by a signal handler that interrupted the allocator, allocates
//! nothing and registers no TLS destructor (glibc's `__cxa_thread_atexit_impl` allocates and
//! takes the dynamic loader's lock): the kernel's futex wait is async-signal-safe, and so must
//! be ours where it can be.
//!
//! Through the Rust API and through the C ABI (each on a thread of its own).
//!
//! This binary's global allocator raises SIGUSR1 at its own thread from inside an allocation
//! (where malloc would hold its lock), once, when asked; the handler makes the thread's first
//! wait. Whatever allocates or registers a TLS destructor while the handler runs there is
//! counted (this binary's `__cxa_thread_atexit_impl` stands in front of glibc's). The process's
//! own first wait and its table's size are settled before: growing process-wide structures may
//! allocate (`thread.rs`).
//!
//! Not built with `fallback-parker`: the portable parker allocates its state (shared with its
//! unpark handles) and sleeps on a mutex and condition variable, which no handler may use.
#![cfg(not(ufutex_loom))]
#![cfg(not(feature = "fallback-parker"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;
use ufutex::{Domain, Slots, WaitError};

thread_local! {
    /// This thread's next allocation raises SIGUSR1 from inside the allocator.
    static RAISE: Cell<bool> = const { Cell::new(false) };
    /// This thread is inside the allocator: a handler runs on top of it.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Allocations and frees made by the handler inside the allocator.
static REENTERED: AtomicUsize = AtomicUsize::new(0);
/// TLS destructors registered by the handler inside the allocator.
static TLS_DTORS: AtomicUsize = AtomicUsize::new(0);
/// What the handler's wait returned: 0 not run, 1 timed out, 2 anything else.
static OUTCOME: AtomicU32 = AtomicU32::new(0);

struct Watching;

// SAFETY: every call is forwarded to `System` with the caller's arguments; the bookkeeping
// touches only const thread-locals (no lazy set-up, nothing that allocates) and atomics.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if INSIDE.get() {
            REENTERED.fetch_add(1, Ordering::SeqCst);
        }
        if RAISE.replace(false) {
            INSIDE.set(true);
            // SAFETY: raise has no preconditions; the handler is installed.
            unsafe { libc::raise(libc::SIGUSR1) };
            INSIDE.set(false);
        }
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if INSIDE.get() {
            REENTERED.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Watching = Watching;

/// glibc's registration of a TLS destructor (which std's `thread_local!` calls for a value
/// that needs dropping), counted inside the allocator and passed on.
///
/// # Safety
/// As glibc's.
#[no_mangle]
pub unsafe extern "C" fn __cxa_thread_atexit_impl(
    dtor: unsafe extern "C" fn(*mut libc::c_void),
    obj: *mut libc::c_void,
    dso: *mut libc::c_void,
) -> libc::c_int {
    if INSIDE.get() {
        TLS_DTORS.fetch_add(1, Ordering::SeqCst);
    }
    type Register = unsafe extern "C" fn(
        unsafe extern "C" fn(*mut libc::c_void),
        *mut libc::c_void,
        *mut libc::c_void,
    ) -> libc::c_int;
    // SAFETY: the name is NUL-terminated; RTLD_NEXT finds glibc's definition after ours.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, c"__cxa_thread_atexit_impl".as_ptr()) };
    assert!(!next.is_null(), "glibc has __cxa_thread_atexit_impl");
    // SAFETY: glibc's function of this signature, called with the caller's arguments.
    unsafe { std::mem::transmute::<*mut libc::c_void, Register>(next)(dtor, obj, dso) }
}

fn soon() -> Option<ufutex::Deadline> {
    Some(Duration::from_millis(1).into())
}

extern "C" {
    // The C ABI's wait (crates/ufutex/src/ffi), as a C program calls it.
    fn ufutex_wait(
        uaddr: *mut libc::c_void,
        val: libc::c_ulong,
        mask: libc::c_ulong,
        flags: libc::c_uint,
        timeout: *const libc::timespec,
        clockid: libc::clockid_t,
    ) -> libc::c_long;
}

/// Which wait the handler makes: 0 the Rust API's, 1 the C ABI's.
static THROUGH_C: AtomicU32 = AtomicU32::new(0);

/// A wait on a word nobody wakes, for 1 ms: true if it timed out.
fn timed_out(through_c: bool) -> bool {
    let word = AtomicU32::new(0);
    if !through_c {
        return ufutex::wait(&word, 0, soon()) == Err(WaitError::TimedOut);
    }
    let mut at = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `at` is a valid timespec to fill in.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut at) };
    at.tv_nsec += 1_000_000;
    if at.tv_nsec >= 1_000_000_000 {
        (at.tv_sec, at.tv_nsec) = (at.tv_sec + 1, at.tv_nsec - 1_000_000_000);
    }
    // SAFETY: an aligned live word and timespec; 0x82 is a private 32-bit word.
    let r = unsafe { ufutex_wait(word.as_ptr().cast(), 0, u32::MAX.into(), 0x82, &at, libc::CLOCK_MONOTONIC) };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT)
}

extern "C" fn first_wait(_sig: libc::c_int) {
    let outcome = if timed_out(THROUGH_C.load(Ordering::SeqCst) == 1) { 1 } else { 2 };
    OUTCOME.store(outcome, Ordering::SeqCst);
}

#[test]
fn a_handlers_first_wait_inside_the_allocator_allocates_nothing() {
    Domain::default_domain().set_slots(Slots::Fixed(64)).unwrap();
    assert!(timed_out(false) && timed_out(true), "the process's first waits");
    // SAFETY: an all-zero `sigaction` is a valid start (no flags, empty mask); `first_wait` is
    // the handler under test; `sa` outlives the call, and a null old action is allowed.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = first_wait as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    for (through_c, api) in [(0, "the Rust API"), (1, "the C ABI")] {
        THROUGH_C.store(through_c, Ordering::SeqCst);
        OUTCOME.store(0, Ordering::SeqCst);
        // A new thread: its first wait.
        std::thread::spawn(|| {
            RAISE.set(true);
            // The allocation the signal interrupts.
            drop(std::hint::black_box(Vec::<u8>::with_capacity(64)));
            assert!(!RAISE.get(), "the allocator raised the signal");
        })
        .join()
        .unwrap();
        assert_eq!(OUTCOME.load(Ordering::SeqCst), 1, "{api}: the handler's wait ran and timed out");
        assert_eq!(REENTERED.load(Ordering::SeqCst), 0, "{api}: allocations by the handler's first wait");
        assert_eq!(TLS_DTORS.load(Ordering::SeqCst), 0, "{api}: TLS destructors registered by it");
    }
}
