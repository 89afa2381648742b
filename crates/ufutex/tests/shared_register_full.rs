//! The list of registered mappings (`shared::register_mapping`) holds 256 ranges: the next is
//! refused with `NoMemory` (`ENOMEM`), whose message names the registrations, and nothing else
//! changes: every registered range still works, and a range given back makes room again.
//!
//! A test binary of its own: the list is the process's, and this test fills it. (The pages,
//! one shared object each, stay mapped to the end, as the tests' mappings do.)
#![cfg(not(ufutex_loom))]

mod common;

use common::{at, isolated_shared_table, shared_anon};
use std::sync::atomic::AtomicU32;
use ufutex::shared::{self, SharedError};

/// The word at the start of a registered page.
fn word(p: *mut u8) -> &'static AtomicU32 {
    // SAFETY: `p` is a page of `shared_anon`, aligned and never unmapped.
    unsafe { at(p, 0) }
}

#[test]
fn the_257th_registration_is_refused_and_nothing_else_changes() {
    let _table = isolated_shared_table();
    let mut pages = Vec::new();
    let refused = loop {
        assert!(pages.len() <= 256, "more than 256 ranges registered");
        let p = shared_anon(4096);
        match shared::register_mapping(p, 4096) {
            Ok(()) => pages.push(p),
            Err(e) => break e,
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
    let again = shared_anon(4096);
    shared::register_mapping(again, 4096).unwrap();
    assert_eq!(shared::register_mapping(last, 4096), Err(SharedError::NoMemory), "full again");
    pages.push(again);

    for p in pages {
        shared::unregister_mapping(p).unwrap();
    }
}
