//! Helpers shared by the integration tests: knowing that threads are asleep by observing the
//! queues (never by timing), a watchdog that turns a hang into a clear failure, the lock that
//! serialises tests using the process default domain, and a tiny deterministic PRNG.
#![allow(dead_code)] // each test binary uses a different subset

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};
use ufutex::{Domain, DomainConfig, Slots};

/// How long an observation may take before the test declares a hang. Generous: this is a cap
/// against a lost wakeup or a deadlock, not a performance expectation.
pub const CAP: Duration = Duration::from_secs(60);

/// Poll `cond` (with a short sleep between looks) until it holds; panic with `what` after
/// [`CAP`].
pub fn await_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < CAP, "gave up after {CAP:?} waiting for: {what}");
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Wait until exactly `n` waiters are queued in `d` (an observation: `queued_waiters` walks
/// every bucket under its lock).
pub fn await_queued(d: &Domain, n: usize) {
    let start = Instant::now();
    loop {
        let q = d.queued_waiters();
        if q == n {
            return;
        }
        assert!(start.elapsed() < CAP, "expected {n} queued waiters, still {q} after {CAP:?}");
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Wake the sleepers of `w` (counted in `returned` as they return) in `steps` of (how many
/// to wake, how many stay queued after), `total` sleepers in all: each wake takes exactly its
/// count, those woken return, and the others stay queued and do not return — a wake that rings
/// a bell wakes them too in the kernel, and they must sleep again.
pub fn wake_in_steps(d: &Domain, w: &AtomicU32, returned: &AtomicUsize, total: usize, steps: &[(usize, usize)]) {
    // Let them get past their spin into the kernel (no assertion depends on it).
    std::thread::sleep(Duration::from_millis(20));
    let mut woken = 0;
    for &(n, left) in steps {
        assert_eq!(d.wake(w, n), n.min(total - woken));
        woken += n.min(total - woken);
        await_until("the woken waiters return", || returned.load(Ordering::SeqCst) == woken);
        assert_eq!(d.queued_waiters(), left, "the waiters not taken are still queued");
        // Room for a waiter that was rung but not taken to return by mistake.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(returned.load(Ordering::SeqCst), woken, "only the waiters taken returned");
    }
}

/// A fresh private domain with `n` buckets (2 forces collisions between keys).
pub fn fixed(n: usize) -> Domain {
    Domain::new(DomainConfig::new().slots(Slots::Fixed(n))).expect("a small fixed domain")
}

/// A fresh private domain with automatic sizing.
pub fn auto() -> Domain {
    Domain::new(DomainConfig::new()).expect("an automatic domain")
}

/// Tests that use the process default domain (the free functions) take this lock, so that
/// `Domain::default_domain().queued_waiters()` counts their waiters only.
pub fn default_domain_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Abort the whole test binary with a message if it is still running after `secs` (plus the
/// stress duration): a hung wait then fails CI loudly instead of timing it out silently.
pub fn watchdog() {
    static START: Once = Once::new();
    START.call_once(|| {
        let secs = 180 + stress_secs();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            eprintln!("watchdog: test binary still running after {secs} s — a wait hung (lost wakeup?)");
            std::process::abort();
        });
    });
}

/// `UFUTEX_STRESS_SECS`, or 2 when unset (the normal test run; CI sets 10).
pub fn stress_secs() -> u64 {
    std::env::var("UFUTEX_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2)
}

/// The last errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// CLOCK_MONOTONIC `d` from now, for a C entry's absolute timeout.
pub fn monotonic_in(d: Duration) -> libc::timespec {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let nsec = now.tv_nsec + i64::from(d.subsec_nanos());
    libc::timespec { tv_sec: now.tv_sec + d.as_secs() as i64 + nsec / 1_000_000_000, tv_nsec: nsec % 1_000_000_000 }
}

/// What a [`watched_stress`] counted: waits that returned woken, waiters that the library's
/// wakes counted, waits that saw a change (`EAGAIN`).
pub struct Watched {
    pub woken: u64,
    pub counted: u64,
    pub changed: u64,
}

/// A stress of the preload library's watched waits, for [`stress_secs`]: three threads run
/// `wait` (with its own `Rng`) until stopped — `Ok` counts as woken, `EAGAIN` as a change, any
/// other errno fails the test (110, its deadline: a lost wakeup) — while two run `wake`, which
/// returns how many waiters the library's wake counted (0 for the kernel's). Then `kick` (a
/// change and a kernel wake of every word) until every waiter came home; fails if one does not
/// within 30 s.
pub fn watched_stress(
    seed: u64,
    wait: impl Fn(&mut Rng) -> Result<(), i32> + Sync,
    wake: impl Fn(&mut Rng) -> u64 + Sync,
    mut kick: impl FnMut(),
) -> Watched {
    use std::sync::atomic::AtomicU64;
    const WAITERS: u64 = 3;
    let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
    let (woken, counted, changed) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for t in 0..WAITERS {
            let (wait, stop, done, woken, changed) = (&wait, &stop, &done, &woken, &changed);
            s.spawn(move || {
                let mut rng = Rng::new(seed + t);
                while !stop.load(Ordering::Relaxed) {
                    match wait(&mut rng) {
                        Ok(()) => _ = woken.fetch_add(1, Ordering::Relaxed),
                        Err(libc::EAGAIN) => _ = changed.fetch_add(1, Ordering::Relaxed),
                        Err(e) => panic!("a watched wait ended with errno {e} (110: a lost wakeup)"),
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for t in 0..2 {
            let (wake, stop, counted) = (&wake, &stop, &counted);
            s.spawn(move || {
                let mut rng = Rng::new(!seed - t);
                while !stop.load(Ordering::Relaxed) {
                    counted.fetch_add(wake(&mut rng), Ordering::Relaxed);
                    for _ in 0..rng.below(64) {
                        std::hint::spin_loop();
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_secs(stress_secs()));
        stop.store(true, Ordering::SeqCst);
        let give_up = Instant::now() + Duration::from_secs(30);
        while done.load(Ordering::SeqCst) < WAITERS {
            assert!(Instant::now() < give_up, "a waiter never came home");
            kick();
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    Watched { woken: woken.into_inner(), counted: counted.into_inner(), changed: changed.into_inner() }
}

/// Sets the flag when dropped: helper threads looping on it stop even if the test panics
/// (otherwise a failed assertion would hang the thread scope instead of failing).
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Adds one to the counter when dropped: "this thread is done", even if it panicked.
pub struct CountOnDrop<'a>(pub &'a AtomicUsize);

impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// xorshift64*: deterministic per seed, good enough to pick operations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Point this test process (and the processes it starts) at a shared table of its own, in a
/// fresh 0700 directory, so that tests never touch the user's real table nor each other's.
/// Must run before the first shared operation; the directory is removed when the returned
/// guard drops (at the end of the test).
pub fn isolated_shared_table() -> TableDir {
    let dir = std::env::temp_dir().join(format!("ufutex-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::env::set_var("UFUTEX_SHARED_DIR", &dir);
    TableDir(dir)
}

/// A test's shared table directory, removed on drop (the mapping lives on; nothing opens the
/// file again).
pub struct TableDir(std::path::PathBuf);

impl Drop for TableDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// Processes and shared memory, for the process-shared tests.

/// Tests of one binary whose children change the environment (`std::env::set_var`) hold this
/// for their whole run, so that no other test's thread is inside std's environment lock (reading
/// `TMPDIR` for `std::env::temp_dir()`, say) when one of them forks: the child would inherit the
/// lock held by a thread it does not have, and its `set_var` would wait forever (seen under
/// qemu-user, where the window is wide: a child asleep on the lock's futex word for minutes).
pub fn env_fork_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run `f` in a child process; its exit status is `f`'s value. The child has only the forking
/// thread, so `f` must not need a lock that another thread may have held at the fork (std's
/// environment lock is one: [`env_fork_lock`]).
pub fn child(f: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child runs `f` and exits without returning into the harness.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(99);
            // SAFETY: ends the child at once, without running the parent's atexit handlers.
            unsafe { libc::_exit(code) }
        }
        pid => pid,
    }
}

/// [`child`], made with glibc's `_Fork`, which runs no `pthread_atfork` handler (ours
/// included): the child is told by the library's fork mark alone (`fork.rs`).
pub fn raw_child(f: impl FnOnce() -> i32) -> libc::pid_t {
    extern "C" {
        // glibc 2.34 and later.
        fn _Fork() -> libc::pid_t;
    }
    // SAFETY: as `child`'s fork; the caller's other threads hold nothing the child needs
    // (they sleep in waits).
    match unsafe { _Fork() } {
        -1 => panic!("_Fork: {}", std::io::Error::last_os_error()),
        0 => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(99);
            // SAFETY: ends the child at once, without running the parent's atexit handlers.
            unsafe { libc::_exit(code) }
        }
        pid => pid,
    }
}

/// Reap `pid`, killing it if it has not exited within `limit` (a hang): its exit status (a
/// signal is -signal), or `None` if it hung.
pub fn reap_within(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let t = Instant::now();
    loop {
        let mut st = 0;
        // SAFETY: `st` is a valid out-pointer; `pid` is our child.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
        if r == pid {
            return Some(if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { -libc::WTERMSIG(st) });
        }
        if t.elapsed() > limit {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            reap(pid);
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The child's exit status (a signal is -signal).
pub fn reap(pid: libc::pid_t) -> i32 {
    let mut st = 0;
    // SAFETY: `st` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else {
        -libc::WTERMSIG(st)
    }
}

pub fn map(len: usize, flags: i32, fd: i32, off: i64) -> *mut u8 {
    // SAFETY: a fresh mapping; nothing else refers to it.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, off) };
    assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
    p as *mut u8
}

pub fn shared_anon(len: usize) -> *mut u8 {
    map(len, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
}

pub fn memfd(len: usize) -> i32 {
    // SAFETY: a literal name; a fresh memfd.
    let fd = unsafe { libc::memfd_create(c"ufx-test".as_ptr(), 0) };
    assert!(fd >= 0);
    // SAFETY: `fd` is ours.
    assert_eq!(unsafe { libc::ftruncate(fd, len as i64) }, 0);
    fd
}

/// # Safety
/// `p` is mapped, aligned for `T`, and stays mapped for `'static` (test mappings never go).
pub unsafe fn at<T>(p: *mut u8, off: usize) -> &'static T {
    // SAFETY: as the function's contract.
    unsafe { &*(p.add(off) as *const T) }
}

/// Wake `word` until one waiter was woken (the child may not have queued yet); panics after
/// [`CAP`].
pub fn wake_until_one(wake: impl Fn() -> Result<usize, ufutex::shared::SharedError>) {
    let t = Instant::now();
    loop {
        match wake() {
            Ok(1) => return,
            Ok(0) => {}
            other => panic!("wake: {other:?}"),
        }
        assert!(t.elapsed() < CAP, "no waiter arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Threads of this process waiting on shared words, one per `(word, returned)` pair: each waits
/// while its word holds 0 (for at most `limit`) and adds 1 to its `returned` when woken. 0 if
/// every one was woken, 1 if one timed out, 2 on another error (the highest over the threads).
pub fn shared_waiters(pairs: Vec<(&'static AtomicU32, &'static AtomicU32)>, limit: Duration) -> i32 {
    std::thread::scope(|s| {
        let ts: Vec<_> = pairs
            .into_iter()
            .map(|(word, returned)| {
                s.spawn(move || match ufutex::shared::wait(word, 0, deadline(limit)) {
                    Ok(()) => {
                        returned.fetch_add(1, Ordering::Relaxed);
                        0
                    }
                    Err(ufutex::shared::SharedError::TimedOut) => 1,
                    Err(_) => 2,
                })
            })
            .collect();
        ts.into_iter().map(|t| t.join().unwrap_or(99)).max().unwrap_or(0)
    })
}

/// How many waiters are queued on the shared word `w` (a requeue onto itself counts them,
/// keeping their order).
#[allow(dead_code)] // (each test binary uses part of this module)
pub fn shared_queued(w: &AtomicU32) -> usize {
    ufutex::shared::requeue(w, 0, w, 0, usize::MAX).unwrap()
}

/// Wait until exactly `n` waiters are queued on the shared word `w` ([`shared_queued`]); past
/// `until`, panic with `what()` and the count last seen.
pub fn await_shared_queued(w: &AtomicU32, n: usize, until: Instant, what: impl Fn() -> String) {
    loop {
        let queued = shared_queued(w);
        if queued == n {
            return;
        }
        assert!(Instant::now() < until, "{}: {queued} of {n} waiters queued", what());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether process `pid` (one thread) comes to sleep in `futex_waitv` within `patience`: its
/// `/proc` state `S` and its `/proc/<pid>/syscall` naming the call. `false` where the file cannot
/// be read or the process never does (a kernel or an emulator without `futex_waitv`).
#[allow(dead_code)] // (each test binary uses part of this module)
pub fn sleeps_in_waitv(pid: libc::pid_t, patience: Duration) -> bool {
    const SYS_FUTEX_WAITV: &str = "449";
    let t = Instant::now();
    while t.elapsed() < patience {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
        let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if state == Some('S') && call.split_whitespace().next() == Some(SYS_FUTEX_WAITV) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// A deadline `d` from now (the shared and named tests' waits are all bounded).
pub fn deadline(d: Duration) -> Option<ufutex::Deadline> {
    Some(d.into())
}

/// A deadline for a wait that queues (claiming a process slot and records, for a shared wait)
/// and then times out soon: 1 ms. (A deadline already passed queues nothing.)
pub fn brief() -> Option<ufutex::Deadline> {
    deadline(Duration::from_millis(1))
}

/// Run `f` in a child armed by the fault-injection hook to die (SIGKILL) at `point` of the
/// shared table's code; it must die there.
pub fn dies_at(point: &str, f: impl FnOnce() -> i32) {
    std::env::set_var("UFUTEX_SHARED_DIE_AT", point);
    let pid = child(f);
    std::env::remove_var("UFUTEX_SHARED_DIE_AT");
    assert_eq!(reap(pid), -libc::SIGKILL, "the child did not reach {point}");
}

/// A 32-bit word in a shared anonymous page: the children a test forks see it too.
#[allow(dead_code)] // (each test binary uses part of this module)
pub fn shared_word() -> &'static AtomicU32 {
    let p = shared_anon(4096);
    // SAFETY: a live page-aligned mapping, never unmapped.
    unsafe { at(p, 0) }
}

/// The C ABI's `FUTEX_WAKE_OP` on two process-shared 32-bit words, `op` as `linux/futex.h`
/// encodes it: how many it woke, or its errno.
pub fn shared_wake_op(a: &AtomicU32, b: &AtomicU32, n1: i32, n2: i32, op: u32) -> Result<usize, i32> {
    wake_op_flags(a, b, n1, n2, op, 0)
}

/// [`shared_wake_op`] on two process-private words (the default domain's tables).
#[allow(dead_code)]
pub fn private_wake_op(a: &AtomicU32, b: &AtomicU32, n1: i32, n2: i32, op: u32) -> Result<usize, i32> {
    wake_op_flags(a, b, n1, n2, op, 0x80) // UFUTEX_PRIVATE
}

/// `FUTEX_WAKE_OP`'s `op` word: `op` on the second word with `oparg`, its old value compared by
/// `cmp` with `cmparg` (`FUTEX_OP` of `linux/futex.h`).
#[allow(dead_code)]
pub const fn futex_op(op: u32, oparg: u32, cmp: u32, cmparg: u32) -> u32 {
    (op & 0xf) << 28 | (cmp & 0xf) << 24 | (oparg & 0xfff) << 12 | (cmparg & 0xfff)
}

/// `FUTEX_OP_ADD`, and the comparisons `FUTEX_OP_CMP_EQ`, `_LT` and `_GE` (`linux/futex.h`).
#[allow(dead_code)]
pub const OP_ADD: u32 = 1;
#[allow(dead_code)]
pub const CMP_EQ: u32 = 0;
#[allow(dead_code)]
pub const CMP_LT: u32 = 2;
#[allow(dead_code)]
pub const CMP_GE: u32 = 5;

/// The C ABI's `FUTEX_WAKE_OP` on two 32-bit words, `extra` added to the flags.
fn wake_op_flags(a: &AtomicU32, b: &AtomicU32, n1: i32, n2: i32, op: u32, extra: libc::c_uint) -> Result<usize, i32> {
    // futex2's FUTEX2_SIZE_U32 (process-shared without `extra`'s UFUTEX_PRIVATE).
    const U32: libc::c_uint = 0x02;
    // SAFETY: both words are aligned u32s, borrowed for the call.
    let n = unsafe { ufutex::preload::ufutex_wake_op(a.as_ptr().cast(), b.as_ptr().cast(), n1, n2, op, U32 | extra) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// Wait until `w` holds `v` (another process or thread sets it); panics after [`CAP`].
#[allow(dead_code)]
pub fn await_value(w: &AtomicU32, v: u32) {
    await_until(&format!("a shared word to hold {v}"), || w.load(Ordering::SeqCst) == v);
}

/// Two processes pass a token through a shared word: each takes it when it is `mine` (mod 2),
/// counts a round and passes it on, until `stop`. Its waits have a 10 s deadline that must
/// never expire: 3 if one did (a lost wakeup), 10 + errno on an unexpected error, else 0. A wait
/// that expires once `stop` is set counts as ended by it, unless `strict` (then the stopper must
/// change the token and wake, and a holder that misses that wake fails too).
#[allow(dead_code)]
pub fn pass_token(
    token: &AtomicU32,
    stop: &AtomicU32,
    rounds: &std::sync::atomic::AtomicU64,
    mine: u32,
    strict: bool,
) -> i32 {
    use ufutex::shared::{self, SharedError};
    loop {
        let t = token.load(Ordering::Acquire);
        if stop.load(Ordering::Relaxed) != 0 {
            return 0;
        }
        if t % 2 != mine {
            match shared::wait(token, t, deadline(Duration::from_secs(10))) {
                Ok(()) | Err(SharedError::WouldBlock) => continue,
                Err(SharedError::TimedOut) if !strict && stop.load(Ordering::Relaxed) != 0 => return 0,
                Err(SharedError::TimedOut) => return 3,
                Err(e) => return 10 + e.errno(),
            }
        }
        token.store(t + 1, Ordering::Release);
        rounds.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = shared::wake(token, 1) {
            return 10 + e.errno();
        }
    }
}

/// Kill one of `workers` (our children) at random every 0–3 ms and start a new one with
/// `spawn`, for `secs` seconds; then kill them all. How many were killed; each must have died of
/// the kill (a worker that ended on its own failed).
#[allow(dead_code)]
pub fn kill_at_random(workers: &mut [libc::pid_t], secs: f64, seed: u64, spawn: impl Fn() -> libc::pid_t) -> u32 {
    let (start, mut kills, mut r) = (Instant::now(), 0u32, Rng::new(seed));
    while start.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_micros(r.next() % 3000));
        let i = (r.next() % workers.len() as u64) as usize;
        // SAFETY: our own child.
        unsafe { libc::kill(workers[i], libc::SIGKILL) };
        let st = reap(workers[i]);
        assert_eq!(st, -libc::SIGKILL, "a worker failed on its own: {st}");
        kills += 1;
        workers[i] = spawn();
    }
    for &pid in workers.iter() {
        // SAFETY: our own children.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
    }
    kills
}
