//! The fast paths never enter the kernel: a wake with no waiters and a wait whose value differs
//! (private and process-shared, every front end: plain, bitset, waitv, the named semaphore)
//! run in a child process whose seccomp filter kills it (SIGSYS) on any futex system call or
//! `membarrier`. Everything that may rightly make a system call the first time (the thread's
//! data, the tables, the shared segment, the namespace) is done once before the filter.
#![cfg(not(ufutex_loom))]
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use common::{child, reap};
use std::sync::atomic::AtomicU32;
use ufutex::named::{Namespace, Open};
use ufutex::{shared, WaitEntry, WaitError};

/// The system calls a fast path must not make: futex (202), futex_waitv (449), futex_wake
/// (454), futex_wait (455), futex_requeue (456), membarrier (324).
const FORBIDDEN: [u32; 6] = [202, 449, 454, 455, 456, 324];
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// Kill this process on any of [`FORBIDDEN`] from now on (a classic BPF seccomp filter).
fn forbid_futex_syscalls() {
    let stmt = |code: u16, k: u32| libc::sock_filter { code, jt: 0, jf: 0, k };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter { code: 0x15, jt, jf, k }; // BPF_JMP|BPF_JEQ|BPF_K
    let (ld_abs, ret) = (0x20, 0x06); // BPF_LD|BPF_W|BPF_ABS, BPF_RET|BPF_K
    let (allow, kill) = (0x7fff_0000, 0x8000_0000); // SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS
    let n = FORBIDDEN.len() as u8;
    let mut prog = vec![stmt(ld_abs, 4), jeq(AUDIT_ARCH_X86_64, 1, 0), stmt(ret, kill), stmt(ld_abs, 0)];
    for (i, &nr) in FORBIDDEN.iter().enumerate() {
        // Equal: jump past the other comparisons and the ALLOW to the KILL.
        prog.push(jeq(nr, n - i as u8, 0));
    }
    prog.extend([stmt(ret, allow), stmt(ret, kill)]);
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
    // SAFETY: prctl with integer arguments; then seccomp reads the program, alive for the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(libc::syscall(libc::SYS_seccomp, 1 /* SET_MODE_FILTER */, 0, &fprog), 0);
    }
}

#[test]
fn wakes_without_waiters_and_failing_waits_make_no_futex_syscall() {
    let _dir = common::isolated_shared_table();
    let ns_name = format!("no-syscall-{}", std::process::id());
    let pid = child(|| {
        let private = AtomicU32::new(1);
        let sh = common::shared_word();
        sh.store(1, std::sync::atomic::Ordering::SeqCst);
        let ns = Namespace::open(&ns_name).expect("a namespace");
        let (sem, _) = ns.semaphore(7u64, Open::Create, 1).expect("a semaphore");
        // Once each before the filter: whatever is made on first use.
        let _ = ufutex::wait(&private, 0, None);
        let _ = ufutex::wake(&private, 1);
        let _ = shared::wait(sh, 0, None);
        let _ = shared::wake(sh, 1);
        let _ = sem.post(1);
        forbid_futex_syscalls();
        for _ in 0..1000 {
            assert_eq!(ufutex::wake(&private, 1), 0);
            assert_eq!(ufutex::wake_bitset(&private, usize::MAX, 0b1010), 0);
            assert_eq!(ufutex::wait(&private, 0, None), Err(WaitError::WouldBlock));
            assert_eq!(ufutex::wait_bitset(&private, 0, 1, None), Err(WaitError::WouldBlock));
            let v = [WaitEntry::new(&private, 1), WaitEntry::new(&private, 0)];
            assert_eq!(ufutex::waitv(&v, None), Err(WaitError::WouldBlock));
            assert_eq!(shared::wake(sh, 1), Ok(0));
            assert_eq!(shared::wait(sh, 0, None), Err(shared::SharedError::WouldBlock));
            assert_eq!(sem.post(1), Ok(()));
            assert_eq!(sem.try_wait(), Ok(true));
        }
        let _ = ns.remove(7u64);
        0
    });
    let status = reap(pid);
    let _ = Namespace::unlink(&ns_name);
    assert_ne!(status, -libc::SIGSYS, "a fast path made a futex or membarrier system call");
    assert_eq!(status, 0, "the child failed");
}
