#!/usr/bin/env python3
"""Fail when the library's modules import each other in a cycle (DESIGN.md: imports point down).

    scripts/module-cycles.py [SRC_DIR]        (default: this repository's crates/ufutex/src)

A module is a top-level file or folder of SRC_DIR (`wait.rs`, `parker/`); `lib.rs` is the crate
root and may use every module. Every `crate::NAME` in code (comments and strings are skipped)
is an edge from the file's module to NAME. Prints each cycle found (a strongly connected set of
modules, with the edges inside it and the lines that make them) and exits 1; exits 0 if none.
"""
import os
import re
import sys
from collections import defaultdict

src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "ufutex", "src")
ref = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
# A `use crate::{a, b::c}` group names several modules at once.
group = re.compile(r"\bcrate::\{([^}]*)\}", re.S)


def code_only(text):
    """The text with comments, string and char literals blanked (line numbers kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'" and (text.startswith("\\", i + 1) or text.startswith("'", i + 2)):
            j = text.find("'", i + (3 if text[i + 1] == "\\" else 2))  # a char literal, not a lifetime
            j = n if j < 0 else j
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


modules = set()
edges = defaultdict(lambda: defaultdict(list))
for root, _, files in os.walk(src):
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(root, f)
        rel = os.path.relpath(path, src)
        top = rel.split(os.sep)[0]
        mod = top[:-3] if top.endswith(".rs") else top
        if mod == "lib":
            continue
        modules.add(mod)
        text = code_only(open(path, encoding="utf-8").read())
        for m in ref.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            edges[mod][m.group(1)].append(f"{rel}:{line}")
        for g in group.finditer(text):
            line = text.count("\n", 0, g.start()) + 1
            for name in re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", g.group(1)):
                edges[mod][name].append(f"{rel}:{line}")

if not modules:
    sys.exit(f"module-cycles: no Rust modules under {src}")
graph = {m: {t for t in edges[m] if t in modules and t != m} for m in modules}

# Tarjan's strongly connected components.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in sorted(graph[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(modules):
    if v not in index:
        visit(v)

if not sccs:
    print(f"module-cycles: {len(modules)} modules, no cycle")
    sys.exit(0)
for comp in sccs:
    print("module cycle among: " + ", ".join(comp))
    for a in comp:
        for b in sorted(graph[a] & set(comp)):
            print(f"  {a} -> {b}   ({', '.join(edges[a][b][:3])}{' ...' if len(edges[a][b]) > 3 else ''})")
sys.exit(1)
