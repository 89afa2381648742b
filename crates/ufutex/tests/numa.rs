//! NUMA pairs on forced virtual nodes: every operation (a wake of 0 and a wait that fails
//! `WouldBlock` included) replaces a node word of -1 by the caller's node and writes it back;
//! a node word naming no node fails `EINVAL` before anything is queued or woken; pairs are
//! aligned to twice the word size; waiters on different nodes do not meet unless the node word
//! says so; requeue moves waiters between node tables; a memory policy's node is used where
//! one covers the word (`mpol`), with what `get_mempolicy` really reports on this machine.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::thread;
use std::time::Duration;
use ufutex::{Domain, DomainConfig, NumaError, NumaFutex, NumaWaitEntry, NumaWord, Slots, WaitError};

const NODES: usize = 4;

fn numa_domain() -> Domain {
    Domain::new(DomainConfig::new().virtual_nodes(NODES).slots(Slots::Fixed(4))).unwrap()
}

/// Pin the calling thread to one CPU it may run on; returns that CPU (its virtual node is
/// `cpu % NODES`).
fn pin() -> usize {
    // SAFETY: the cpu_set_t is zeroed plain data, filled and read by the kernel through valid
    // pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set), 0);
        let cpu = (0..libc::CPU_SETSIZE as usize).rev().find(|&c| libc::CPU_ISSET(c, &set)).expect("some CPU");
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one), 0);
        cpu
    }
}

fn soon() -> Option<ufutex::Deadline> {
    Some(Duration::from_millis(1).into())
}

/// Every operation writes the caller's node over -1, at every word size.
#[test]
fn every_operation_writes_the_node_back() {
    fn check<F: NumaWord>(d: &Domain, node: u64, load: impl Fn(&NumaFutex<F>) -> u64, zero: F::Value, one: F::Value)
    where
        F::Value: Copy,
    {
        let fresh = || NumaFutex::<F>::new(zero);
        let no_node = load(&fresh());
        let expect = |f: &NumaFutex<F>, what: &str| assert_eq!(load(f), node, "{what}: node written back");
        assert_eq!(no_node, u64::MAX >> (64 - 8 * std::mem::size_of::<F>()), "-1 at the width");

        let f = fresh();
        assert_eq!(d.wake_numa(&f, 0), Ok(0));
        expect(&f, "wake of 0");
        let f = fresh();
        assert_eq!(d.wake_bitset_numa(&f, 3, 0b1), Ok(0));
        expect(&f, "wake_bitset");
        let f = fresh();
        assert_eq!(d.wait_numa(&f, one, None), Err(NumaError::Wait(WaitError::WouldBlock)));
        expect(&f, "wait that fails WouldBlock");
        let f = fresh();
        assert_eq!(d.wait_numa(&f, zero, soon()), Err(NumaError::Wait(WaitError::TimedOut)));
        expect(&f, "wait that times out");
        let (a, b) = (fresh(), fresh());
        assert_eq!(d.requeue_numa(&a, one, &b, 1, 1), Err(NumaError::Wait(WaitError::WouldBlock)));
        expect(&a, "requeue source");
        expect(&b, "requeue target");
        let (a, b) = (fresh(), fresh());
        let entries = [NumaWaitEntry::new(&a, zero), NumaWaitEntry::new(&b, one)];
        assert_eq!(d.waitv_numa(&entries, None), Err(NumaError::Wait(WaitError::WouldBlock)));
        expect(&a, "waitv entry 0");
        expect(&b, "waitv entry 1");
        // A node already there is kept.
        let f = NumaFutex::<F>::with_node(zero, one);
        assert_eq!(d.wake_numa(&f, 1), Ok(0));
        assert_eq!(load(&f), 1);
        assert_eq!(d.queued_waiters(), 0);
    }
    let d = numa_domain();
    let node = (pin() % NODES) as u64;
    check::<AtomicU8>(&d, node, |f| f.node().load(Ordering::SeqCst).into(), 0, 1);
    check::<AtomicU16>(&d, node, |f| f.node().load(Ordering::SeqCst).into(), 0, 1);
    check::<AtomicU32>(&d, node, |f| f.node().load(Ordering::SeqCst).into(), 0, 1);
    check::<AtomicU64>(&d, node, |f| f.node().load(Ordering::SeqCst), 0, 1);
}

