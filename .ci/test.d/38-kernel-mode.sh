# Process-shared words sent to the kernel's futex (UFUTEX_SHARED=kernel, read once per process
# from the environment): every doc example (the shared and named ones use shared words) and
# the named-object tests whose waits the mode can serve (it has no requeue of 8-bit words,
# which tests/named.rs uses to see a waiter queued). The mode's own tests run in `cargo test`.
set -euo pipefail
export UFUTEX_SHARED=kernel
cargo test --release -p ufutex --doc
cargo test --release -p ufutex --test named_counted --test named_thread_exit --test named_grow --test named_stale
