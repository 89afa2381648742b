//! Where a run's futex words live: on the heap (private runs), or in a `MAP_SHARED` memfd
//! mapping (`--shared` runs), which a forked child can map again at an address of its own.
//! Either way the words are a `[T]` to the workloads.

use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Types whose all-zero bytes are a valid value (a fresh memfd reads zero).
///
/// # Safety
/// Implementors must be valid when every byte is zero, and have no `Drop` that matters (the
/// shared mapping is never unmapped, so their destructors never run).
pub unsafe trait Zeroed: Sync + Send {}

// SAFETY: zero is a valid atomic integer, and atomics have no destructor.
unsafe impl Zeroed for std::sync::atomic::AtomicU8 {}
// SAFETY: as above.
unsafe impl Zeroed for std::sync::atomic::AtomicU16 {}
// SAFETY: as above.
unsafe impl Zeroed for std::sync::atomic::AtomicU32 {}
// SAFETY: as above.
unsafe impl Zeroed for std::sync::atomic::AtomicU64 {}
// SAFETY: `Padded<T>` is `T` plus alignment padding, valid zeroed when `T` is.
unsafe impl<T: Zeroed> Zeroed for crate::workloads::Padded<T> {}

/// What owns the memory behind a [`Words`].
enum Backing<T> {
    Heap(#[allow(dead_code)] Vec<T>),
    /// A memfd mapping that is never unmapped (leaked: a shared futex implementation may still
    /// hold the object, and a child may still use its own mapping of it); the descriptor, kept
    /// so that a child can map it again, is closed when the `Words` drops.
    Memfd {
        fd: OwnedFd,
        bytes: usize,
    },
}

/// `len` words, each starting at value 0, on the heap or in a shared memfd mapping.
pub struct Words<T> {
    ptr: *const T,
    len: usize,
    backing: Backing<T>,
    _t: PhantomData<T>,
}

// SAFETY: `Words<T>` only hands out `&[T]`; with `T: Sync` those may cross threads, and the
// memory stays valid as long as the `Words` (the heap) or forever (the mapping).
unsafe impl<T: Zeroed> Sync for Words<T> {}
// SAFETY: as above; the owned Vec or descriptor moves with it.
unsafe impl<T: Zeroed> Send for Words<T> {}

impl<T: Zeroed> Words<T> {
    /// `len` zeroed words: in a fresh `MAP_SHARED` memfd mapping if `shared`, else on the heap.
    pub fn new(len: usize, shared: bool) -> io::Result<Self> {
        if !shared {
            let v: Vec<T> = (0..len)
                .map(|_| {
                    // SAFETY: `T: Zeroed` is valid all-zero.
                    unsafe { std::mem::zeroed() }
                })
                .collect();
            return Ok(Words { ptr: v.as_ptr(), len, backing: Backing::Heap(v), _t: PhantomData });
        }
        let bytes = (len.max(1) * std::mem::size_of::<T>()).next_multiple_of(4096);
        // SAFETY: the name is a NUL-terminated literal; MFD_CLOEXEC takes no other argument.
        let raw = unsafe { libc::memfd_create(c"ufutex-bench-words".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our own descriptor; no memory is passed.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let ptr = map(&fd, bytes)? as *const T;
        Ok(Words { ptr, len, backing: Backing::Memfd { fd, bytes }, _t: PhantomData })
    }

    /// The memfd and its mapped size, for a shared `Words`.
    pub fn memfd(&self) -> Option<(&OwnedFd, usize)> {
        match &self.backing {
            Backing::Memfd { fd, bytes } => Some((fd, *bytes)),
            Backing::Heap(_) => None,
        }
    }

    /// The same words through a second, fresh mapping of the memfd (another address for the
    /// same memory; what another process that maps the object sees). Leaked like the first.
    pub fn map_again(&self) -> io::Result<&'static [T]> {
        let (fd, bytes) = self.memfd().ok_or_else(|| io::Error::other("words on the heap cannot be mapped again"))?;
        let p = map(fd, bytes)? as *const T;
        // SAFETY: a fresh MAP_SHARED mapping of `bytes` ≥ len × size_of::<T>() bytes of the same
        // object, page-aligned (so aligned for T, whose alignment is ≤ 128), never unmapped;
        // its contents are valid `T`s (zeroed at creation, since written only as `T`).
        Ok(unsafe { std::slice::from_raw_parts(p, self.len) })
    }
}

/// Map `bytes` of `fd` shared, read-write.
fn map(fd: &OwnedFd, bytes: usize) -> io::Result<*mut u8> {
    // SAFETY: a new mapping chosen by the kernel (NULL hint) of an fd we own; it overlaps nothing.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p as *mut u8)
}

impl<T> std::ops::Deref for Words<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised `T`s that live at least as long as `self`
        // (the Vec it owns, or the leaked mapping).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::Padded;
    use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

    #[test]
    fn heap_and_shared_words_start_at_zero() {
        for shared in [false, true] {
            let w = Words::<Padded<AtomicU32>>::new(40, shared).unwrap();
            assert_eq!(w.len(), 40);
            assert!(w.iter().all(|x| x.load(Ordering::Relaxed) == 0));
            assert_eq!(w.memfd().is_some(), shared);
            let b = Words::<AtomicU8>::new(5000, shared).unwrap();
            assert!(b.iter().all(|x| x.load(Ordering::Relaxed) == 0));
        }
    }

    #[test]
    fn a_second_mapping_is_the_same_memory_at_another_address() {
        let w = Words::<Padded<AtomicU32>>::new(64, true).unwrap();
        let again = w.map_again().unwrap();
        assert_ne!(again.as_ptr(), w.as_ptr());
        w[63].store(7, Ordering::SeqCst);
        assert_eq!(again[63].load(Ordering::SeqCst), 7);
        assert!(Words::<AtomicU32>::new(1, false).unwrap().map_again().is_err());
    }
}
