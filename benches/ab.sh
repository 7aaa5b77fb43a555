#!/usr/bin/env bash
# Times one program in two builds of `vmbench` (benches/src/bin/vmbench.rs) in alternation, so
# that this machine's drifting speed lands on both alike: ROUNDS rounds, each running A's and
# then B's `vmbench PROGRAM 21 --vm-only` (the median of 21 runs of the VM alone), and prints
# each build's median and minimum and the median and quartiles of B's time over A's by round.
#
#   benches/ab.sh PROGRAM ROUNDS A/vmbench B/vmbench      e.g. benches/ab.sh fib 15 old new
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 PROGRAM ROUNDS A B" >&2; exit 2; }
prog=$1 rounds=$2 a=$3 b=$4
time_of() { "$1" "$prog" 21 --vm-only | awk '{for (i = 1; i <= NF; i++) if ($i == "ms") { print $(i-1); exit }}'; }
for _ in $(seq "$rounds"); do
  echo "$(time_of "$a") $(time_of "$b")"
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
a = [r[0] for r in rows]; b = [r[1] for r in rows]
q = sorted(y / x for x, y in rows)
n = len(q)
print("A median %.3f ms, min %.3f | B median %.3f ms, min %.3f | B/A median %.3f, quartiles %.3f-%.3f"
      % (statistics.median(a), min(a), statistics.median(b), min(b), statistics.median(q), q[n // 4], q[(3 * n) // 4]))'
