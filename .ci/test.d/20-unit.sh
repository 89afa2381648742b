# Unit, integration and doc tests: with the Linux futex parker, then (unit and integration
# tests) with the portable one. The doc examples run once: they show the API, whichever parker
# sleeps under it, and a second build and run of 129 of them took ~15 s.
#
# Beside the test runs, valgrind's memcheck of the queue's and the table's unit tests
# (.ci/memcheck.sh) on the portable parker's build: it keeps one CPU busy for ~75 s, and the
# test runs, which mostly wait (on sleepers, children, timeouts), leave one free. As a step of
# its own after this one it added its whole time to the run.
set -euo pipefail
# Both builds first, so that memcheck starts after them, not beside them.
cargo test --workspace --no-run
# The portable parker's unit-test executable, as cargo reports it (the build that the second
# run below completes with the integration tests).
bin=$(cargo test -p ufutex --lib --features fallback-parker --no-run --message-format=json-render-diagnostics |
  python3 .ci/test-executable.py ufutex)
bg_start "memcheck (.ci/memcheck.sh)" bash -c 'source .ci/lib.sh && source .ci/memcheck.sh "$1"' memcheck "$bin"

cargo test --workspace
cargo test -p ufutex --features fallback-parker --lib --tests

bg_finish
