//! `libufutex.so` and `libufutex.a`: the C ABI (`include/ufutex.h`), which lives in the
//! library's `ffi` module, built as a crate that is nothing but a C library.
//!
//! Why a crate of its own: the library is also an rlib, so rustc keeps every symbol another
//! Rust crate could reach exported, and reaches such statics through the GOT with a relocation
//! the linker cannot turn into a direct access, even under fat LTO. Built from here, only the C
//! entry points are exported and everything else is internal to one LTO unit: 49 loads through
//! the GOT in the library instead of 390, and a wake with no waiters 3.3–3.4 ns instead of
//! 3.6–3.7 (`tests/c/bench_fastpath.c`; BENCHMARKS.md, fourteenth session). It is also the code
//! the benchmark tool's `ufutex-c` competitor measures, which links the same functions into an
//! executable.

// Linked for its `#[no_mangle]` C entry points, which a cdylib or staticlib exports.
extern crate engine;
