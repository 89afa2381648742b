//! Fresh memory straight from the kernel (an anonymous private mapping), for whatever the
//! library keeps in pages of its own: the NUMA-placed tables (`table.rs`), the fork mark's
//! page (`fork_mark.rs`), and the process-wide pools that a wait may grow — the node pool's
//! chunks (`node_pool.rs`), the group records (`group.rs`) and the signal-reentry pages
//! (`reentry.rs`). A wait may come from a signal handler that interrupted the allocator (the
//! kernel's futex is async-signal-safe, and we are its drop-in): `mmap` is safe to call there,
//! `malloc` is not.

use std::ptr::NonNull;

/// `bytes` of fresh memory: zeroed, writable, starting on a page, and known to nobody else;
/// `None` if the kernel has none to give.
pub(crate) fn map(bytes: usize) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping: the kernel picks the address, so no memory of
    // ours is involved, and a failure is reported as MAP_FAILED, checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(p.cast())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_is_page_aligned_zeroed_and_writable() {
        let p = map(3 * 4096 + 1).expect("memory");
        assert_eq!(p.as_ptr() as usize % 4096, 0, "starts on a page");
        // SAFETY: the mapping holds at least 3 * 4096 + 1 bytes, ours alone.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), 3 * 4096 + 1) };
        assert!(bytes.iter().all(|&b| b == 0), "zeroed");
        bytes.fill(0xA5);
        assert!(bytes.iter().all(|&b| b == 0xA5), "writable");
    }

    #[test]
    fn an_impossible_size_is_none_not_a_crash() {
        assert!(map(usize::MAX - 4095).is_none());
    }
}
