//! A thread's first wait, made by a signal handler that interrupted the allocator, allocates
//! nothing and registers no TLS destructor (glibc's `__cxa_thread_atexit_impl` allocates and
//! takes the dynamic loader's lock): the kernel's futex wait is async-signal-safe, and so must
//! be ours where it can be. Through the Rust API and through the C ABI (each on a thread of its
//! own), also when the first wait makes the node pool's next chunk; and a handler's wake of a
//! sleeper (a semaphore's post), likewise.
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

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use ufutex::preload::ufutex_wait;
use ufutex::{Domain, DomainConfig, Slots, WaitError};

thread_local! {
    /// This thread's next allocation raises SIGUSR1 from inside the allocator.
    static RAISE: Cell<bool> = const { Cell::new(false) };
    /// This thread is inside the allocator: a handler runs on top of it.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    /// Allocations and frees made by this thread's handler inside the allocator.
    static REENTERED: Cell<usize> = const { Cell::new(0) };
    /// TLS destructors registered by this thread's handler inside the allocator.
    static TLS_DTORS: Cell<usize> = const { Cell::new(0) };
}

struct Watching;

// SAFETY: every call is forwarded to `System` with the caller's arguments; the bookkeeping
// touches only const thread-locals (no lazy set-up, nothing that allocates).
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if INSIDE.get() {
            REENTERED.set(REENTERED.get() + 1);
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
            REENTERED.set(REENTERED.get() + 1);
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
        TLS_DTORS.set(TLS_DTORS.get() + 1);
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

/// What the handler does (this thread's, set before the signal is raised).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Action {
    /// The thread's first wait, 1 ms, through the Rust API or the C ABI.
    Wait { through_c: bool },
    /// A wake of one waiter of `word` in `domain`.
    Wake { domain: *const Domain, word: *const AtomicU32 },
}

thread_local! {
    static ACTION: Cell<Action> = const { Cell::new(Action::Wait { through_c: false }) };
    /// What the handler's action returned: a wait 1 if it timed out, a wake how many it woke.
    static OUTCOME: Cell<Option<usize>> = const { Cell::new(None) };
}

/// A wait on a word nobody wakes, for 1 ms: true if it timed out.
fn timed_out(through_c: bool) -> bool {
    let word = AtomicU32::new(0);
    if !through_c {
        return ufutex::wait(&word, 0, soon()) == Err(WaitError::TimedOut);
    }
    let at = common::monotonic_in(Duration::from_millis(1));
    // SAFETY: an aligned live word and timespec; 0x82 is a private 32-bit word.
    let r = unsafe { ufutex_wait(word.as_ptr().cast(), 0, u32::MAX.into(), 0x82, &at, libc::CLOCK_MONOTONIC) };
    r == -1 && common::errno() == libc::ETIMEDOUT
}

extern "C" fn on_signal(_sig: libc::c_int) {
    let outcome = match ACTION.get() {
        Action::Wait { through_c } => usize::from(timed_out(through_c)),
        Action::Wake { domain, word } => {
            // SAFETY: the test that set them keeps the domain and the word alive until the
            // signal it raises has been handled.
            let (domain, word) = unsafe { (&*domain, &*word) };
            word.store(1, Ordering::SeqCst);
            domain.wake(word, 1)
        }
    };
    OUTCOME.set(Some(outcome));
}

/// The handler installed (the same for every test), and the process's first waits made.
fn setup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Growing the default table with the threads may allocate (`thread.rs`): fixed here.
        Domain::default_domain().set_slots(Slots::Fixed(64)).unwrap();
        assert!(timed_out(false) && timed_out(true), "the process's first waits");
        // SAFETY: an all-zero `sigaction` is a valid start (no flags, empty mask); `on_signal`
        // is the handler under test; `sa` outlives the call, and a null old action is allowed.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
    });
}

