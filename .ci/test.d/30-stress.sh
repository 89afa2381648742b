# Stress with invariants (crates/ufutex/tests/stress.rs), optimised and longer than in the normal
# test run: 10 s with the Linux futex parker, 5 s with the portable one; the three scenarios
# (default domain, 2 buckets, live resizes) run at once. Budget ≤ 1.5 min on 2 cores.
set -euo pipefail
UFUTEX_STRESS_SECS=10 cargo test --release -p ufutex --test stress -- --test-threads=3
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test stress --features fallback-parker -- --test-threads=3
