#!/usr/bin/env bash
# The preload library on unmodified programs (issue 13). Usage: tests/preload/run.sh PRELOAD_SO
#  1. tests/preload/legacy.c: the same transcript of results and errnos with and without the
#     library, and its threaded scenarios pass both ways; the private calls went to ufutex.
#  2. a multi-threaded Rust std program (crates/ufutex-preload/examples/std_sync.rs);
#  3. a C++20 program on std::atomic::wait, latch, semaphore and a realtime future deadline;
#  4. perf bench futex hash, wake, wake-parallel, requeue (if perf is installed), every thread
#     accounted for, on private words and (-S) on shared ones in the table;
#  5. UFUTEX_PRELOAD=off passes everything through;
#  6. process-shared words (tests/preload/shared_mix.c: a waiter of one family of futex calls
#     woken or requeued by the other, across processes) without the library, with it (shared
#     words to the kernel) and with UFUTEX_PRELOAD_SHARED=table (to ufutex's shared table, where
#     legacy.c's transcript and the C++20 program must hold too, every call taken);
#  7. futex_waitv woken every way the kernel's is (tests/preload/waitv_watch.c: private words,
#     and private words beside shared ones, woken through the library, through the kernel, and
#     by a raw system call), in the same three ways;
#  8. random calls, good and bad (tests/preload/fuzz_calls.c): the same transcript with and
#     without the library, in both modes (the table's without read-only memory, see there);
#  9. random sleepers, wakes and requeues with known queues (tests/c/fuzz_queue.c): the
#     waiters each call wakes are the kernel's, on the kernel and through the library, on
#     private words, shared ones (the table), both (waitvs that mix them) and shared ones
#     slept on from two processes (both modes);
# 10. waits that a signal handler or a stop interrupts (tests/preload/signals.c) end or sleep
#     on as the kernel's do, in both modes, but for one documented difference;
# 11. the first wake of 128 threads in fresh processes whose table grew as they arrived, so
#     that their nodes have several homes, each rung (tests/preload/wake_after_growth.c): all
#     return, with and without the library.
source "$(dirname "$0")/../../.ci/lib.sh"
so=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stat_of() { # op file: the ufutex column of the stats line of op
  awk -v op="$1" '$1 == "ufutex-preload:" && $2 == op { print $3 }' "$2"
}
none_to_kernel() { # file: fails, showing the file, if its stats sent a futex call to the kernel
  local sent
  sent=$(awk '$1 == "ufutex-preload:" && ($2 ~ /^FUTEX_/ || $2 ~ /^futex_/) && $4 > 0 { print $2, $4 }' "$1")
  [ -z "$sent" ] || { cat "$1" >&2; echo "preload: table mode sent to the kernel: $sent" >&2; exit 1; }
}

# The table mode (UFUTEX_PRELOAD_SHARED=table) in a shared table of its own.
export UFUTEX_SHARED_DIR="$tmp/shared"
mkdir "$UFUTEX_SHARED_DIR"

cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -o "$tmp/legacy" tests/preload/legacy.c
timeout 120 "$tmp/legacy" > "$tmp/kernel.txt"
UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/legacy" > "$tmp/ufutex.txt" 2> "$tmp/stats.txt"
diff -u "$tmp/kernel.txt" "$tmp/ufutex.txt"
for op in FUTEX_WAIT FUTEX_WAKE FUTEX_WAIT_BITSET FUTEX_CMP_REQUEUE FUTEX_WAKE_OP futex_wait futex_waitv; do
  [ "$(stat_of "$op" "$tmp/stats.txt")" -gt 0 ] || { echo "preload: no $op went to ufutex" >&2; cat "$tmp/stats.txt" >&2; exit 1; }
done
echo "preload: legacy.c transcripts identical ($(wc -l < "$tmp/kernel.txt") lines)"

UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 target/release/examples/std_sync 2> "$tmp/stats.txt"
[ "$(stat_of FUTEX_WAIT_BITSET "$tmp/stats.txt")" -gt 0 ]
grep -q "^ufutex-preload (pid [0-9]*): calls by operation" "$tmp/stats.txt"
# A program that makes no futex call through syscall() is told so, in one line.
none=$(UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" env true 2>&1)
echo "$none" | grep -Eqx 'ufutex-preload \(pid [0-9]+\): no futex call through syscall\(\) or prctl\(\)' \
  || { echo "preload: statistics of a program without futex calls: $none" >&2; exit 1; }

c++ -std=c++20 -O1 -Wall -Werror -pthread -o "$tmp/cxx_sync" tests/preload/cxx_sync.cc
LD_PRELOAD="$so" timeout 120 "$tmp/cxx_sync"

if command -v perf >/dev/null && perf --version >/dev/null 2>&1; then
  # Private words (perf's default), then process-shared ones (-S) in the shared table, where
  # every futex call must go to ufutex.
  for shared in "" table; do
    for b in "hash -r 1 -t 2" "wake -t 8" "wake-parallel -t 8 -w 2" "requeue -t 8"; do
      [ -z "$shared" ] || b="$b -S"
      # shellcheck disable=SC2086 # the benchmark's words
      UFUTEX_PRELOAD_SHARED=$shared UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 perf bench futex $b > "$tmp/perf.txt" 2>&1 \
        || { cat "$tmp/perf.txt" >&2; exit 1; }
      [ "$(stat_of FUTEX_WAIT "$tmp/perf.txt")" -gt 0 ] || { cat "$tmp/perf.txt" >&2; echo "preload: perf bench futex $b did not reach ufutex" >&2; exit 1; }
      [ -z "$shared" ] || none_to_kernel "$tmp/perf.txt"
      case $b in
        wake*|requeue*) grep -Eq "(Wokeup|waking|Requeued) " "$tmp/perf.txt" || { cat "$tmp/perf.txt" >&2; exit 1; } ;;
      esac
      echo "preload: perf bench futex $b: $(grep -E '^(Averaged|Wokeup|Avg|Requeued)' "$tmp/perf.txt" | tail -1)"
    done
  done
else
  echo "preload: perf not installed; perf bench futex skipped"
fi

UFUTEX_PRELOAD=off UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/legacy" > "$tmp/off.txt" 2> "$tmp/stats.txt"
diff -u "$tmp/kernel.txt" "$tmp/off.txt"
[ -z "$(stat_of FUTEX_WAIT "$tmp/stats.txt")" ] || [ "$(stat_of FUTEX_WAIT "$tmp/stats.txt")" -eq 0 ]

cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -o "$tmp/shared_mix" tests/preload/shared_mix.c
timeout 120 "$tmp/shared_mix" > "$tmp/mix.txt" || { cat "$tmp/mix.txt" >&2; echo "preload: shared_mix fails on the kernel" >&2; exit 1; }
LD_PRELOAD="$so" timeout 120 "$tmp/shared_mix" > "$tmp/mix.txt" || { cat "$tmp/mix.txt" >&2; exit 1; }
UFUTEX_PRELOAD_SHARED=table UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/shared_mix" > "$tmp/mix.txt" 2> "$tmp/stats.txt" \
  || { cat "$tmp/mix.txt" >&2; exit 1; }
none_to_kernel "$tmp/stats.txt"
echo "preload: shared_mix, $(grep -c ' ok$' "$tmp/mix.txt") scenarios, on the kernel and through the library in both modes"
cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -o "$tmp/waitv_watch" tests/preload/waitv_watch.c
timeout 120 "$tmp/waitv_watch" > "$tmp/wv.txt" || { cat "$tmp/wv.txt" >&2; echo "preload: waitv_watch fails on the kernel" >&2; exit 1; }
LD_PRELOAD="$so" timeout 120 "$tmp/waitv_watch" > "$tmp/wv.txt" || { cat "$tmp/wv.txt" >&2; exit 1; }
UFUTEX_PRELOAD_SHARED=table UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/waitv_watch" > "$tmp/wv.txt" 2> "$tmp/stats.txt" \
  || { cat "$tmp/wv.txt" >&2; exit 1; }
[ "$(stat_of futex_waitv "$tmp/stats.txt")" -gt 0 ] || { cat "$tmp/stats.txt" >&2; echo "preload: waitv_watch's waits did not reach ufutex" >&2; exit 1; }
echo "preload: waitv_watch, $(grep -c ' ok$' "$tmp/wv.txt") scenarios, on the kernel and through the library in both modes"
# Signals (tests/preload/signals.c): a wait that a handler or a stop interrupts ends, or sleeps
# on, as the kernel's does; but for the one documented difference (README): a legacy wait with
# a timeout, which the kernel ends with EINTR even after an SA_RESTART handler, sleeps on.
cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -o "$tmp/signals" tests/preload/signals.c
legacy_timed='^FUTEX_WAIT(_BITSET)? +timeout (relative|monotonic|realtime) +(private|shared) +SA_RESTART handler '
timeout 120 "$tmp/signals" > "$tmp/k.txt"
[ "$(grep -Ec "$legacy_timed.*: ended -> -1 Interrupted" "$tmp/k.txt")" -eq 6 ] \
  || { cat "$tmp/k.txt" >&2; echo "preload: the kernel's legacy timed waits did not end with EINTR" >&2; exit 1; }
