//! NUMA topology: which node ids exist (sysfs, or N virtual nodes), the calling thread's node,
//! and the node a memory policy names for an address.
//!
//! Node count: `/sys/devices/system/node/possible` (the kernel accepts possible nodes), or N
//! virtual nodes with `UFUTEX_NUMA_NODES=N` (read once) or [`crate::DomainConfig::virtual_nodes`].
//! With virtual nodes the current node is the current CPU modulo N and tables are not bound.
//!
//! Memory policy (`mpol`), as the kernel's `futex_mpol`: the policy of the mapping that covers
//! the word (not the thread's); a `MPOL_PREFERRED` one gives its node. The kernel also takes a
//! `MPOL_BIND` / `MPOL_PREFERRED_MANY` policy's home node, which user space cannot read: those
//! give none here, as they do in the kernel without a home node.

use crate::once::Racy;

/// The most nodes a domain has (the kernel's `MAX_NUMNODES` at its largest).
pub(crate) const MAX_NODES: usize = 1024;

/// Which nodes exist, and whether they are the machine's (tables are then bound to them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    /// `valid[n]`: node id `n` may be named by a node word.
    valid: Vec<bool>,
    real: bool,
}

impl Topology {
    /// The process's topology: `UFUTEX_NUMA_NODES=N` virtual nodes, else the machine's.
    pub(crate) fn system() -> &'static Topology {
        static SYSTEM: Racy<Topology> = Racy::new();
        SYSTEM.get_or_init(|| {
            let forced = std::env::var("UFUTEX_NUMA_NODES").ok().and_then(|v| v.trim().parse::<usize>().ok());
            match forced {
                Some(n) if (1..=MAX_NODES).contains(&n) => Topology::virtual_nodes(n),
                _ => Topology::from_sysfs(),
            }
        })
    }

    /// `n` virtual nodes, 0..n.
    pub(crate) fn virtual_nodes(n: usize) -> Topology {
        Topology { valid: vec![true; n.clamp(1, MAX_NODES)], real: false }
    }

    pub(crate) fn from_sysfs() -> Topology {
        let read = |f: &str| std::fs::read_to_string(format!("/sys/devices/system/node/{f}")).ok();
        match read("possible").or_else(|| read("online")).and_then(|s| parse_node_list(&s)) {
            Some(valid) => Topology { valid, real: true },
            // No NUMA support in the kernel: one node, nothing to bind.
            None => Topology { valid: vec![true], real: false },
        }
    }

    /// Node ids run 0..count (some may be holes).
    pub(crate) fn count(&self) -> usize {
        self.valid.len()
    }

    pub(crate) fn is_real(&self) -> bool {
        self.real
    }

    pub(crate) fn is_valid(&self, node: u64) -> bool {
        usize::try_from(node).ok().and_then(|n| self.valid.get(n).copied()).unwrap_or(false)
    }

    /// The node the calling thread runs on.
    pub(crate) fn current_node(&self) -> u32 {
        let (cpu, node) = getcpu();
        if self.real && self.is_valid(node.into()) {
            node
        } else {
            cpu % self.count() as u32
        }
    }

    /// Map a node reported by the kernel (a memory policy's) into this topology.
    pub(crate) fn map_kernel_node(&self, node: u32) -> Option<u32> {
        match self.real {
            true => self.is_valid(node.into()).then_some(node),
            false => Some(node % self.count() as u32),
        }
    }
}

/// Parse a sysfs node list such as `0-3,5` into the set of ids; `None` if malformed or empty.
pub(crate) fn parse_node_list(s: &str) -> Option<Vec<bool>> {
    let mut valid = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?),
            None => {
                let n = part.trim().parse::<usize>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi >= MAX_NODES {
            return None;
        }
        if valid.len() <= hi {
            valid.resize(hi + 1, false);
        }
        valid[lo..=hi].iter_mut().for_each(|v| *v = true);
    }
    (!valid.is_empty()).then_some(valid)
}

/// The calling thread's (cpu, node).
fn getcpu() -> (u32, u32) {
    let (mut cpu, mut node) = (0u32, 0u32);
    // SAFETY: getcpu writes two u32s through valid pointers; the third argument is unused.
    let r = unsafe {
        libc::syscall(libc::SYS_getcpu, &mut cpu as *mut u32, &mut node as *mut u32, std::ptr::null_mut::<u8>())
    };
    if r == 0 {
        (cpu, node)
    } else {
        (0, 0)
    }
}

const MPOL_PREFERRED: i32 = 1;
const MPOL_F_ADDR: libc::c_ulong = 2;
/// Mode flags the kernel ORs into the mode (`MPOL_F_STATIC_NODES` and friends).
const MPOL_MODE_FLAGS: i32 = 0xff00;

/// The node a preferred memory policy of the mapping covering `addr` names, if any (the
/// kernel's `futex_mpol`).
///
/// The kernel also takes the *home node* of a bind or preferred-many policy
/// (`set_mempolicy_home_node`); nothing reports a home node to user space, so those policies
/// count as none here — which is what the kernel does for them without a home node.
pub(crate) fn mpol_node(addr: usize) -> Option<u32> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0 as libc::c_ulong; 2 * MAX_NODES / 64];
    // SAFETY:
    // - `mode` and `mask` are writable and big enough for `maxnode` = MAX_NODES + 1 bits;
    // - with MPOL_F_ADDR the kernel only looks up the mapping covering `addr` (EFAULT if none)
    //   and reports its policy (the default one if it has none: not the thread's).
    let r = unsafe {
        libc::syscall(libc::SYS_get_mempolicy, &mut mode, mask.as_mut_ptr(), MAX_NODES + 1, addr, MPOL_F_ADDR)
    };
    if r != 0 || mode & !MPOL_MODE_FLAGS != MPOL_PREFERRED {
        return None;
    }
    let word = mask.iter().position(|&w| w != 0)?;
    Some((word * 64) as u32 + mask[word].trailing_zeros())
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn parses_sysfs_node_lists() {
        assert_eq!(parse_node_list("0\n"), Some(vec![true]));
        assert_eq!(parse_node_list("0-3,5\n"), Some(vec![true, true, true, true, false, true]));
        assert_eq!(parse_node_list("2"), Some(vec![false, false, true]));
        assert_eq!(parse_node_list(""), None);
        assert_eq!(parse_node_list("3-1"), None);
        assert_eq!(parse_node_list("x"), None);
        assert_eq!(parse_node_list("0-5000"), None);
    }

    #[test]
    fn topology_validates_holes() {
        let t = Topology { valid: parse_node_list("0,2").unwrap(), real: true };
        assert_eq!(t.count(), 3);
        assert!(t.is_valid(0) && !t.is_valid(1) && t.is_valid(2) && !t.is_valid(3) && !t.is_valid(u64::MAX));
    }

    #[test]
    fn real_tables_are_bound_to_their_node() {
        // This machine's node 0 is real: a table placed on it carries a preferred policy for 0.
        if !Topology::from_sysfs().is_real() {
            return;
        }
        let t = crate::table::Table::new_on(64, 0, 0, true).expect("64 buckets");
        assert_eq!(mpol_node(t.base_addr()), Some(0));
        let heap = crate::table::Table::new(64, 0).expect("64 buckets");
        assert_eq!(mpol_node(heap.base_addr()), None, "a heap table has the default policy");
    }
}
