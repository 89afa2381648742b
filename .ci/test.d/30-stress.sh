# Stress with invariants (crates/ufutex/tests/stress.rs), optimised, for longer than the normal
# test run: 10 s per scenario with the Linux futex parker, 5 s with the portable one. Budget
# ≤ 1.5 min on 2 cores (the three scenarios run two at a time).
cargo build --release -p ufutex --tests
UFUTEX_STRESS_SECS=10 cargo test --release -p ufutex --test stress
cargo build --release -p ufutex --tests --features fallback-parker
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test stress --features fallback-parker
