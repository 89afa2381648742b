# Domains and NUMA beyond `cargo test`: the NUMA tests again with virtual nodes forced through
# the environment (UFUTEX_NUMA_NODES, read once per process), and the loom model of a requeue
# between two node tables racing a resize (shares target/loom with 25-loom.sh).
set -euo pipefail
UFUTEX_NUMA_NODES=3 cargo test -p ufutex --test numa
RUSTFLAGS="--cfg ufutex_loom" LOOM_MAX_PREEMPTIONS=1 cargo test --release -p ufutex --test loom_numa --target-dir target/loom
