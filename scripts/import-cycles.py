#!/usr/bin/env python3
"""Fail when the modules of a crate import each other in a cycle.

Reads every `.rs` file under a crate's `src/`, maps it to its top-level module
(`src/btree/node.rs` -> `btree`, `src/lib.rs` -> the crate root, skipped) and collects the
modules it names through `crate::<module>` (in `use` lines and in paths). Test modules
(`#[cfg(test)]` to the end of the file) are ignored. Prints the cycles found and exits 1,
or prints the layer order and exits 0.

    scripts/import-cycles.py crates/ferrocore/src [crates/ferrocore-lmdb/src ...]
"""
import os
import re
import sys


def module_of(src, path):
    rel = os.path.relpath(path, src)
    parts = rel[:-3].split(os.sep)
    if parts[0] in ("lib", "main"):
        return None
    return parts[0]


def imports(src):
    graph = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            m = module_of(src, path)
            if m is None:
                continue
            graph.setdefault(m, set())
            text = open(path, encoding="utf-8").read()
            cut = text.find("#[cfg(test)]")
            if cut >= 0:
                text = text[:cut]
            # Drop comments so doc links do not count as imports.
            text = re.sub(r"//[^\n]*", "", text)
            for used in re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text):
                if used != m:
                    graph[m].add(used)
            # `use crate::{a::X, b::Y}` groups.
            for group in re.findall(r"\bcrate::\{([^}]*(?:\{[^}]*\}[^}]*)*)\}", text):
                for used in re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)::", group):
                    if used != m:
                        graph[m].add(used)
    for m in graph:
        graph[m] &= set(graph)  # only the crate's own modules
    return graph


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layers(graph):
    level = {}

    def depth(v):
        if v not in level:
            level[v] = 0
            level[v] = 1 + max((depth(w) for w in graph[v]), default=-1)
        return level[v]

    for v in graph:
        depth(v)
    by = {}
    for v, d in level.items():
        by.setdefault(d, []).append(v)
    return [sorted(by[d]) for d in sorted(by)]


def main():
    failed = False
    for src in sys.argv[1:] or ["crates/ferrocore/src"]:
        graph = imports(src)
        found = cycles(graph)
        if found:
            failed = True
            print(f"{src}: import cycles:")
            for comp in found:
                print("  " + " <-> ".join(comp))
                for m in comp:
                    inside = sorted(graph[m] & set(comp))
                    print(f"    {m} imports {', '.join(inside)}")
        else:
            print(f"{src}: no import cycles; layers, bottom first:")
            for i, layer in enumerate(layers(graph)):
                print(f"  {i}: {' '.join(layer)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