for mode in "" table; do
  UFUTEX_PRELOAD_SHARED=$mode LD_PRELOAD="$so" timeout 120 "$tmp/signals" > "$tmp/u.txt"
  diff -u <(grep -Ev "$legacy_timed" "$tmp/k.txt") <(grep -Ev "$legacy_timed" "$tmp/u.txt") \
    || { echo "preload: signals (${mode:-default} mode) differ from the kernel" >&2; exit 1; }
done
echo "preload: signals, $(grep -Evc "$legacy_timed" "$tmp/k.txt") interrupted waits end or sleep on as the kernel's, in both modes"
# Random calls (fuzz_calls.c) and random sleepers and wakes (fuzz_queue.c, which also checks
# each call against its model and exits 1 on a mismatch), on the kernel and through the library.
same_as_kernel() { # program seed steps shared-mode [argument]: both runs pass, the transcripts are the same
  local prog=$1 seed=$2 steps=$3 mode=$4 arg=${5:-}
  timeout 120 "$tmp/$prog" "$seed" "$steps" ${arg:+"$arg"} > "$tmp/k.txt" \
    || { grep MISMATCH "$tmp/k.txt" >&2; echo "preload: $prog $seed${arg:+ $arg} fails on the kernel" >&2; exit 1; }
  UFUTEX_PRELOAD_SHARED=$mode LD_PRELOAD="$so" timeout 120 "$tmp/$prog" "$seed" "$steps" ${arg:+"$arg"} > "$tmp/u.txt" \
    || { grep MISMATCH "$tmp/u.txt" >&2; echo "preload: $prog $seed${arg:+ $arg} fails through the library" >&2; exit 1; }
  diff -u "$tmp/k.txt" "$tmp/u.txt" > "$tmp/same.diff" \
    || { head -40 "$tmp/same.diff" >&2; echo "preload: $prog $seed${arg:+ $arg} (${mode:-default} mode) differs from the kernel" >&2; exit 1; }
}
cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -o "$tmp/fuzz_calls" tests/preload/fuzz_calls.c
for seed in $(seq 1 20); do
  same_as_kernel fuzz_calls "$seed" 4000 ""
  same_as_kernel fuzz_calls "$seed" 4000 table no-readonly
done
echo "preload: fuzz_calls, 20 seeds x 4000 random calls, the kernel's answers in both modes"
cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -o "$tmp/fuzz_queue" tests/c/fuzz_queue.c
for seed in $(seq 1 6); do
  same_as_kernel fuzz_queue "$seed" 400 ""
done
for seed in $(seq 1 3); do
  same_as_kernel fuzz_queue "$seed" 400 table shared
  for mode in "" table; do
    same_as_kernel fuzz_queue "$seed" 400 "$mode" mixed
    same_as_kernel fuzz_queue "$seed" 400 "$mode" cross
  done
done
echo "preload: fuzz_queue, 6 seeds x 400 steps on private words, 3 on shared ones in the table, 3 mixed and 3 across two processes in both modes: the kernel's waiters woken"
UFUTEX_PRELOAD_SHARED=table UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/legacy" > "$tmp/table.txt" 2> "$tmp/stats.txt"
diff -u "$tmp/kernel.txt" "$tmp/table.txt"
none_to_kernel "$tmp/stats.txt"
UFUTEX_PRELOAD_SHARED=table UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/cxx_sync" 2> "$tmp/stats.txt"
none_to_kernel "$tmp/stats.txt"
echo "preload: table mode: legacy.c's transcript identical, the C++20 program passes, no futex call to the kernel"
# The first wake of many after the table grew (tests/preload/wake_after_growth.c): each round a
# fresh process, on the kernel and through the library (private words: the table mode changes
# nothing here).
cc -std=gnu11 -O1 -g -Wall -Wextra -Werror -pthread -o "$tmp/wake_after_growth" tests/preload/wake_after_growth.c
timeout 120 "$tmp/wake_after_growth" 6 128 > /dev/null
UFUTEX_PRELOAD_STATS=1 LD_PRELOAD="$so" timeout 120 "$tmp/wake_after_growth" 24 128 > "$tmp/wag.txt" 2> "$tmp/stats.txt" \
  || { cat "$tmp/wag.txt" "$tmp/stats.txt" >&2; exit 1; }
awk '$1 == "ufutex-preload:" && $2 == "FUTEX_WAIT" && $3 > 0 { found = 1 } END { exit !found }' "$tmp/stats.txt" \
  || { cat "$tmp/stats.txt" >&2; echo "preload: wake_after_growth did not reach ufutex" >&2; exit 1; }
echo "preload: $(cat "$tmp/wag.txt")"
echo "preload: ok"
