# The benchmark tool: a quick report whose files must all exist (its tests ran in 20-unit's
# `cargo test --workspace`).
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The dev profile, not the README's `dist`: this run checks that the report is whole, not its
# figures, and 20-unit's `cargo test --workspace` has built the bench already (`release` built
# it again, ~60 s of this step; the run itself takes ~10 s more than `release`'s, and runs
# every workload with overflow checks on). The preload library must sit beside the binary
# (perf bench runs through it).
cargo build -q -p ufutex-preload
cargo run -q -p ufutex-bench -- report --quick --out "$out"
for f in report.md report.json slots-sweep.svg waitv-entries.svg ping-pong.svg lock-cs-8threads.svg fairness-8threads.svg; do
  test -s "$out/$f" || { echo "50-bench: report --quick did not write $f" >&2; exit 1; }
done
grep -q '"benches"' "$out/report.json" && grep -q '^## Goals' "$out/report.md" \
  || { echo "50-bench: report.json or report.md lacks its sections" >&2; exit 1; }
echo "50-bench: report --quick wrote $(ls "$out" | wc -l) files"
# The C model of waking many (models/wake_many.c, cited by BENCHMARKS.md): it builds, and one
# repetition of each mode runs to its end (a lost wakeup in a mode would hang here).
cc -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -o "$out/wake_many" models/wake_many.c
for m in 0 1 -1 4 100 101 200 201 202 300; do timeout 60 "$out/wake_many" 1 "$m" 2 > /dev/null; done
timeout 60 "$out/wake_many" 1 300 1 > /dev/null
echo "50-bench: models/wake_many.c runs every mode"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -o "$out/cold_requeue" models/cold_requeue.c
timeout 60 "$out/cold_requeue" 1 | grep -q '^total' || { echo "50-bench: models/cold_requeue.c printed no total" >&2; exit 1; }
echo "50-bench: models/cold_requeue.c runs"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -pthread -o "$out/first_call" models/first_call.c
timeout 60 "$out/first_call" | grep -q '^first' || { echo "50-bench: models/first_call.c printed nothing" >&2; exit 1; }
echo "50-bench: models/first_call.c runs"
# scripts/wake-trace.py (BENCHMARKS.md cites it) on a made-up trace of two waiters: the span
# from the first wake to the last switch-out, each waiter's run and the CPU left idle.
cat > "$out/trace.txt" <<'TRACE'
[000] 1.000000: sched:sched_wakeup_new: comm=b pid=11 prio=120 target_cpu=000
[000] 1.000010: sched:sched_wakeup_new: comm=b pid=12 prio=120 target_cpu=001
[001] 1.010000: sched:sched_waking: comm=b pid=11 prio=120 target_cpu=000
[001] 1.010005: sched:sched_waking: comm=b pid=12 prio=120 target_cpu=001
[000] 1.010010: sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=b next_pid=11 next_prio=120
[000] 1.010015: sched:sched_stat_runtime: comm=b pid=11 runtime=5000 [ns]
[000] 1.010016: sched:sched_switch: prev_comm=b prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
[001] 1.010020: sched:sched_stat_runtime: comm=b pid=12 runtime=7000 [ns]
[001] 1.010030: sched:sched_switch: prev_comm=b prev_pid=12 prev_prio=120 prev_state=S ==> next_comm=b next_pid=10 next_prio=120
TRACE
python3 scripts/wake-trace.py "$out/trace.txt" --waiters 2 | grep -q "medians of 1: span 30 µs, run 6.00 µs a waiter, idle 14 µs" \
  || { echo "50-bench: scripts/wake-trace.py misread its test trace" >&2; exit 1; }
echo "50-bench: scripts/wake-trace.py reads a trace"
