//! Whether wakes may leave out their fence (`membarrier`) is decided when the library is
//! loaded, before `main`, while the process has one thread: the kernel's registration then takes
//! its fast path, where the first wake or wait of a process with a second thread waited for an
//! RCU grace period (10-24 ms here). This binary links the library as any Rust program does,
//! so it also checks that the linker kept the library's load-time constructor. (This file's
//! one test: nothing here calls the library before the check.)

#![cfg(not(ufutex_loom))]

#[test]
fn the_fence_is_decided_before_the_first_call() {
    assert!(ufutex::wakes_fence_decided(), "not decided at load");
}
