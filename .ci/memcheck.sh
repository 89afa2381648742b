# Memory safety of the unsafe core (Miri cannot be installed on these machines): the queue's and
# the table's unit tests under valgrind memcheck. They push, unlink, splice and migrate real
# nodes through raw pointers, so a use after free, an uninitialised read or a leaked node shows
# up here as an error (exit status 99); "definite" leaks fail the step, the harness's own
# "possibly lost" thread handles are neither errors nor shown.
#
# Valgrind (3.19 here) does not know the futex_waitv/futex_wait syscalls that the default parker
# sleeps in, so the tests run with the portable parker (--features fallback-parker).
#
#     .ci/memcheck.sh BIN     (BIN: the library's unit-test executable of that build)
#
# 20-unit.sh builds it and runs this beside its own test runs: ~75 s of one CPU (valgrind runs
# one thread at a time) that the test runs, which mostly wait, leave free.
set -euo pipefail
filters=(queue::tests:: table::tests::)
bin=${1:?usage: .ci/memcheck.sh BIN}
[ -x "$bin" ] || { echo "memcheck: $bin is not an executable" >&2; exit 1; }

# A renamed module must not turn this step into a run of nothing: each filter selects tests.
listed=$("$bin" --list "${filters[@]}")
for f in "${filters[@]}"; do
  n=$(grep -c "^$f.*: test\$" <<<"$listed" || true)
  [ "$n" -gt 0 ] || { echo "memcheck: no unit test matches $f" >&2; exit 1; }
  echo "memcheck: $n tests under $f"
done

timeout 300 valgrind -q --tool=memcheck --error-exitcode=99 --leak-check=full \
  --show-leak-kinds=definite --errors-for-leak-kinds=definite \
  --suppressions=tests/c/valgrind.supp "$bin" "${filters[@]}"
