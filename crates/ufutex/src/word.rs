//! The four word sizes behind one sealed trait, and the untyped word the core works on.

use crate::primitive::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The width of a futex word; its discriminant is the futex2 size code (`FUTEX2_SIZE_*`: the
/// log2 of its bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Size {
    U8 = 0,
    U16 = 1,
    U32 = 2,
    U64 = 3,
}

impl Size {
    /// The size of futex2 size code `code & 3`.
    #[inline(always)]
    #[cfg_attr(ufutex_loom, allow(dead_code))] // the C ABI's (not built under loom)
    pub(crate) const fn from_code(code: u32) -> Size {
        match code & 3 {
            0 => Size::U8,
            1 => Size::U16,
            2 => Size::U32,
            _ => Size::U64,
        }
    }

    /// Bytes in a word of this size (also its required alignment).
    #[inline(always)]
    pub(crate) fn bytes(self) -> usize {
        // (Tables indexed by the code: the C ABI's fast paths compute these on every call. The
        // arithmetic instead, `1 << code` and a shift of `u64::MAX`, counted 5-6 instructions
        // more a call under callgrind.)
        static BYTES: [usize; 4] = [1, 2, 4, 8];
        BYTES[self as usize]
    }

    /// `f(self)`, with the size a constant in each of the four calls, told by two tests on the
    /// code's bits, not a four-way `match`: a size known only at run time (the C ABI's) made
    /// that a jump table in read-only data, an indirect jump and a page to bring back on a call
    /// made after a while asleep.
    #[inline(always)]
    pub(crate) fn known<R>(self, f: impl FnOnce(Size) -> R) -> R {
        let code = self as u8;
        if code & 2 != 0 {
            if code & 1 == 0 {
                f(Size::U32)
            } else {
                f(Size::U64)
            }
        } else if code & 1 != 0 {
            f(Size::U16)
        } else {
            f(Size::U8)
        }
    }

    /// The largest value a word of this size holds.
    #[inline(always)]
    pub(crate) fn max(self) -> u64 {
        static MAX: [u64; 4] = [u8::MAX as u64, u16::MAX as u64, u32::MAX as u64, u64::MAX];
        MAX[self as usize]
    }
}

/// A futex word the core can load: an address and a size.
///
/// Built safely from `&F: Futex` (the borrow outlives the operation), or with
/// [`WordRef::from_raw`] by the C ABI after validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordRef {
    addr: usize,
    size: Size,
}

impl WordRef {
    /// # Safety
    /// - `addr` is aligned to `size.bytes()` and points to memory that is readable as an atomic
    ///   of that size for as long as the `WordRef` is used;
    /// - under `cfg(ufutex_loom)` the memory is a loom atomic of that size.
    pub(crate) unsafe fn from_raw(addr: usize, size: Size) -> WordRef {
        debug_assert_eq!(addr % size.bytes(), 0);
        WordRef { addr, size }
    }

    pub(crate) fn addr(self) -> usize {
        self.addr
    }

    pub(crate) fn size(self) -> Size {
        self.size
    }

    /// The word as a 32-bit atomic, if it is one (the kernel's futex takes only those).
    pub(crate) fn as_u32(&self) -> Option<&AtomicU32> {
        // SAFETY: `from_raw`'s contract (or the `&F` borrow) guarantees an aligned, live atomic
        // of exactly this size at `addr` while the `WordRef` is used; the reference borrows it.
        (self.size == Size::U32).then(|| unsafe { &*(self.addr as *const AtomicU32) })
    }

    /// [`WordRef::load`] of a word expected to be of `size`: `None` if it is of another size.
    /// With `size` a constant, one compare and one load, no test of the size's bits.
    #[inline(always)]
    pub(crate) fn load_if(self, size: Size) -> Option<u64> {
        // SAFETY: the word is of `size` (just compared).
        (self.size == size).then(|| unsafe { self.load_at(size) })
    }

    /// Load the word at its width, zero-extended. SeqCst: the waiter's half of (A), see `wait.rs`.
    #[inline]
    pub(crate) fn load(self) -> u64 {
        // SAFETY: `known` calls with the word's own size.
        self.size.known(|size| unsafe { self.load_at(size) })
    }

