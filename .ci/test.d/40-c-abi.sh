# The C ABI (issue 3): install into a temporary prefix, build the C tests with
# `cc $(pkg-config --cflags --libs ufutex)` against the INSTALLED header and library, run them
# (shared and static), run the README's C example, the 10^6-call random-call driver, the
# differential test against the kernel's own futex2 calls and the queue model's random sleepers
# and wakes, then ASan/UBSan, memcheck and helgrind.
#
# Valgrind (3.19 here) does not know the futex2 futex_wait syscall (455) that the default parker
# sleeps in, so the valgrind runs use a library built with the portable parker
# (--features fallback-parker, installed under its own prefix). That parker cannot report EINTR,
# and memcheck would report the deliberate crashes of the fault-chaining test, so the suite skips
# those two tests there (UFUTEX_TEST_VALGRIND).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

scripts/install.sh "$tmp/prefix"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cflags=(-std=c11 -O1 -g -Wall -Wextra -Werror -pthread)
build() { # name source: against whatever PKG_CONFIG_PATH points at
  # shellcheck disable=SC2046 # pkg-config output is words
  cc "${cflags[@]}" -o "$tmp/$1" "$2" $(pkg-config --cflags --libs ufutex)
}

# Header vs kernel uapi (compile-time) and in C++; and alone under strict ISO C11 (no feature
# macros: clockid_t must come from the header's own includes; C11 for _Static_assert).
build abi_layout tests/c/abi_layout.c
printf '#include <ufutex.h>\nint main(void) { return UFUTEX_CREAT - 1; }\n' >"$tmp/strict.c"
# shellcheck disable=SC2046
cc -std=c11 -pedantic -Wall -Wextra -Werror -o "$tmp/strict" "$tmp/strict.c" $(pkg-config --cflags --libs ufutex)
printf '#include <ufutex.h>\nint main() { struct ufutex_waitv v = {}; return (int)sizeof(v) - 24; }\n' >"$tmp/cxx.cc"
# shellcheck disable=SC2046
c++ -Wall -Werror -o "$tmp/cxx" "$tmp/cxx.cc" $(pkg-config --cflags --libs ufutex)

build ufutex_test tests/c/ufutex_test.c
build fuzz_abi tests/c/fuzz_abi.c
build diff_kernel tests/c/diff_kernel.c
# The README's C example, exactly as printed.
awk '/^## C ABI/ { in_section = 1 } in_section && /^```c$/ { code = 1; next } code && /^```$/ { exit } code' \
  README.md > "$tmp/example.c"
build example "$tmp/example.c"
# Static: the archive plus its private libraries; the result must not need libufutex.so.
# shellcheck disable=SC2046
cc "${cflags[@]}" -o "$tmp/ufutex_test_static" tests/c/ufutex_test.c $(pkg-config --cflags ufutex) \
  -Wl,-Bstatic $(pkg-config --libs ufutex) -Wl,-Bdynamic $(pkg-config --static --libs-only-l ufutex | sed 's/-lufutex//')
if ldd "$tmp/ufutex_test_static" | grep -q libufutex; then
  echo "static test binary still needs libufutex.so" >&2
  exit 1
fi

