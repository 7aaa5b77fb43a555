#!/usr/bin/env python3
"""Prints the markdown table of docs/PERFORMANCE.md from criterion's reports of the `peers` bench:
median per engine, and each peer's median divided by ours (above 1: ajs is faster).

Usage: python3 table.py [CRITERION_DIR]   (default: $CARGO_TARGET_DIR/criterion or target/criterion)
"""
import json, os, sys

GROUPS = [
    "while loop 1e6", "fib(25)", "array 10k filter/map/reduce", "string concat 10k",
    "JSON round trip 1k objects", "a + b, fresh sandbox", "a + b, precompiled function call",
    "compile 8 KB agent",
]
ENGINES = ["ajs", "quickjs", "boa", "rhai"]

def fmt(ns):
    if ns is None:
        return "—"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"

def median(root, group, engine):
    d = group.replace("/", "_").replace(" ", " ")
    for name in (d, d.replace(",", "_")):
        p = os.path.join(root, name, engine, "new", "estimates.json")
        if os.path.exists(p):
            return json.load(open(p))["median"]["point_estimate"]
    return None

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "criterion")
print("| program | ajs | QuickJS | Boa | rhai | QuickJS / ajs | Boa / ajs | rhai / ajs |")
print("|---|---|---|---|---|---|---|---|")
for g in GROUPS:
    m = {e: median(root, g, e) for e in ENGINES}
    # more rows where ours was also measured through the synchronous API (`ajs_sync`) or awaited
    # inside a running task (`ajs_task`)
    variants = ((g, "ajs"), (g + " (ajs `_sync` API)", "ajs_sync"),
                (g + " (ajs async API awaited in a running task)", "ajs_task"))
    for label, ours in variants:
        m["ajs"] = median(root, g, ours)
        if ours != "ajs" and m["ajs"] is None:
            continue
        ratios = [f"{m[e] / m['ajs']:.2f}" if m[e] and m["ajs"] else "—" for e in ENGINES[1:]]
        print(f"| {label} | " + " | ".join(fmt(m[e]) for e in ENGINES) + " | " + " | ".join(ratios) + " |")
