# Formatting and lints, as required before every commit.
set -euo pipefail
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The loom build too (the models' own cfg; the other integration tests compile to nothing there).
RUSTFLAGS="--cfg ufutex_loom" cargo clippy -p ufutex --all-targets --target-dir target/loom -- -D warnings
# The code for other CPUs: aarch64 (its own fault fixup, spin hints, no TSC) builds and lints
# clean; its unit tests run under qemu-user in 48-aarch64.
cargo clippy --workspace --all-targets --target aarch64-unknown-linux-gnu --target-dir target/aarch64 -- -D warnings
# Imports point down (DESIGN.md): a cycle among the library's modules fails here.
python3 scripts/module-cycles.py
# The API documentation builds without warnings (no link to a private or missing item), the
# bench's too: its doc comments are also its --help text, which rustdoc must read as Markdown.
RUSTDOCFLAGS="-D warnings" cargo doc -p ufutex -p ufutex-preload -p ufutex-bench --no-deps