export LD_LIBRARY_PATH="$tmp/prefix/lib"
"$tmp/abi_layout"
"$tmp/cxx"
timeout 120 "$tmp/ufutex_test"
timeout 120 "$tmp/ufutex_test_static"
# The portable way of reading caller memory (a probe syscall, no fault handler), end to end,
# and the library's own C ABI unit tests in that mode (the unit step built them).
UFUTEX_FAULT_PROBE=syscall timeout 120 "$tmp/ufutex_test"
UFUTEX_FAULT_PROBE=syscall cargo test -p ufutex --lib ffi
[ "$(timeout 60 "$tmp/example")" = woken ]
# Loaded with dlopen and closed while a thread that waited lives: that thread's exit runs the
# library's destructor, so the library keeps itself loaded once a thread has waited.
# shellcheck disable=SC2046
cc "${cflags[@]}" -o "$tmp/dlclose" tests/c/dlclose.c $(pkg-config --cflags ufutex) -ldl
[ "$(timeout 60 "$tmp/dlclose" "$tmp/prefix/lib/libufutex.so")" = ok ]
# shellcheck disable=SC2046
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$tmp/bench_fastpath" tests/c/bench_fastpath.c $(pkg-config --cflags --libs ufutex)
"$tmp/bench_fastpath" 1 1000 >/dev/null # smoke run; numbers come from a real run (see the report)
# shellcheck disable=SC2046
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror -o "$tmp/bench_mutex" tests/c/bench_mutex.c $(pkg-config --cflags --libs ufutex) -lpthread
"$tmp/bench_mutex" 1000 >/dev/null && "$tmp/bench_mutex" 1000 threaded >/dev/null # smoke runs
timeout 240 "$tmp/fuzz_abi" 1000000 "${UFUTEX_FUZZ_SEED:-1}"
# The same random calls to the kernel's futex2 syscalls and to ufutex: same result, same errno.
timeout 120 "$tmp/diff_kernel" 1000000 "${UFUTEX_FUZZ_SEED:-1}"
# Random sleepers (plain, masked, waitv), wakes, requeues and wake-ops at every size, private,
# shared (in one process and in two) and NUMA (two virtual nodes), each call checked against a
# model of the kernel's queues (the same program runs on the system calls, with and without
# the preload library, in 42-preload).
# shellcheck disable=SC2046
cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -DFUZZ_ABI -o "$tmp/fuzz_queue" tests/c/fuzz_queue.c $(pkg-config --cflags --libs ufutex)
for size in u8 u16 u32 u64 su8 su16 su32 su64 xu8 xu16 xu32 xu64 nu8 nu16 nu32 nu64; do
  for seed in 1 2; do
    timeout 120 "$tmp/fuzz_queue" "$seed" 300 "$size" > "$tmp/queue.txt" \
      || { grep MISMATCH "$tmp/queue.txt" >&2; echo "C ABI: fuzz_queue $seed $size differs from the model" >&2; exit 1; }
  done
done
UFUTEX_FAULT_PROBE=syscall timeout 120 "$tmp/diff_kernel" 100000 "${UFUTEX_FUZZ_SEED:-1}"
# The same drivers and the suite on a clock that reads ~20 s, as on a freshly booted machine:
# a test that takes a small absolute deadline for one in the past blocks on it there (issue 10).
.ci/fresh-clock timeout 240 "$tmp/fuzz_abi" 1000000 "${UFUTEX_FUZZ_SEED:-1}"
.ci/fresh-clock timeout 120 "$tmp/diff_kernel" 1000000 "${UFUTEX_FUZZ_SEED:-1}"
.ci/fresh-clock timeout 120 "$tmp/ufutex_test"

# AddressSanitizer + UBSan on the C side (the library itself is not instrumented): the test
# suite and 2 * 10^5 random calls.
asan=(-fsanitize=address,undefined -fno-sanitize-recover=all)
# shellcheck disable=SC2046
cc "${cflags[@]}" "${asan[@]}" -o "$tmp/ufutex_test_asan" tests/c/ufutex_test.c $(pkg-config --cflags --libs ufutex)
# shellcheck disable=SC2046
cc "${cflags[@]}" "${asan[@]}" -o "$tmp/fuzz_abi_asan" tests/c/fuzz_abi.c $(pkg-config --cflags --libs ufutex)
timeout 120 "$tmp/ufutex_test_asan"
timeout 120 "$tmp/fuzz_abi_asan" 200000 3

# Valgrind, on the portable-parker build (without the dist profile's fat LTO: the checks do
# not depend on it, and it cost this step ~7 s of link time).
UFUTEX_CARGO_FLAGS="--features fallback-parker --config profile.dist.lto=false" CARGO_TARGET_DIR=target/fallback-parker \
  scripts/install.sh "$tmp/vg" >/dev/null
export PKG_CONFIG_PATH="$tmp/vg/lib/pkgconfig" LD_LIBRARY_PATH="$tmp/vg/lib"
build ufutex_test_vg tests/c/ufutex_test.c
build fuzz_abi_vg tests/c/fuzz_abi.c
vg=(valgrind -q --error-exitcode=99)
export UFUTEX_TEST_VALGRIND=1
timeout 300 "${vg[@]}" --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite \
  --suppressions=tests/c/valgrind.supp "$tmp/ufutex_test_vg"
timeout 300 "${vg[@]}" --tool=memcheck --suppressions=tests/c/valgrind.supp "$tmp/fuzz_abi_vg" 50000 2
timeout 300 "${vg[@]}" --tool=helgrind --suppressions=tests/c/helgrind.supp "$tmp/ufutex_test_vg"
echo "C ABI: ok"
