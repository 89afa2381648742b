# Stress with invariants (crates/ufutex/tests/stress.rs), optimised and longer than in the normal
# test run: 10 s with the Linux futex parker, 5 s with the portable one; the three scenarios
# (default domain, 2 buckets, live resizes) run at once. The mutex and condvar with every path
# mixed (sync_stress.rs), 4 s per starvation policy, and fresh mutexes contended for the first
# time (sync_first_contention.rs), 4 s. Then the process-shared table: every wake counted once
# across processes for 6 s (shared_stress.rs), rings that wake only the waiters taken, also after
# a requeue to another bucket, 5 s each (shared_bell.rs, shared_requeue_bell.rs), children whose
# threads make their first shared calls together, each in the child's own slot, 5 s
# (shared_first_call.rs), random SIGKILLs under load for 15 s (thousands of kills), and 300
# segments scribbled over; and a namespace of named objects under random SIGKILLs
# for 8 s (counted ones too, and 400 forks while a thread counts), and handles racing the reuse of
# their objects' slots for 5 s. Then 300 forks amid waits, wakes, requeues and resizes, each
# child checking that it has none of the parent's waiters and no lock held (fork.rs), and 500
# forks amid a fresh process's first calls, each child making its own, and 500 children made
# without the handlers while a thread holds the gate (fork_setup.rs). Budget ≤ 2.5 min on 2
# cores. Also a waiter racing the wake-op's two looks, private and shared, 10 s
# (wake_op.rs); rounds of 80 sleepers over several ring words, woken all at once, by two
# wakers or a few at a time, every one returning once a round, 6 s (wake_many.rs); and the
# preload's watched shared waits woken by the library and by the kernel alone, 6 s
# (shared_watch.rs), and its waitvs of private and shared words so woken, 6 s (waitv_watch.rs).
set -euo pipefail
UFUTEX_STRESS_SECS=10 cargo test --release -p ufutex --test stress -- --test-threads=3
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test stress --features fallback-parker -- --test-threads=3
UFUTEX_STRESS_SECS=10 cargo test --release -p ufutex --test wake_op
UFUTEX_STRESS_SECS=6 cargo test --release -p ufutex --test wake_many
UFUTEX_STRESS_SECS=4 cargo test --release -p ufutex --test sync_stress
UFUTEX_STRESS_SECS=4 cargo test --release -p ufutex --test sync_first_contention
UFUTEX_STRESS_SECS=6 cargo test --release -p ufutex --test shared_stress
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test shared_bell
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test shared_requeue_bell
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test shared_first_call
UFUTEX_STRESS_SECS=6 cargo test --release -p ufutex --test shared_watch
UFUTEX_STRESS_SECS=6 cargo test --release -p ufutex --test waitv_watch
UFUTEX_STRESS_SECS=15 cargo test --release -p ufutex --test shared_kill
UFUTEX_CORRUPT_TRIALS=300 cargo test --release -p ufutex --test shared_corrupt
UFUTEX_STRESS_SECS=8 cargo test --release -p ufutex --test named_kill
UFUTEX_STRESS_SECS=8 cargo test --release -p ufutex --test named_counted
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test named_stale
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test signal_wakes
UFUTEX_STRESS_SECS=10 cargo test --release -p ufutex --test fork
UFUTEX_STRESS_SECS=5 cargo test --release -p ufutex --test fork_setup
