# ufutex::sync through the C ABI: the mutex and condvar test against the built library (their
# loom models run in 25-loom).
set -euo pipefail
cargo build --release -p ufutex-c
cc -Wall -Wextra -Werror -Iinclude tests/c/sync_test.c -Ltarget/release -lufutex -lpthread -o target/release/sync_test
LD_LIBRARY_PATH=target/release target/release/sync_test
# A process's first lock, trylock or unlock, which looks glibc's single-thread flag up first.
for op in lock trylock unlock; do
  LD_LIBRARY_PATH=target/release target/release/sync_test "$op"
done
