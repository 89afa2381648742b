# Formatting and lints, as required before every commit.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
