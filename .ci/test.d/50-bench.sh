# The benchmark tool: its tests, then a quick report whose files must all exist.
set -euo pipefail
cargo test -p ufutex-bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo build --profile dist -q -p ufutex-preload
cargo run --profile dist -q -p ufutex-bench -- report --quick --out "$out"
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