/// A node word naming no node fails with `InvalidNode` (errno `EINVAL`) in every operation,
/// before the value is compared, and leaves the word, the node word and the queues alone. A
/// domain without NUMA refuses NUMA pairs (`EOPNOTSUPP`).
#[test]
fn an_impossible_node_is_einval() {
    let d = numa_domain();
    for bad in [NODES as u32, 5, 1000, u32::MAX - 1] {
        let f = NumaFutex::<AtomicU32>::with_node(7, bad);
        let good = NumaFutex::<AtomicU32>::with_node(7, 0);
        let e = NumaError::InvalidNode(bad.into());
        assert_eq!(e.errno(), libc::EINVAL);
        assert_eq!(d.wake_numa(&f, 0), Err(e));
        assert_eq!(d.wake_numa(&f, usize::MAX), Err(e));
        assert_eq!(d.wait_numa(&f, 7, None), Err(e), "no sleep: the node is checked first");
        assert_eq!(d.wait_numa(&f, 8, None), Err(e), "EINVAL before EAGAIN");
        assert_eq!(d.requeue_numa(&f, 7, &good, 1, 1), Err(e));
        assert_eq!(d.requeue_numa(&good, 7, &f, 1, 1), Err(e));
        let entries = [NumaWaitEntry::new(&good, 7), NumaWaitEntry::new(&f, 7)];
        assert_eq!(d.waitv_numa(&entries, None), Err(e), "resolved before anything is queued");
        assert_eq!((f.word().load(Ordering::SeqCst), f.node().load(Ordering::SeqCst)), (7, bad));
    }
    // u8 pairs: 0xFF is "no node", 0xFE is an impossible node.
    let f = NumaFutex::<AtomicU8>::with_node(0, 0xFE);
    assert_eq!(d.wake_numa(&f, 1), Err(NumaError::InvalidNode(0xFE)));
    assert_eq!(d.queued_waiters(), 0);

    let plain = Domain::new(DomainConfig::new()).unwrap();
    let f = NumaFutex::<AtomicU32>::new(0);
    assert_eq!(plain.wake_numa(&f, 1), Err(NumaError::NotNuma));
    assert_eq!(NumaError::NotNuma.errno(), libc::EOPNOTSUPP);
    assert_eq!(f.node().load(Ordering::SeqCst), u32::MAX, "untouched");
}

/// The pair layout of `UFUTEX_NUMA`: the node word right after the word, the pair aligned to
/// twice the word's size, at every size, also inside other structures.
#[test]
fn pairs_are_aligned_to_twice_the_size() {
    fn check<F: NumaWord>(f: &NumaFutex<F>) {
        let size = std::mem::size_of::<F>();
        let (w, n) = (f.word() as *const F as usize, f.node() as *const F as usize);
        assert_eq!(n, w + size);
        assert_eq!(w % (2 * size), 0);
        assert_eq!(std::mem::size_of::<NumaFutex<F>>(), 2 * size);
        assert_eq!(std::mem::align_of::<NumaFutex<F>>(), 2 * size);
    }
    #[repr(C)]
    struct Packed {
        _pad: u8,
        a: NumaFutex<AtomicU8>,
        b: NumaFutex<AtomicU16>,
        c: NumaFutex<AtomicU32>,
        d: NumaFutex<AtomicU64>,
    }
    let p = Packed { _pad: 0, a: NumaFutex::new(0), b: NumaFutex::new(0), c: NumaFutex::new(0), d: NumaFutex::new(0) };
    check(&p.a);
    check(&p.b);
    check(&p.c);
    check(&p.d);
}

