#!/usr/bin/env python3
"""Where the time of a wake of many goes, from the scheduler's own trace points.

The guest has no hardware counters, but the scheduler's trace points work. Record a `wake` run
of the benchmark and feed this script perf's text dump:

    perf sched record -o wake.data ./target/dist/ufutex-bench wake --impl kernel --reps 8 -q
    perf script -i wake.data -F cpu,time,event,trace > wake.txt
    python3 scripts/wake-trace.py wake.txt [--waiters 128]

Each repetition's waiters are the next WAITERS threads the trace sees created. Its wake is the
first wake of one of them after a quiet spell (the benchmark lets the waiters settle asleep
for 0.5 ms before it wakes them). For each repetition the script prints:

- span: from that first wake until the last waiter was switched out again (it ran, then went
  to sleep on the benchmark's release word): the trace's "until all ran";
- woken: how many waiters were woken in the window, and from which CPUs the wakes were made;
- run: the CPU time each waiter ran between its wake and its switch-out (median), which is
  the kernel's work of waking it, switching to it, returning from its wait and sleeping again,
  plus whatever the waiter's library does in user space;
- on: how many waiters ran on each CPU;
- idle: the CPUs' idle stretches that begin inside the span (up to its end). A CPU that is
  already idle when the first wake is made is not counted until it has run and gone idle
  again: the trace cannot always tell whether that first wake was the waker's (it may come
  from an interrupt on an idle CPU), so the figure is a lower bound.

Tracing slows every switch down, so compare two recordings with each other, not with the
benchmark's own figures.
"""

import argparse
import collections
import re
import statistics
import sys

LINE = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)")
PID = re.compile(r" pid=(\d+)")
RUNTIME = re.compile(r" pid=(\d+) runtime=(\d+)")
SWITCH = re.compile(r"prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> .* next_pid=(\d+)")
QUIET_S = 0.00045


def events(path):
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                out.append((float(m.group(2)), int(m.group(1)), m.group(3).removeprefix("sched:"), m.group(4)))
    out.sort(key=lambda e: e[0])
    return out


def first_wake_after_quiet(ev, pids, after):
    """Index in `ev` of the first wake of `pids` that follows a quiet spell, or None."""
    last = after
    for i, (t, _, e, r) in enumerate(ev):
        if t <= after or e != "sched_waking":
            continue
        if PID.search(r).group(1) in pids:
            if t - last >= QUIET_S:
                return i
            last = t
    return None


def repetition(ev, pids, created):
    i = first_wake_after_quiet(ev, pids, created)
    if i is None:
        return None
    t0 = ev[i][0]
    woken, done, run = {}, {}, collections.defaultdict(int)
    src = collections.Counter()
    idle, idle_since = collections.defaultdict(float), {}
    for t, cpu, e, r in ev[i:]:
        if e == "sched_waking":
            p = PID.search(r).group(1)
            if p in pids and p not in woken:
                woken[p] = t
                src[cpu] += 1
        elif e == "sched_stat_runtime":
            m = RUNTIME.search(r)
            if m.group(1) in woken and m.group(1) not in done:
                run[m.group(1)] += int(m.group(2))
        elif e == "sched_switch":
            prev, state, nxt = SWITCH.search(r).groups()
            if prev in woken and prev not in done and state != "R":
                done[prev] = (t, cpu)
            if nxt == "0":
                idle_since[cpu] = t
            elif prev == "0" and cpu in idle_since:
                idle[cpu] += t - idle_since.pop(cpu)
        if len(done) == len(pids):
            break
    if len(done) < len(pids):
        return None
    end = max(t for t, _ in done.values())
    for cpu, since in idle_since.items():
        idle[cpu] += end - since
    return {
        "span": (end - t0) * 1e6,
        "from": dict(sorted(src.items())),
        "run": statistics.median(run[p] / 1e3 for p in done),
        "on": dict(sorted(collections.Counter(cpu for _, cpu in done.values()).items())),
        "idle": sum(idle.values()) * 1e6,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dump", help="perf script -F cpu,time,event,trace output")
    ap.add_argument("--waiters", type=int, default=128)
    a = ap.parse_args()
    ev = events(a.dump)
    created = [(t, PID.search(r).group(1)) for t, _, e, r in ev if e == "sched_wakeup_new"]
    reps = []
    for k in range(0, len(created) - a.waiters + 1, a.waiters):
        group = created[k : k + a.waiters]
        rep = repetition(ev, {p for _, p in group}, group[-1][0])
        if rep is None:
            print(f"repetition {k // a.waiters}: no complete wake found", file=sys.stderr)
            continue
        reps.append(rep)
        print(
            f"span {rep['span']:6.0f} µs  wakes from CPUs {rep['from']}  run {rep['run']:5.2f} µs a waiter"
            f"  on CPUs {rep['on']}  idle {rep['idle']:5.0f} µs"
        )
    if reps:
        print(
            f"medians of {len(reps)}: span {statistics.median(r['span'] for r in reps):.0f} µs, "
            f"run {statistics.median(r['run'] for r in reps):.2f} µs a waiter, "
            f"idle {statistics.median(r['idle'] for r in reps):.0f} µs"
        )


if __name__ == "__main__":
    main()
