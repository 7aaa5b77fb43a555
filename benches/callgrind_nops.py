"""Instructions per run of a callgrind profile, with and without alignment `nop`s.

Callgrind counts every executed instruction, `nop`s included; a CPU all but skips them, and a
change that only moves code can add or remove one in a hot loop. Profile with
`--dump-instr=yes` (so the counts are per instruction address), then:

    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=cg.out \
        --toggle-collect='*vm_only*' benches/target/release/vmbench fib 3 --vm-only
    python3 benches/callgrind_nops.py cg.out benches/target/release/vmbench 4

prints the total, the `nop`s and the rest, each divided by the last argument (the number of
runs the profile holds: `vmbench P 3` runs P four times, once to warm up).
"""

import collections
import re
import subprocess
import sys


def counts(path):
    """Executed instructions per address (calls' inclusive costs left out)."""
    cost = collections.Counter()
    addr = 0
    after_calls = False

    def value(tok, prev):
        if tok == "*":
            return prev
        if tok[0] in "+-":
            return prev + int(tok, 0)
        return int(tok, 0)

    with open(path) as f:
        for line in f:
            if line.startswith("calls="):
                after_calls = True
                continue
            if not line or not (line[0].isdigit() or line[0] in "+-*"):
                continue
            parts = line.split()
            if len(parts) < 3:
                continue
            addr = value(parts[0], addr)
            if after_calls:
                # the line after `calls=` is the call's inclusive cost, not an instruction's
                after_calls = False
                continue
            cost[addr] += int(parts[2])
    return cost


def nop_addresses(binary):
    dis = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True, check=True
    ).stdout
    for line in dis.splitlines():
        m = re.match(r"^\s+([0-9a-f]+):\s+(nop|xchg\s+%ax,%ax|data16)", line)
        if m:
            yield int(m.group(1), 16)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    out, binary, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cost = counts(out)
    total = sum(cost.values())
    nops = sum(cost.get(a, 0) for a in nop_addresses(binary))
    m = 1e6 * runs
    print(f"total {total / m:.3f} M  nops {nops / m:.3f} M  without {(total - nops) / m:.3f} M")


if __name__ == "__main__":
    main()
