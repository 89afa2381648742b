# Formatting and lints, as required before every commit.
set -euo pipefail
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# Imports point down (DESIGN.md): a cycle among the library's modules fails here.
python3 scripts/module-cycles.py
