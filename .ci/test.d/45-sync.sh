# ufutex::sync: the C ABI test against the built library, then the loom models of the mutex
# and condvar (own target dir: the loom cfg would otherwise invalidate the normal build).
set -euo pipefail
cargo build --release -p ufutex-c
cc -Wall -Wextra -Werror -Iinclude tests/c/sync_test.c -Ltarget/release -lufutex -lpthread -o target/release/sync_test
LD_LIBRARY_PATH=target/release target/release/sync_test
RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=2 CARGO_TARGET_DIR=target/loom \
  cargo test --release -p ufutex --test loom_sync -- --test-threads=1
