//! Hot code and data: the functions that the futex calls' fast paths call out of line (the C
//! ABI's and the preload library's requeue and wake, and what they call) share one section,
//! `.text.ufutex_hot`, which starts on a page of its own; the statics that every call reads
//! share another, `.data.ufutex_hot`.
//!
//! A call made after its process slept a while finds its code and data out of the caches and
//! their pages out of the TLB (`perf bench futex requeue` times its requeues right after a
//! 100 ms sleep). Each page the call meets then costs a page walk, and a code page's walk
//! stalls the front end. Left to the compiler and the linker, the requeue's functions lay on
//! five pages, the preload library's `syscall()` at the far end of the text, and the statics
//! that every call reads (the default domain's tables and first buckets, the library's modes
//! and marks) on three more. Here the functions take two pages and the statics one
//! (BENCHMARKS.md, eighty-third session).
//!
//! Each such function carries
//! `#[cfg_attr(target_os = "linux", link_section = ".text.ufutex_hot")]`, each such static
//! `.data.ufutex_hot`. With fat LTO (the `dist` profile: the shipped libraries and the
//! benchmark report) every crate's code is one object, so each section is one input section,
//! which the linker places whole; the assembly below aligns each to a page, so that neither
//! starts near a page's end (the code is ~12 KiB, the statics ~2; `scripts/hot-layout.py`
//! checks the pages in CI). In a build without LTO, each crate's part of a section is placed
//! on its own, which costs nothing but the gain; and each crate's part is one piece for
//! `--gc-sections`, so that a program that calls one of its functions keeps them all (with
//! LTO, the compiler drops the unused ones first).

// An empty piece of each section, aligned: a section's alignment is its largest piece's.
// (`%progbits`: the spelling both architectures' assemblers take.)
core::arch::global_asm!(
    ".pushsection .text.ufutex_hot,\"ax\",%progbits",
    ".p2align 12",
    ".popsection",
    ".pushsection .data.ufutex_hot,\"aw\",%progbits",
    ".p2align 12",
    ".popsection",
);
