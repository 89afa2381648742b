#!/usr/bin/env python3
"""Build one binary once, then link it again in random code layouts: is a difference layout?

A difference between two builds may come from what the code does or only from where the linker
put it. This script answers the second part without recompiling: it builds `--bin` of
`--package` with `--profile dist` (one fat-LTO object) keeping that object (`-C save-temps`),
then runs the same final link again `--count` times, each with lld's `--symbol-ordering-file`
putting the text symbols whose names start with `--prefix` first, in a random order (which
moves every function of the binary). It writes `<out>/layout-0` (the default order) and
`<out>/layout-1` … `<out>/layout-N`, and prints where `--show`'s symbols landed in each.

Compare the layouts side by side in one run, in a shuffled order each turn (the host's phases
move every binary alike). If every layout of build A beats every layout of build B, the code
decides, not the layout: the forty-first session found the mutex's "layout lottery" that way
(BENCHMARKS.md).

Needs the lld linker, the default of Rust's x86_64 Linux target since 1.90. Builds into
`target/relink`, so the usual `target/dist` is left alone.

    scripts/relink-layouts.py --count 8 --out /tmp/layouts --show sync::raw_mutex::RawMutex::lock_slow
"""

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def link_command(package: str, binary: str) -> list[str]:
    """Build the binary keeping its object; return its final link command (env assignments first)."""
    # A changed source is the one thing that makes cargo link again: touch the binary's root.
    main = ROOT / "crates" / package / "src" / "main.rs"
    if main.exists():
        main.touch()
    out = subprocess.run(
        ["cargo", "rustc", "--profile", "dist", "-p", package, "--bin", binary, "--target-dir",
         str(ROOT / "target" / "relink"), "--", "-C", "save-temps", "--print", "link-args"],
        cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    lines = [line for line in out.stdout.splitlines() if ".rcgu.o" in line]
    if not lines:
        sys.exit("cargo printed no link command (was the binary already up to date?)")
    return shlex.split(lines[-1])


def text_symbols(obj: str) -> list[str]:
    nm = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    return [f[2] for f in (line.split() for line in nm.splitlines()) if len(f) == 3 and f[1] in "tT"]


def link(args: list[str], out: Path, order: list[str] | None) -> None:
    split = next(i for i, a in enumerate(args) if "=" not in a)
    env = dict(os.environ)
    env.update(a.split("=", 1) for a in args[:split])
    cmd = args[split:]
    cmd[cmd.index("-o") + 1] = str(out)
    if order is not None:
        order_file = out.with_suffix(".order")
        order_file.write_text("\n".join(order) + "\n")
        cmd += [f"-Wl,--symbol-ordering-file={order_file}", "-Wl,--no-warn-symbol-ordering"]
    subprocess.run(cmd, env=env, check=True)


def addresses(binary: Path, names: list[str]) -> str:
    nm = subprocess.run(["nm", "-C", str(binary)], capture_output=True, text=True, check=True).stdout
    found = []
    for name in names:
        # Every symbol whose demangled path ends with `name` (give more of the path to narrow it).
        hits = [line.split(None, 2) for line in nm.splitlines() if line.endswith((f" {name}", f"::{name}"))]
        found += [f"{h[2]} {int(h[0], 16):#x}" for h in hits if len(h) == 3] or [f"{name} -"]
    return "; ".join(found)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--package", default="ufutex-bench")
    p.add_argument("--bin", default="ufutex-bench")
    p.add_argument("--count", type=int, default=8, help="random layouts besides the default one")
    p.add_argument("--prefix", default="_ZN6ufutex", help="mangled-name prefix of the symbols to shuffle")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--show", default="", help="comma-separated symbol names to locate in each layout")
    a = p.parse_args()

    args = link_command(a.package, a.bin)
    obj = next(x for x in args if x.endswith(".rcgu.o"))
    shuffled = [s for s in text_symbols(obj) if s.startswith(a.prefix)]
    if not shuffled:
        sys.exit(f"no text symbol starts with {a.prefix!r}")
    a.out.mkdir(parents=True, exist_ok=True)
    show = [s for s in a.show.split(",") if s]
    for k in range(a.count + 1):
        out = a.out / f"layout-{k}"
        link(args, out, None if k == 0 else random.Random(a.seed * 1000 + k).sample(shuffled, len(shuffled)))
        print(out, addresses(out, show) if show else "")
    print(json.dumps({"object": obj, "shuffled symbols": len(shuffled)}))


if __name__ == "__main__":
    main()
