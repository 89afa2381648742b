# The preload library (issue 13): unmodified programs' futex calls through syscall() run on
# ufutex — a C transcript compared with the kernel's, a Rust std program, a C++20 program and
# the kernel's own perf bench futex (tests/preload/run.sh) — and the layout and timing checks
# below.
set -euo pipefail
# The library as shipped (scripts/install.sh builds it with the dist profile); the Rust program
# it runs under is an ordinary release build.
cargo build --profile dist -p ufutex-preload
cargo build --release -p ufutex-preload --example std_sync
tests/preload/run.sh target/dist/libufutex_preload.so
# The hot code and data of both shipped libraries still on the few pages they were gathered on
# (crates/ufutex/src/hot_code.rs).
python3 scripts/hot-layout.py target/dist/libufutex_preload.so
cargo build --profile dist -p ufutex-c
python3 scripts/hot-layout.py target/dist/libufutex.so
# Every entry of both libraries' tables of inline loads names a load, not the padding the
# build puts before jumps (scripts/fault-table.py; x86-64, where that padding is made).
if [ "$(uname -m)" = x86_64 ]; then
  python3 scripts/fault-table.py target/dist/libufutex_preload.so
  python3 scripts/fault-table.py target/dist/libufutex.so
fi
# perf's cold requeue timed call by call (tests/preload/bench_cold_requeue.c), on the kernel
# and through the library: a smoke run (numbers come from a real run, see BENCHMARKS.md).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -O2 -Wall -Wextra -Werror -pthread -o "$tmp/bench_cold_requeue" tests/preload/bench_cold_requeue.c
timeout 60 "$tmp/bench_cold_requeue" 2 8 1 2 >/dev/null
LD_PRELOAD="$PWD/target/dist/libufutex_preload.so" timeout 60 "$tmp/bench_cold_requeue" 2 8 1 2 >/dev/null