    /// The word loaded at `size` (a constant where the caller inlines this: one load).
    ///
    /// # Safety
    /// `size` is the word's size.
    #[inline(always)]
    unsafe fn load_at(self, size: Size) -> u64 {
        debug_assert_eq!(size, self.size);
        // SAFETY: `from_raw`'s contract (or the `&F` borrow in `Futex::word_ref`) guarantees an
        // aligned, live atomic of exactly the word's size at `addr`, which is `size` (the
        // caller's), and each arm loads at the size it names.
        unsafe {
            match size {
                Size::U8 => (*(self.addr as *const AtomicU8)).load(Ordering::SeqCst) as u64,
                Size::U16 => (*(self.addr as *const AtomicU16)).load(Ordering::SeqCst) as u64,
                Size::U32 => (*(self.addr as *const AtomicU32)).load(Ordering::SeqCst) as u64,
                Size::U64 => (*(self.addr as *const AtomicU64)).load(Ordering::SeqCst),
            }
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An atomic integer that can be a futex word: `AtomicU8`, `AtomicU16`, `AtomicU32`, `AtomicU64`.
///
/// Sealed: the core relies on the word being a plain, aligned atomic of the named width.
/// Values are compared at that width.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicU16, AtomicU8};
/// use ufutex::{Futex, WaitError};
/// fn check<F: Futex>(word: &F, expected: F::Value) -> Result<(), WaitError> {
///     ufutex::wait(word, expected, Some(std::time::Duration::ZERO.into()))
/// }
/// assert_eq!(check(&AtomicU8::new(3), 4), Err(WaitError::WouldBlock));
/// assert_eq!(check(&AtomicU16::new(3), 3), Err(WaitError::TimedOut));
/// ```
pub trait Futex: sealed::Sealed + Sync {
    /// The integer the word holds (`u8` for `AtomicU8`, and so on).
    type Value: Copy + Eq + std::fmt::Debug + Send + Sync + 'static;

    #[doc(hidden)]
    fn word_ref(&self) -> WordRefOpaque;
    #[doc(hidden)]
    fn value_bits(v: Self::Value) -> u64;
}

/// Opaque carrier of the untyped word, so the sealed trait can hand it to the core.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct WordRefOpaque(pub(crate) WordRef);

macro_rules! impl_futex {
    ($atomic:ty, $value:ty, $size:expr) => {
        impl sealed::Sealed for $atomic {}
        impl Futex for $atomic {
            type Value = $value;
            #[inline]
            fn word_ref(&self) -> WordRefOpaque {
                // SAFETY:
                // - `self` is an aligned atomic of exactly `$size`, and every operation that uses
                //   the WordRef borrows `self` for its whole duration.
                WordRefOpaque(unsafe { WordRef::from_raw(self as *const $atomic as usize, $size) })
            }
            #[inline]
            fn value_bits(v: $value) -> u64 {
                v as u64
            }
        }
    };
}

impl_futex!(AtomicU8, u8, Size::U8);
impl_futex!(AtomicU16, u16, Size::U16);
impl_futex!(AtomicU32, u32, Size::U32);
impl_futex!(AtomicU64, u64, Size::U64);

#[inline]
pub(crate) fn word_of<F: Futex>(f: &F) -> WordRef {
    f.word_ref().0
}

#[cfg(all(test, not(ufutex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn loads_at_the_words_width() {
        let w8 = AtomicU8::new(0xFF);
        let w16 = AtomicU16::new(0xFFFF);
        let w64 = AtomicU64::new(u64::MAX);
        assert_eq!(word_of(&w8).load(), 0xFF);
        assert_eq!(word_of(&w16).load(), 0xFFFF);
        assert_eq!(word_of(&w64).load(), u64::MAX);
        let w32 = AtomicU32::new(u32::MAX);
        assert_eq!(word_of(&w32).load(), u64::from(u32::MAX));
        // A size known only at run time, as the C ABI has it.
        let dynamic = [
            (w8.as_ptr() as usize, 0),
            (w16.as_ptr() as usize, 1),
            (w32.as_ptr() as usize, 2),
            (w64.as_ptr() as usize, 3),
        ];
        for (w, size) in dynamic {
            // SAFETY: each address is a live, aligned atomic of that size.
            let r = unsafe { WordRef::from_raw(w, Size::from_code(std::hint::black_box(size))) };
            assert_eq!(r.load(), r.size().max(), "code {size}");
        }
    }

    #[test]
    fn bytes_and_max_of_every_size() {
        let all = [Size::U8, Size::U16, Size::U32, Size::U64];
        assert_eq!(all.map(Size::bytes), [1, 2, 4, 8]);
        assert_eq!(all.map(Size::max), [0xFF, 0xFFFF, 0xFFFF_FFFF, u64::MAX]);
        assert_eq!([0, 1, 2, 3].map(Size::from_code), all);
    }
}
