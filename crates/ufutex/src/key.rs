//! The identity of a private futex: its address. (Process-shared words have keys of their own,
//! the object that backs the mapping and the offset in it: `shared/identity.rs`.)
//!
//! A key also names the table of its domain it lives in: the domain's plain table
//! ([`NO_NODE`]) or the table of one NUMA node. The node is not part of the hash: it picks the
//! table, the hash picks the bucket within it.

/// The `node` of a key that lives in its domain's plain (non-NUMA) table.
pub(crate) const NO_NODE: u32 = u32::MAX;

/// What waiters and wakers meet on. Two words match when their keys are equal, whatever their
/// sizes (the kernel's rule).
///
/// Two `u64`s, so that a key travels in two registers and never through the stack: a wake's
/// fast path stored a three-field key before it knew whether the slow path would need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The word's address.
    pub(crate) word: u64,
    /// The NUMA node whose table holds the key, or [`NO_NODE`] for the plain table (a `u32`,
    /// stored whole: a key written as 12 bytes and read back as 16 made a store-forwarding
    /// stall, ~3 ns, on the C ABI's fast paths).
    node: u64,
}

impl Key {
    pub(crate) const fn private(addr: usize) -> Key {
        Key { word: addr as u64, node: NO_NODE as u64 }
    }

    /// The same key in node `node`'s table.
    pub(crate) const fn on_node(self, node: u32) -> Key {
        Key { node: node as u64, ..self }
    }

    /// The key as two words, as a queue's group record keeps it (`group.rs`).
    #[inline(always)]
    pub(crate) const fn words(&self) -> (u64, u64) {
        (self.word, self.node)
    }

    /// The key of [`Key::words`].
    #[inline(always)]
    pub(crate) const fn from_words((word, node): (u64, u64)) -> Key {
        Key { word, node }
    }

    /// The NUMA node whose table holds the key ([`NO_NODE`]: the plain table).
    pub(crate) const fn node(&self) -> u32 {
        self.node as u32
    }

    /// The word's address times 2^64 / golden ratio (Fibonacci hashing): tables take its top
    /// bits, in which every bit of the address counts. (No fold of high bits into low ones:
    /// the bits a table takes, 44 and up, would not see it.)
    #[cfg(not(ufutex_loom))]
    #[inline]
    pub(crate) fn hash(&self) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        self.word.wrapping_mul(K)
    }

    /// Under loom the bucket must not depend on where the allocator put the word (a model must
    /// be deterministic): the word's offset within its 64-byte line picks the bucket.
    #[cfg(ufutex_loom)]
    pub(crate) fn hash(&self) -> u64 {
        (self.word >> 2).reverse_bits()
    }
}

const _: () = assert!(std::mem::size_of::<Key>() == 16);

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_words_spread_over_buckets() {
        // 1024 consecutive u32 words over 64 buckets: every bucket used, none badly overloaded.
        let mut counts = [0u32; 64];
        for i in 0..1024usize {
            let k = Key::private(0x7f00_0000_1000 + 4 * i);
            counts[(k.hash() >> (64 - 6)) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 0 && c < 48), "{counts:?}");
    }
}
