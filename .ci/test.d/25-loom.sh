# Every loom model: the core protocol (loom_core), the NUMA requeue racing a resize (loom_numa),
# the handoff mutex and condvar (loom_sync), and the models inside the library (the bell, the
# bucket lock, named and shared tables: --lib). A separate target dir keeps the loom-cfg build
# from invalidating the normal one.
#
# A model runs on one thread, and two of them take minutes each on a slow host (~170 s and
# ~245 s on an AMD EPYC family 23), so they run in two lanes, one per CPU: lane 1 is the mutex's
# model at three preemptions; lane 2 is the core model at three preemptions and then the rest.
# Lane 1, the longer, starts as soon as its executable is built (run directly: a `cargo test`
# would wait for the build of the others to let go of the target directory).
set -euo pipefail
export RUSTFLAGS="--cfg ufutex_loom"
loom() { cargo test --release -p ufutex --target-dir target/loom "$@"; }
sync_bin=$(loom --test loom_sync --no-run --message-format=json-render-diagnostics |
  python3 .ci/test-executable.py loom_sync)

lane1() {
  # Three preemptions at least (the model raises a lower bound itself).
  LOOM_MAX_PREEMPTIONS=3 "$sync_bin" --exact handoff_in_flight_at_three_preemptions
}
lane2() {
  # Its window (a node between two groups) takes three preemptions to reach (which also covers
  # every execution with two, so the next run skips it).
  LOOM_MAX_PREEMPTIONS=3 loom --test loom_core -- --exact a_timeout_races_a_requeue_of_part_of_a_group
  # The three-thread resize+requeue model's state space is explored with one preemption; the
  # others with two.
  LOOM_MAX_PREEMPTIONS=2 loom --test loom_core -- --skip resize_races_requeue \
    --skip a_timeout_races_a_requeue_of_part_of_a_group
  LOOM_MAX_PREEMPTIONS=1 loom --test loom_core -- --exact resize_races_requeue
  # The same protocol where membarrier is unavailable: both sides fence (membarrier.rs).
  UFUTEX_LOOM_FENCE=symmetric LOOM_MAX_PREEMPTIONS=2 loom --test loom_core -- --skip resize_races_requeue
  LOOM_MAX_PREEMPTIONS=1 loom --test loom_numa
  # One model at a time: the lock's models and the sync models set process-wide switches
  # (the quiet unlock and the hand-over under loom, the starvation policy) before they start.
  LOOM_MAX_PREEMPTIONS=2 loom --lib -- --test-threads=1
  LOOM_MAX_PREEMPTIONS=2 loom --test loom_sync -- --test-threads=1 --skip handoff_in_flight_at_three_preemptions
}

# Lane 1 in the background (a failure in lane 2 stops it too).
export -f lane1
export sync_bin
bg_start "lane 1 (loom_sync at three preemptions)" bash -c lane1
# The rest, built once, so that lane 2's runs do not each build.
loom --test loom_core --test loom_numa --lib --no-run
lane2
bg_finish
