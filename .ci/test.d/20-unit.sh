# Unit, integration and doc tests: with the Linux futex parker, then with the portable one.
set -euo pipefail
cargo test --workspace
cargo test -p ufutex --features fallback-parker
