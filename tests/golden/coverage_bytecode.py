#!/usr/bin/env python3
"""Lists the opcodes and natives no golden `.dis` uses (run from the repository root)."""
import glob
import re

isa = open("crates/bytecode/src/isa.rs", encoding="utf-8").read()
ops = re.findall(r"^\s+([A-Z][A-Za-z0-9]*) = 0x[0-9a-f]+ \{", isa, re.M)
natives = re.findall(r'^\s+[A-Z][A-Za-z0-9]* = "([^"]+)", \d+..=\d+;', open(
    "crates/bytecode/src/natives.rs", encoding="utf-8").read(), re.M)
used_ops, used_natives = set(), set()
for path in glob.glob("tests/golden/bytecode/*.dis"):
    for line in open(path, encoding="utf-8"):
        m = re.match(r"\s+\d+  (\S+)\s*(.*)", line)
        if not m:
            continue
        used_ops.add(m.group(1))
        for tok in re.split(r",\s*|\s+;", m.group(2)):
            used_natives.add(tok.strip())
missing_ops = [o for o in ops if o not in used_ops]
missing_natives = [n for n in natives if n not in used_natives]
print(f"ops: {len(ops) - len(missing_ops)}/{len(ops)} used; missing: {' '.join(missing_ops)}")
print(f"natives: {len(natives) - len(missing_natives)}/{len(natives)} used; missing: {' '.join(missing_natives)}")
