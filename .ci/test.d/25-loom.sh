# loom models of the core protocol (bounded preemptions; a separate target dir keeps the
# loom-cfg build from invalidating the normal one).
set -euo pipefail
export RUSTFLAGS="--cfg ufutex_loom"
# The three-thread resize+requeue model's state space is explored with one preemption; the
# others with two.
LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --test loom_core --target-dir target/loom -- --skip resize_races_requeue
LOOM_MAX_PREEMPTIONS=1 cargo test --release -p ufutex --test loom_core --target-dir target/loom -- --exact resize_races_requeue
# Its window (a node between two groups) takes three preemptions to reach: ~1 min.
LOOM_MAX_PREEMPTIONS=3 cargo test --release -p ufutex --test loom_core --target-dir target/loom \
  -- --exact a_timeout_races_a_requeue_of_part_of_a_group
# The same protocol where membarrier is unavailable: both sides fence (membarrier.rs).
UFUTEX_LOOM_FENCE=symmetric LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --test loom_core \
  --target-dir target/loom -- --skip resize_races_requeue
# The Linux parker's bell protocol on a model of the kernel futex (unit tests in parker/linux.rs).
LOOM_MAX_PREEMPTIONS=2 cargo test --release -p ufutex --lib --target-dir target/loom -- --test-threads=1
