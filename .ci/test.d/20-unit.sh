# Unit, integration and doc tests: with the Linux futex parker, then (unit and integration
# tests) with the portable one. The doc examples run once: they show the API, whichever parker
# sleeps under it, and a second build and run of 129 of them took ~15 s.
set -euo pipefail
cargo test --workspace
cargo test -p ufutex --features fallback-parker --lib --tests
