#!/usr/bin/env python3
"""Writes the programs of the case files as golden bytecode sources.

    python3 tests/golden/extract_bytecode.py tests/corpus/*.json ../shared/conformance/*.json

Each case becomes `tests/golden/bytecode/NAME.ajs` (NAME: the case name, sanitised), whose first
line is a `// golden {json}` header giving how it compiles (mode, externals, extra atoms); a
source already present under another name is skipped. Then
`AJS_BLESS=1 cargo test --release -p ajs --test ajs_tests golden_bytecode` writes each `.dis`
(or `.err` for a program that does not compile). Existing files are never overwritten.
"""
import json
import os
import re
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bytecode")


def sanitise(name):
    s = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").lower()
    return s or "case"


def custom_atoms(case):
    caps = case.get("capabilities") or {}
    return sorted(k for k in caps if k not in ("fetch", "llm", "httpFetch", "llmPredict"))


def header_and_source(case):
    atoms = custom_atoms(case)
    if "eval" in case:
        e = case["eval"]
        h = {"mode": "eval", "externals": list((e.get("context") or {}).keys())}
        src = e["code"]
    elif "function" in case:
        f = case["function"]
        h = {"mode": "function", "externals": list(f.get("params") or [])}
        src = f["body"]
    elif "agent" in case:
        h = {"mode": "agent", "externals": []}
        src = case["agent"]["source"]
    else:
        return None
    if atoms:
        h["atoms"] = atoms
    return h, src


def main(files):
    os.makedirs(OUT, exist_ok=True)
    seen = set()
    for name in os.listdir(OUT):
        if name.endswith(".ajs"):
            with open(os.path.join(OUT, name), encoding="utf-8") as f:
                seen.add(f.read())
    written = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            cases = json.load(f)
        for case in cases:
            hs = header_and_source(case)
            if hs is None:
                continue
            h, src = hs
            text = "// golden " + json.dumps(h, separators=(", ", ": ")) + "\n" + src
            if not text.endswith("\n"):
                text += "\n"
            if text in seen:
                continue
            seen.add(text)
            base = sanitise(case["name"])
            name, i = base, 2
            while os.path.exists(os.path.join(OUT, name + ".ajs")):
                name, i = f"{base}_{i}", i + 1
            with open(os.path.join(OUT, name + ".ajs"), "w", encoding="utf-8") as f:
                f.write(text)
            written += 1
    print(f"{written} programs written to {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
