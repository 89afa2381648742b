//! The C ABI's types and constants: the values of the kernel's `FUTEX2_*` flags and a
//! `struct ufutex_waitv` laid out exactly as the kernel's `struct futex_waitv`.
//!
//! `include/ufutex.h` declares the same things by hand; `tests` below parse the header and
//! compare every constant, and `tests/c/abi_layout.c` checks the C side's sizes and offsets.

use std::mem::{align_of, offset_of, size_of};

/// Word sizes, in the two low bits of `flags` (`FUTEX2_SIZE_*`).
pub const UFUTEX_SIZE_U8: u32 = 0x00;
pub const UFUTEX_SIZE_U16: u32 = 0x01;
pub const UFUTEX_SIZE_U32: u32 = 0x02;
#[allow(dead_code)] // the `_` arm of `validate::word_flags`
pub const UFUTEX_SIZE_U64: u32 = 0x03;
pub const UFUTEX_SIZE_MASK: u32 = 0x03;
/// The word is followed by a same-size node word (`FUTEX2_NUMA`).
pub const UFUTEX_NUMA: u32 = 0x04;
/// The node comes from the memory policy covering the word (`FUTEX2_MPOL`).
pub const UFUTEX_MPOL: u32 = 0x08;
/// Process-private word (`FUTEX2_PRIVATE`).
pub const UFUTEX_PRIVATE: u32 = 0x80;
/// Every flag bit a word may carry (`FUTEX2_VALID_MASK`).
pub const UFUTEX_VALID_MASK: u32 = UFUTEX_SIZE_MASK | UFUTEX_NUMA | UFUTEX_MPOL | UFUTEX_PRIVATE;
/// Most entries of one `ufutex_waitv` call.
pub const UFUTEX_WAITV_MAX: u32 = 1024;
/// The node word value meaning "the caller's node" (`UFUTEX_NUMA`; resolved by `numa::resolve`).
#[allow(dead_code)]
pub const UFUTEX_NO_NODE: i32 = -1;

/// One entry of `ufutex_waitv` (and the two of `ufutex_requeue`); the kernel's
/// `struct futex_waitv`, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UfutexWaitv {
    /// The value the word must hold, at its size.
    pub val: u64,
    /// The word's address.
    pub uaddr: u64,
    /// `UFUTEX_SIZE_*` | `UFUTEX_PRIVATE` | ...
    pub flags: u32,
    /// Must be zero.
    pub reserved: u32,
}

const _: () = {
    assert!(size_of::<UfutexWaitv>() == 24);
    assert!(align_of::<UfutexWaitv>() == 8);
    assert!(offset_of!(UfutexWaitv, val) == 0);
    assert!(offset_of!(UfutexWaitv, uaddr) == 8);
    assert!(offset_of!(UfutexWaitv, flags) == 16);
    assert!(offset_of!(UfutexWaitv, reserved) == 20);
    assert!(UFUTEX_WAITV_MAX as usize == crate::waitv::WAITV_MAX);
    // The kernel's `struct __kernel_timespec` is what we read a timeout as.
    assert!(size_of::<libc::timespec>() == 16);
};

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = include_str!("../../../../include/ufutex.h");

    /// The value of `#define NAME value` in the header, parsed as C would (hex, parens, sign).
    fn define(name: &str) -> i64 {
        let line = HEADER
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["#define", name]))
            .unwrap_or_else(|| panic!("{name} is not #defined in include/ufutex.h"));
        let raw = line.split_whitespace().nth(2).expect("a value");
        let raw = raw.trim_start_matches('(').trim_end_matches(')').trim_end_matches(['u', 'U']);
        let (neg, raw) = raw.strip_prefix('-').map_or((false, raw), |r| (true, r));
        let v = match raw.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => raw.parse(),
        }
        .unwrap_or_else(|e| panic!("{name}: cannot parse {raw:?}: {e}"));
        if neg {
            -v
        } else {
            v
        }
    }

    #[test]
    fn header_constants_match_the_rust_side() {
        let expect: [(&str, i64); 11] = [
            ("UFUTEX_SIZE_U8", UFUTEX_SIZE_U8.into()),
            ("UFUTEX_SIZE_U16", UFUTEX_SIZE_U16.into()),
            ("UFUTEX_SIZE_U32", UFUTEX_SIZE_U32.into()),
            ("UFUTEX_SIZE_U64", UFUTEX_SIZE_U64.into()),
            ("UFUTEX_SIZE_MASK", UFUTEX_SIZE_MASK.into()),
            ("UFUTEX_NUMA", UFUTEX_NUMA.into()),
            ("UFUTEX_MPOL", UFUTEX_MPOL.into()),
            ("UFUTEX_PRIVATE", UFUTEX_PRIVATE.into()),
            ("UFUTEX_VALID_MASK", UFUTEX_VALID_MASK.into()),
            ("UFUTEX_WAITV_MAX", UFUTEX_WAITV_MAX.into()),
            ("UFUTEX_NO_NODE", UFUTEX_NO_NODE.into()),
        ];
        for (name, value) in expect {
            assert_eq!(define(name), value, "{name} differs between include/ufutex.h and ffi/abi.rs");
        }
    }

    #[test]
    fn header_states_the_core_limits() {
        let slots = format!("ENOMEM: @slots is above 2^{}", crate::tables::MAX_SLOTS.trailing_zeros());
        assert!(HEADER.contains(&slots), "include/ufutex.h must say `{slots}`");
    }

    #[test]
    fn header_declares_every_exported_function_and_the_struct() {
        let decls = [
            "long ufutex_wait(void *uaddr, unsigned long val, unsigned long mask, unsigned int flags,",
            "long ufutex_wake(void *uaddr, unsigned long mask, int nr, unsigned int flags);",
            "long ufutex_waitv(struct ufutex_waitv *waiters, unsigned int nr_futexes, unsigned int flags,",
            "long ufutex_requeue(struct ufutex_waitv *waiters, unsigned int flags, int nr_wake, int nr_requeue);",
            "long ufutex_wake_op(void *uaddr1, void *uaddr2, int nr1, int nr2, unsigned int op, unsigned int flags);",
            "long ufutex_hash_set_slots(unsigned long slots, unsigned long flags);",
            "long ufutex_hash_get_slots(void);",
            "long ufutex_shared_register(const void *addr, size_t len);",
            "long ufutex_shared_unregister(const void *addr);",
            "_Static_assert(sizeof(struct ufutex_waitv) == 24,",
        ];
        for d in decls {
            assert!(HEADER.contains(d), "include/ufutex.h lacks `{d}`");
        }
        let fields: Vec<&str> = HEADER
            .split("struct ufutex_waitv {")
            .nth(1)
            .and_then(|s| s.split("};").next())
            .expect("struct ufutex_waitv in the header")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("/*") && !l.starts_with('*'))
            .collect();
        assert_eq!(fields, ["uint64_t val;", "uint64_t uaddr;", "uint32_t flags;", "uint32_t __reserved;"]);
    }
}
