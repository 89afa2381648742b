# The benchmark tool: its tests, then a quick report whose files must all exist.
set -euo pipefail
cargo test -p ufutex-bench
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo run --release -q -p ufutex-bench -- report --quick --out "$out"
for f in report.md report.json slots-sweep.svg waitv-entries.svg ping-pong.svg lock-cs-8threads.svg fairness-8threads.svg; do
  test -s "$out/$f" || { echo "50-bench: report --quick did not write $f" >&2; exit 1; }
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["benches"], "no benches"' "$out/report.json" 2>/dev/null \
  || grep -q '"benches"' "$out/report.json"
echo "50-bench: report --quick wrote $(ls "$out" | wc -l) files"
