//! `FUTEX_WAKE_OP`'s operation word (the kernel's `futex_atomic_op_inuser`): decode it, and
//! apply it to a 32-bit word atomically, returning whether the second wake happens.
//!
//! | bits | field |
//! |---|---|
//! | 31 | `FUTEX_OP_OPARG_SHIFT`: the argument is `1 << oparg` (oparg taken modulo 32) |
//! | 28..30 | op: SET 0, ADD 1, OR 2, ANDN 3, XOR 4 |
//! | 24..27 | cmp: EQ 0, NE 1, LT 2, LE 3, GT 4, GE 5 (signed, old value against cmparg) |
//! | 12..23 | oparg, 12-bit signed |
//! | 0..11 | cmparg, 12-bit signed |

use super::Errno;
use std::sync::atomic::{AtomicU32, Ordering};

/// A decoded operation word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WakeOp {
    op: u32,
    oparg: i32,
    cmp: u32,
    cmparg: i32,
}

/// Sign-extend the low `bits` bits of `v`.
fn signed(v: u32, bits: u32) -> i32 {
    ((v << (32 - bits)) as i32) >> (32 - bits)
}

impl WakeOp {
    pub(crate) fn decode(encoded: u32) -> WakeOp {
        let mut oparg = signed((encoded >> 12) & 0xfff, 12);
        if encoded & (1 << 31) != 0 {
            oparg = 1 << (oparg & 31); // the kernel masks an out-of-range shift to 0..31
        }
        WakeOp { op: (encoded >> 28) & 7, oparg, cmp: (encoded >> 24) & 0xf, cmparg: signed(encoded & 0xfff, 12) }
    }

    /// `ENOSYS` for an unknown op: the kernel says so before it touches the word (so before
    /// `EFAULT` for an unmapped one).
    pub(crate) fn check(self) -> Result<WakeOp, Errno> {
        self.new_value(0).map(|_| self)
    }

    /// The new value for `old`; `ENOSYS` for an unknown op (nothing is written then).
    fn new_value(self, old: u32) -> Result<u32, Errno> {
        let arg = self.oparg as u32;
        Ok(match self.op {
            0 => arg,
            1 => old.wrapping_add(arg),
            2 => old | arg,
            3 => old & !arg,
            4 => old ^ arg,
            _ => return Err(Errno(libc::ENOSYS)),
        })
    }

    /// Whether the second wake happens for the old value; `ENOSYS` for an unknown comparison
    /// (the kernel has already written the word then, and so have we).
    fn compare(self, old: u32) -> Result<bool, Errno> {
        let (old, arg) = (old as i32, self.cmparg);
        Ok(match self.cmp {
            0 => old == arg,
            1 => old != arg,
            2 => old < arg,
            3 => old <= arg,
            4 => old > arg,
            5 => old >= arg,
            _ => return Err(Errno(libc::ENOSYS)),
        })
    }

    /// Apply the operation to `word` atomically; whether the second wake happens.
    pub(crate) fn apply(self, word: &AtomicU32) -> Result<bool, Errno> {
        let mut old = word.load(Ordering::Relaxed);
        loop {
            let new = self.new_value(old)?;
            // SeqCst: the word is a futex word other threads wait on; as strong as their loads.
            match word.compare_exchange_weak(old, new, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return self.compare(old),
                Err(now) => old = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FUTEX_OP(op, oparg, cmp, cmparg) from linux/futex.h.
    fn encode(op: u32, oparg: i32, cmp: u32, cmparg: i32) -> u32 {
        ((op & 0xf) << 28) | ((cmp & 0xf) << 24) | (((oparg as u32) & 0xfff) << 12) | ((cmparg as u32) & 0xfff)
    }

    #[test]
    fn every_op_and_comparison() {
        let w = AtomicU32::new(0);
        // (op, old value, oparg, new value): SET, ADD, OR, ANDN, XOR.
        let ops =
            [(0, 5, 9, 9), (1, 5, 3, 8), (2, 0b1001, 0b100, 0b1101), (3, 0b1101, 0b1, 0b1100), (4, 0x0c, 0xff, 0xf3)];
        for (op, old, arg, want) in ops {
            w.store(old, Ordering::Relaxed);
            assert_eq!(WakeOp::decode(encode(op, arg, 0, old as i32)).apply(&w), Ok(true), "op {op}");
            assert_eq!(w.load(Ordering::Relaxed), want, "op {op}");
        }
        let cmps = [(0, 7, false), (1, 7, true), (2, 7, true), (3, 3, true), (4, 3, false), (5, 3, true)];
        for (cmp, arg, want) in cmps {
            w.store(3, Ordering::Relaxed);
            assert_eq!(WakeOp::decode(encode(1, 0, cmp, arg)).apply(&w), Ok(want), "cmp {cmp} against {arg}");
        }
    }

    #[test]
    fn arguments_are_signed_and_shifts_masked() {
        let w = AtomicU32::new(10);
        assert_eq!(WakeOp::decode(encode(1, -3, 0, 10)).apply(&w), Ok(true));
        assert_eq!(w.load(Ordering::Relaxed), 7);
        w.store(u32::MAX, Ordering::Relaxed); // -1 as int
        assert_eq!(WakeOp::decode(encode(1, 0, 2, 0)).apply(&w), Ok(true), "signed: -1 < 0");
        w.store(0, Ordering::Relaxed);
        assert_eq!(WakeOp::decode(encode(8 | 2, 4, 0, 0)).apply(&w), Ok(true));
        assert_eq!(w.load(Ordering::Relaxed), 1 << 4, "OPARG_SHIFT: 1 << oparg");
        w.store(0, Ordering::Relaxed);
        assert_eq!(WakeOp::decode(encode(8, 35, 0, 0)).apply(&w), Ok(true));
        assert_eq!(w.load(Ordering::Relaxed), 1 << 3, "a shift above 31 is taken modulo 32");
    }

    #[test]
    fn unknown_ops_and_comparisons_are_enosys() {
        let w = AtomicU32::new(1);
        assert_eq!(WakeOp::decode(encode(5, 1, 0, 0)).apply(&w), Err(Errno(libc::ENOSYS)));
        assert_eq!(w.load(Ordering::Relaxed), 1, "an unknown op writes nothing");
        assert_eq!(WakeOp::decode(encode(1, 1, 6, 0)).apply(&w), Err(Errno(libc::ENOSYS)));
        assert_eq!(w.load(Ordering::Relaxed), 2, "an unknown comparison comes after the write, as in the kernel");
    }
}
