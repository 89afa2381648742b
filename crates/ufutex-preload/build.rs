fn main() {
    // The library drops each thread's wait state at the thread's exit with a pthread key's
    // destructor, which lives in the library (crates/ufutex/src/thread.rs): a dlclose must not
    // unload it while such threads may still exit.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
