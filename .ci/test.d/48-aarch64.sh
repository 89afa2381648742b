# aarch64, emulated by qemu-user: the library's unit tests, most of its integration tests
# (private and shared words, named objects), the preload library under a Rust std program and
# the C ABI's suite, built for aarch64 and run there — the code that differs by CPU (the fault
# fixup's assembly and handler, which the C ABI's fault-safe reads take; errno through the
# thread pointer; spin hints) and everything above it. (Emulated on this x86-64 host, memory is
# ordered as x86's: the loom models, not this step, prove the orderings.)
# Left out, as qemu-user 7.2 cannot serve them (the x86-64 steps run them all):
# - kernel mode for shared words (`shared::kernel`): qemu has no futex2 calls;
# - the portable fault probe (`probe_`): qemu has no process_vm_readv, and its madvise
#   changes nothing;
# - NUMA placement (`real_tables_are_bound_to_their_node`): no memory policy under qemu;
# - integration tests that start another program (binfmt_misc would be needed: `fork`,
#   `named`, `shared_process`), that end threads holding named mutexes (`named_thread_exit`:
#   a forked child of its multithreaded process starts a thread, and qemu-user 7.2 aborts
#   there on its own assertion, `qemu_plugin_vcpu_init_hook`, with no ufutex call made: a
#   plain Rust program that forks beside a sleeping thread and spawns one in the child does
#   the same; BENCHMARKS.md, eighty-first session), that
#   limit the address space (`no_memory`: qemu's own mappings count), or that rely on a wait
#   restarted under SA_RESTART (`signals`, `signal_wakes`: the legacy wait that the parker
#   falls back to without futex2 answers EINTR there, parker/futex.rs); `domain_slots` passes
#   but takes half a minute emulated;
# - `shared_kill`: in one CI run here its last check failed under qemu (a wake found 2 of the
#   3 waiters a requeue had just counted); it passed 112 runs of 112 alone under qemu since
#   (60 of them beside two CPU hogs) and 46 of 46 in a later session (BENCHMARKS.md, sixty-fifth
#   session), and passes natively (20-unit). Not understood yet: kept out so that CI does not
#   flake on it. The test now reports each waiter's exit (0, or the errno its wait failed
#   with), which tells a waiter that left (EINTR) from a live waiter that a wake did not count.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
# qemu-user 7.2 keeps its translated blocks in a glib tree, whose nodes come from glib's slice
# allocator, whose locks nothing resets in a forked child: a guest fork while another guest
# thread translated code left the child asleep on such a lock for ever, in `g_slice_alloc` under
# `tcg_tb_insert` (a plain Rust program that forks beside a busy thread, no ufutex in it: 5 hung
# children in ~28,000 forks; the lib suite's `fork::tests::handlers_registered_twice_take_the_gate_once`
# once in CI: BENCHMARKS.md, eighty-seventh session). With `always-malloc` glib takes glibc's
# malloc, which glibc's fork leaves consistent in the child (0 hung in 21,000 forks). (qemu
# passes the variable on to the guest, which ignores it.)
export G_SLICE=always-malloc
# Each run has a time limit of 15 minutes (each takes under 2 here, build included): a test
# that hangs under qemu then fails the step, instead of holding CI to its own limit (a child's
# deadlock on an inherited lock did, once: BENCHMARKS.md, sixty-fifth session).
timeout 900 cargo test -p ufutex --lib --target aarch64-unknown-linux-gnu --target-dir target/aarch64 -- \
  --test-threads 2 --skip shared::kernel --skip probe_ --skip real_tables_are_bound_to_their_node
timeout 900 cargo test -p ufutex --target aarch64-unknown-linux-gnu --target-dir target/aarch64 \
  --test wake --test wake_mask --test requeue --test waitv --test sizes --test resize \
  --test resize_storm --test wait_timeout --test wait_wouldblock --test stress --test numa \
  --test sync_mutex --test sync_condvar --test sync_starvation \
  --test shared_segment --test shared_stress --test shared_corrupt \
  --test shared_recovery --test shared_register_full --test wake_op --test shared_watch \
  --test named_counted --test named_grow --test named_kill --test named_stale --test named_version
# The preload library on aarch64: a Rust std program's futex calls through syscall() (the
# fixed-argument interposer, the thread-local re-entry flag) run on ufutex.
cargo build -p ufutex-preload --target aarch64-unknown-linux-gnu --target-dir target/aarch64 --lib --example std_sync
out=target/aarch64/aarch64-unknown-linux-gnu/debug
stats=$(timeout 300 qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_PRELOAD="$PWD/$out/libufutex_preload.so" \
  -E UFUTEX_PRELOAD_STATS=1 "$out/examples/std_sync" 2>&1)
echo "$stats" | grep -q '^std_sync: ok' || { echo "$stats" >&2; exit 1; }
echo "$stats" | awk '$2 == "FUTEX_WAIT_BITSET" && $3 > 0 { found = 1 } END { exit !found }' \
  || { echo "$stats" >&2; echo "aarch64: no FUTEX_WAIT_BITSET went to ufutex" >&2; exit 1; }
echo "aarch64: std_sync through the preload library: $(echo "$stats" | awk '$2 ~ /^FUTEX/ { printf "%s %s ", $2, $3 }')"
# The C ABI on aarch64: the C suite and 10^5 random calls, built with the cross compiler
# against the header and the aarch64 libufutex.so. Left out: `test_no_memory` (an address-space
# limit counts qemu's own mappings) and `test_fork_private` (qemu-user's fork of a process whose
# other threads sleep failed its own assertions in three runs of four).
cargo build -p ufutex-c --target aarch64-unknown-linux-gnu --target-dir target/aarch64
ctmp=$(mktemp -d)
trap 'rm -rf "$ctmp"' EXIT
for t in ufutex_test fuzz_abi; do
  aarch64-linux-gnu-gcc -std=c11 -O1 -g -Wall -Wextra -Werror -pthread -Iinclude -o "$ctmp/$t" "tests/c/$t.c" \
    -L"$out" -lufutex
done
# (The skip list through qemu's own environment: its -E splits values at commas.)
UFUTEX_TEST_SKIP=test_no_memory,test_fork_private timeout 300 \
  qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$PWD/$out" "$ctmp/ufutex_test"
timeout 300 qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$PWD/$out" "$ctmp/fuzz_abi" 100000 1