/// A waiter queued on node 0 is not met by a wake through node 1 (the same address, another
/// table), nor by a plain wake of the word; once the node word says 0 again, the wake meets it.
#[test]
fn different_nodes_do_not_meet_unless_the_node_word_says_so() {
    let d = numa_domain();
    let f = NumaFutex::<AtomicU32>::with_node(0, 0);
    thread::scope(|s| {
        let waiter = s.spawn(|| d.wait_numa(&f, 0, None));
        while d.queued_waiters() == 0 {
            thread::yield_now();
        }
        f.node().store(1, Ordering::SeqCst);
        assert_eq!(d.wake_numa(&f, usize::MAX), Ok(0), "node 1's table holds nobody");
        assert_eq!(d.wake(f.word(), usize::MAX), 0, "the plain table holds nobody");
        f.node().store(u32::MAX, Ordering::SeqCst);
        let mine = d.wake_numa(&f, usize::MAX);
        let node = f.node().load(Ordering::SeqCst);
        assert_eq!(mine, Ok(usize::from(node == 0)), "-1 resolved to this thread's node {node}");
        if node != 0 {
            f.node().store(0, Ordering::SeqCst);
            assert_eq!(d.wake_numa(&f, usize::MAX), Ok(1));
        }
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    // A plain waiter is not met by a NUMA wake of the same word either.
    let g = NumaFutex::<AtomicU32>::with_node(0, 2);
    thread::scope(|s| {
        let waiter = s.spawn(|| d.wait(g.word(), 0, None));
        while d.queued_waiters() == 0 {
            thread::yield_now();
        }
        assert_eq!(d.wake_numa(&g, usize::MAX), Ok(0));
        assert_eq!(d.wake(g.word(), usize::MAX), 1);
        assert_eq!(waiter.join().unwrap(), Ok(()));
    });
    assert_eq!(d.queued_waiters(), 0);
}

/// Requeue across nodes: waiters of a pair on node 1 move to a pair on node 3 (another table),
/// in order, behind its own waiter; they are then woken through the target only, and a resize
/// of every node's table in between loses none of them.
#[test]
fn requeue_moves_waiters_across_nodes() {
    let d = numa_domain();
    let (from, to) = (NumaFutex::<AtomicU64>::with_node(0, 1), NumaFutex::<AtomicU64>::with_node(0, 3));
    thread::scope(|s| {
        let on_to = s.spawn(|| d.wait_numa(&to, 0, None));
        while d.queued_waiters() < 1 {
            thread::yield_now();
        }
        let on_from: Vec<_> = (0..3).map(|_| s.spawn(|| d.wait_numa(&from, 0, None))).collect();
        while d.queued_waiters() < 4 {
            thread::yield_now();
        }
        assert_eq!(d.requeue_numa(&from, 1, &to, 0, 3), Err(NumaError::Wait(WaitError::WouldBlock)));
        assert_eq!(d.requeue_numa(&from, 0, &to, 0, 3), Ok(3));
        assert_eq!(d.wake_numa(&from, usize::MAX), Ok(0), "nobody left on the source");
        d.set_slots(Slots::Fixed(64)).unwrap();
        d.set_slots(Slots::Fixed(2)).unwrap();
        assert_eq!(d.queued_waiters(), 4);
        // The target's first waiter is its own, then the moved ones.
        assert_eq!(d.wake_numa(&to, 1), Ok(1));
        assert_eq!(on_to.join().unwrap(), Ok(()));
        assert_eq!(d.wake_numa(&to, usize::MAX), Ok(3));
        for t in on_from {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
    });
    assert_eq!(d.queued_waiters(), 0);
    assert_eq!(d.tables_in_use(), 3, "the plain table and nodes 1 and 3");
}

/// Node tables are made on first use and resized with the domain; repeated resizes with node
/// tables in use do not grow memory.
#[test]
fn node_tables_follow_the_domain_size() {
    let d = numa_domain();
    assert_eq!(d.tables_in_use(), 1);
    let pairs: Vec<NumaFutex<AtomicU32>> = (0..NODES as u32).map(|n| NumaFutex::with_node(0, n)).collect();
    for p in &pairs {
        d.wake_numa(p, 1).unwrap();
        let _ = d.wait_numa(p, 0, Some(Duration::from_millis(1).into())); // queues: its node's table
    }
    assert_eq!(d.tables_in_use(), 1 + NODES);
    for s in [Slots::Fixed(2), Slots::Fixed(32), Slots::Large, Slots::Fixed(4)] {
        d.set_slots(s).unwrap();
    }
    let footprint = d.memory_footprint();
    for i in 0..2000 {
        d.set_slots([Slots::Fixed(2), Slots::Fixed(32), Slots::Large, Slots::Fixed(4)][i % 4]).unwrap();
    }
    assert_eq!(d.memory_footprint(), footprint);
}

/// The machine's own topology (sysfs): node 0 exists, a node past the last does not, and a -1
/// node word becomes the node `getcpu` reports.
#[test]
fn real_topology_from_sysfs() {
    if std::env::var_os("UFUTEX_NUMA_NODES").is_some() {
        return; // forced virtual nodes: the sysfs topology is not in use
    }
    let online = std::fs::read_to_string("/sys/devices/system/node/possible").unwrap_or_else(|_| "0".into());
    let last: u32 = online.trim().rsplit([',', '-']).next().unwrap().parse().unwrap();
    let d = Domain::new(DomainConfig::new().numa(true)).unwrap();
    let f = NumaFutex::<AtomicU32>::new(0);
    assert_eq!(d.wake_numa(&f, 1), Ok(0));
    assert!(f.node().load(Ordering::SeqCst) <= last);
    let g = NumaFutex::<AtomicU32>::with_node(0, last + 1);
    assert_eq!(d.wake_numa(&g, 1), Err(NumaError::InvalidNode((last + 1).into())));
}

/// `mpol`: a word in memory with a preferred-node policy takes that node over the caller's;
/// a word without a policy takes the caller's node. Real `mbind` + `get_mempolicy` on this
/// machine's node 0; the caller is pinned to a CPU whose virtual node differs when it can be.
#[test]
fn a_memory_policy_node_wins_over_the_current_node() {
    let d = Domain::new(DomainConfig::new().virtual_nodes(NODES).mpol(true)).unwrap();
    let here = (pin() % NODES) as u32;
    let page = 4096;
    // SAFETY: a fresh anonymous mapping, ours until the munmap below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let mask: libc::c_ulong = 1; // node 0
                                 // SAFETY: the first page of our mapping; mask is 1 bit long (maxnode - 1 = 1... rounded).
    let r = unsafe {
        libc::syscall(libc::SYS_mbind, p, page, 1 /* MPOL_PREFERRED */, &mask, 2usize, 0u32)
    };
    if r != 0 {
        // SAFETY: our mapping.
        unsafe { libc::munmap(p, 2 * page) };
        eprintln!("mbind unsupported here ({}): nothing to check", std::io::Error::last_os_error());
        return;
    }
    // SAFETY: both pages are ours, aligned, zeroed; a NumaFutex of u32 is two u32 atomics.
    let (bound, unbound) = unsafe {
        let b = p.cast::<NumaFutex<AtomicU32>>();
        let u = p.cast::<u8>().add(page).cast::<NumaFutex<AtomicU32>>();
        b.write(NumaFutex::new(0));
        u.write(NumaFutex::new(0));
        (&*b, &*u)
    };
    assert_eq!(d.wake_numa(bound, 1), Ok(0));
    assert_eq!(bound.node().load(Ordering::SeqCst), 0, "the preferred node");
    assert_eq!(d.wake_numa(unbound, 1), Ok(0));
    assert_eq!(unbound.node().load(Ordering::SeqCst), here, "no policy: the caller's node");
    // An explicit node beats the policy.
    bound.node().store(2, Ordering::SeqCst);
    assert_eq!(d.wake_numa(bound, 1), Ok(0));
    assert_eq!(bound.node().load(Ordering::SeqCst), 2);
    // A bind policy without a home node names no node (the kernel's `futex_mpol`), even once
    // the word's page sits on node 0: the caller's node.
    // SAFETY: the second page of our mapping; the same mask.
    let r = unsafe {
        libc::syscall(libc::SYS_mbind, unbound as *const _ as usize, page, 2 /* MPOL_BIND */, &mask, 2usize, 0u32)
    };
    assert_eq!(r, 0, "mbind(MPOL_BIND): {}", std::io::Error::last_os_error());
    unbound.node().store(u32::MAX, Ordering::SeqCst);
    assert_eq!(d.wake_numa(unbound, 1), Ok(0));
    assert_eq!(unbound.node().load(Ordering::SeqCst), here, "bind, no home node: the caller's node");
    // SAFETY: nothing references the mapping any more.
    unsafe { libc::munmap(p, 2 * page) };
}

/// `UFUTEX_NUMA_NODES=N` (read once per process) makes a NUMA domain see N virtual nodes:
/// node N-1 is valid, node N is not. Checked when the variable is set (CI runs this file once
/// with it); without it the machine's topology is checked above.
#[test]
fn the_environment_forces_virtual_nodes() {
    let Some(n) = std::env::var("UFUTEX_NUMA_NODES").ok().and_then(|v| v.parse::<u32>().ok()) else {
        return;
    };
    let d = Domain::new(DomainConfig::new().numa(true)).unwrap();
    let last = NumaFutex::<AtomicU32>::with_node(0, n - 1);
    assert_eq!(d.wake_numa(&last, 1), Ok(0));
    let past = NumaFutex::<AtomicU32>::with_node(0, n);
    assert_eq!(d.wake_numa(&past, 1), Err(NumaError::InvalidNode(n.into())));
    let fresh = NumaFutex::<AtomicU32>::new(0);
    assert_eq!(d.wake_numa(&fresh, 0), Ok(0));
    assert!(fresh.node().load(Ordering::SeqCst) < n);
}
