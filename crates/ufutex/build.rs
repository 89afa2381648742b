//! One name for a condition that the source tests in a dozen places: `ufutex_fixup` is set where
//! the C ABI reads caller memory with exception fixup and writes `errno` through the thread
//! pointer (`ffi/fault.rs`, `ffi/errno.rs`): Linux on x86-64 and on aarch64. Elsewhere the ABI
//! reads through `process_vm_readv` and sets `errno` through libc.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os == "linux" && matches!(arch.as_str(), "x86_64" | "aarch64") {
        println!("cargo::rustc-cfg=ufutex_fixup");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
