#!/usr/bin/env python3
"""Fail when a shipped library's hot code or data is spread out again (crates/ufutex/src/hot_code.rs).

    scripts/hot-layout.py LIBRARY.so

Reads the library's symbols with `nm` and checks that the out-of-line functions of the
preload library's requeue lie on at most two pages, those of the wake on at most three, and the
statics that every call reads on one. Prints each group's span; exits 1 if one is wider than
allowed or a symbol is missing (a function renamed: update the lists below).
"""
import re
import subprocess
import sys

PAGE = 4096
# (name, patterns of the demangled symbols, pages allowed, a word of the library's file name that
# the group is for ("": every library))
GROUPS = [
    (
        "requeue path (preload)",
        [r"^syscall$", r"ffi::calls::preload_requeue$", r"queue::Queue<H>::unlink$", r"engine::Pair<L>::unlock$"],
        2,
        "libufutex_preload",
    ),
    (
        "wake path",
        [r"^ufutex_wake$", r"ffi::calls::wake_plain_at$", r"wake::wake_private_at$", r"wake::wake_locked$",
         r"queue::WakeList<H>::unpark_all$", r"queue::WakeList<H>::worthy_homes$"],
        # Three: `wake_locked`'s instantiation for the shared table sits among them.
        3,
        "",
    ),
    (
        "hot statics",
        [r"membarrier::STATE$", r"ffi::fault::fixup::MODE$", r"lock::SLEEPERS$",
         r"default_domain::TABLES$", r"tables::INITIAL_BUCKETS$", r"tables::INITIAL$", r"fork_mark::MARK$",
         r"ffi::errno::OFFSET$", r"has_prefetchw::HAS$"],
        1,
        "",
    ),
]


def symbols(lib):
    out = subprocess.run(["nm", "-C", "-S", lib], check=True, capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4:
            addr, size, _kind, name = parts
            # A `.0` suffix: LLVM's name for a static it split off its symbol.
            syms.append((int(addr, 16), int(size, 16), re.sub(r"\.\d+$", "", name)))
    return syms


def main():
    lib = sys.argv[1]
    syms = symbols(lib)
    failed = False
    for name, patterns, pages, only in GROUPS:
        if only and only not in lib:
            continue
        spans = []
        for p in patterns:
            found = [(a, s) for a, s, n in syms if re.search(p, n)]
            if not found:
                print(f"{name}: no symbol matches {p!r} in {lib}")
                failed = True
                continue
            spans += found
        if not spans:
            continue
        first = min(a for a, _ in spans) // PAGE
        last = max(a + max(s, 1) - 1 for a, s in spans) // PAGE
        n = last - first + 1
        verdict = "ok" if n <= pages else f"more than {pages}"
        print(f"{name}: {len(spans)} symbols on {n} page(s), {first * PAGE:#x}..{(last + 1) * PAGE:#x}: {verdict}")
        failed |= n > pages
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