/// What a handler's action did on top of an allocation.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// A wait: 1 if it timed out; a wake: how many it woke.
    returned: usize,
    /// Allocations and frees it made.
    allocations: usize,
    /// TLS destructors it registered.
    tls_destructors: usize,
}

/// On this thread: raise the signal from inside an allocation, with `action` for the handler.
fn in_the_allocator(action: Action) -> Outcome {
    ACTION.set(action);
    OUTCOME.set(None);
    REENTERED.set(0);
    TLS_DTORS.set(0);
    RAISE.set(true);
    // The allocation the signal interrupts.
    drop(std::hint::black_box(Vec::<u8>::with_capacity(64)));
    assert!(!RAISE.get(), "the allocator raised the signal");
    let returned = OUTCOME.get().expect("the handler ran");
    Outcome { returned, allocations: REENTERED.get(), tls_destructors: TLS_DTORS.get() }
}

#[test]
fn a_handlers_first_wait_inside_the_allocator_allocates_nothing() {
    setup();
    for through_c in [false, true] {
        // A new thread: its first wait.
        let wait = move || in_the_allocator(Action::Wait { through_c });
        let outcome = std::thread::spawn(wait).join().unwrap();
        let timed_out = Outcome { returned: 1, allocations: 0, tls_destructors: 0 };
        let api = if through_c { "the C ABI" } else { "the Rust API" };
        assert_eq!(outcome, timed_out, "{api}: the handler's first wait timed out, nothing allocated");
    }
}

/// Threads held at once (each keeping its node's slot) in the test below: past the node pool's
/// slots of two chunks (512 each), so that at least one of their first waits makes a chunk
/// whatever the pool held before.
const HELD: usize = 2 * 512 + 1;

#[test]
fn first_waits_that_grow_the_node_pool_inside_the_allocator_allocate_nothing() {
    setup();
    // The held threads sleep in a domain of their own, so that they can be counted.
    let domain = Domain::new(DomainConfig::new().slots(Slots::Fixed(16))).unwrap();
    let release = AtomicU32::new(0);
    let outcomes = std::thread::scope(|s| {
        let mut held = Vec::with_capacity(HELD);
        for i in 0..HELD {
            let (release, domain) = (&release, &domain);
            let thread = std::thread::Builder::new().stack_size(256 << 10).spawn_scoped(s, move || {
                let outcome = in_the_allocator(Action::Wait { through_c: i % 2 == 1 });
                // Keep the slot: the thread's data (and its node) lives until it exits.
                while release.load(Ordering::SeqCst) == 0 {
                    let _ = domain.wait(release, 0, None);
                }
                outcome
            });
            held.push(thread.expect("a thread"));
            // One at a time: each first wait finds the slots of the ones before still taken.
            common::await_queued(domain, i + 1);
        }
        release.store(1, Ordering::SeqCst);
        domain.wake(&release, usize::MAX);
        held.into_iter().map(|t| t.join().unwrap()).collect::<Vec<_>>()
    });
    let timed_out = Outcome { returned: 1, allocations: 0, tls_destructors: 0 };
    for (i, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome, &timed_out, "thread {i}: its handler's first wait timed out, nothing allocated");
    }
}

#[test]
fn a_handlers_wake_inside_the_allocator_allocates_nothing() {
    setup();
    let domain = Domain::new(DomainConfig::new().slots(Slots::Fixed(16))).unwrap();
    let word = AtomicU32::new(0);
    std::thread::scope(|s| {
        let sleeper = s.spawn(|| {
            while word.load(Ordering::SeqCst) == 0 {
                let _ = domain.wait(&word, 0, None);
            }
        });
        common::await_queued(&domain, 1);
        let wake = Action::Wake { domain: &domain, word: &word };
        let woke_one = Outcome { returned: 1, allocations: 0, tls_destructors: 0 };
        assert_eq!(in_the_allocator(wake), woke_one, "the handler's wake woke the sleeper, nothing allocated");
        sleeper.join().unwrap();
    });
}
