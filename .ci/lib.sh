# Sourced by every CI script and step: stop at the first failing command and say which one.
# Without this, a failing `[ ... ]` or a `timeout` under `set -e` ends a step silently.
set -eEuo pipefail
ci_failed() { # status line command
  local why=""
  [ "$1" -eq 124 ] && why=" (timed out)"
  echo "CI FAILED: ${BASH_SOURCE[1]:-?}:$2: $3 exited with status $1$why" >&2
}
trap 'ci_failed $? $LINENO "$BASH_COMMAND"' ERR
