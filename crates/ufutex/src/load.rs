//! What the library does when a process loads it, in one constructor (an `.init_array` entry:
//! run before `main` for a library linked in or preloaded, by `dlopen` for one opened later),
//! while a process mostly has one thread still. Two set-ups that a multithreaded process pays
//! for, or gets wrong, if they wait for the first call:
//! - whether `membarrier` works (`membarrier::decide_at_load`): registering in a process with
//!   a second thread waits for an RCU grace period (milliseconds);
//! - the fork mark (`fork::make_mark`): a child made without the fork handlers learns from it
//!   that it is a child, also when its parent never waited.
//!
//! Three system calls (the registration, a page's `mmap` and its `madvise`) and a few stores.
//! Both are best effort: each is made again at first use if the constructor did not run (a
//! linker that dropped it).

#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = {
    extern "C" fn at_load() {
        crate::membarrier::decide_at_load();
        crate::fork::make_mark();
    }
    at_load
};
