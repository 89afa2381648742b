# Sourced by every CI script and step: stop at the first failing command and say which one.
# Without this, a failing `[ ... ]` or a `timeout` under `set -e` ends a step silently.
set -eEuo pipefail
ci_failed() { # status line command
  local why=""
  [ "$1" -eq 124 ] && why=" (timed out)"
  echo "CI FAILED: ${BASH_SOURCE[1]:-?}:$2: $3 exited with status $1$why" >&2
}
trap 'ci_failed $? $LINENO "$BASH_COMMAND"' ERR

# bg_start LABEL CMD...: run CMD in the background, in its own process group (killed if the
# step exits first, so a failure elsewhere stops it too), its output kept for bg_finish. One
# such job per step.
bg_start() {
  bg_label=$1
  shift
  bg_log=$(mktemp)
  setsid "$@" >"$bg_log" 2>&1 &
  bg_pid=$!
  trap 'kill -- -"$bg_pid" 2>/dev/null || true; rm -f "$bg_log"' EXIT
}

# bg_finish: wait for bg_start's job, show its output under its label; its exit status.
bg_finish() {
  local status=0
  wait "$bg_pid" || status=$?
  echo "--- $bg_label, exit status $status:"
  cat "$bg_log"
  return "$status"
}
