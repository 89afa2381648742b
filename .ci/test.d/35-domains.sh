# Domains and NUMA beyond `cargo test`: the NUMA tests again with virtual nodes forced through
# the environment (UFUTEX_NUMA_NODES, read once per process). The loom model of a requeue
# between two node tables racing a resize runs in 25-loom.
set -euo pipefail
UFUTEX_NUMA_NODES=3 cargo test -p ufutex --test numa
