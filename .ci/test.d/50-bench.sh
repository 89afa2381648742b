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
