//! The list of registered mappings (`shared::register_mapping`) holds 256 ranges: the next is
//! refused with `NoMemory` (`ENOMEM`), whose message names the registrations, and nothing else
//! changes: every registered range still works, and a range given back makes room again.
//!
//! A test binary of its own: the list is the process's, and this test fills it.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::AtomicU32;
use ufutex::shared::{self, SharedError};

/// A fresh one-page shared anonymous mapping: a shared object of its own, one mapping.
fn page() -> *mut u8 {
    // SAFETY: a new mapping; no memory of the program is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
    p.cast()
}

/// The word at the start of a registered page.
fn word(p: *mut u8) -> &'static AtomicU32 {
    // SAFETY: `p` is page-aligned and the page stays mapped until the test's end (unmapped only
    // after its last use, below).
    unsafe { &*(p as *const AtomicU32) }
}

#[test]
fn the_257th_registration_is_refused_and_nothing_else_changes() {
    let mut pages = Vec::new();
    let refused = loop {
        assert!(pages.len() <= 256, "more than 256 ranges registered");
        let p = page();
        match shared::register_mapping(p, 4096) {
            Ok(()) => pages.push(p),
            Err(e) => {
                // SAFETY: `p` was mapped above and never registered.
                unsafe { libc::munmap(p.cast(), 4096) };
                break e;
            }
        }
    };
    assert_eq!(refused, SharedError::NoMemory);
    assert_eq!(refused.errno(), libc::ENOMEM);
    assert!(refused.to_string().contains("256 mapping registrations"), "{refused}");
    assert_eq!(pages.len(), 256, "nothing else in this process registers a range");

    // Every registered range still works.
    for &p in &pages {
        assert_eq!(shared::wake(word(p), 1), Ok(0));
        assert_eq!(shared::wait(word(p), 1, None), Err(SharedError::WouldBlock));
    }

    // One given back makes room for another.
    let last = pages.pop().unwrap();
    shared::unregister_mapping(last).unwrap();
    let again = page();
    shared::register_mapping(again, 4096).unwrap();
    assert_eq!(shared::register_mapping(last, 4096), Err(SharedError::NoMemory), "full again");
    pages.push(again);

    for p in pages.into_iter().chain([last]) {
        let _ = shared::unregister_mapping(p);
        // SAFETY: the page is no longer registered and nothing uses it any more.
        unsafe { libc::munmap(p.cast(), 4096) };
    }
}
