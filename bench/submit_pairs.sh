#!/bin/sh
# Alternated pairs of section 1's run (docs/benchmarks.md): submit_load at 64 connections against
# another build's allotd (A), then this build's (B), PAIRS times, and the medians of each. This
# machine's speed drifts by tens of per cent within minutes, so two builds are only compared
# run by run, alternated.
#   bench/submit_pairs.sh OTHER_ALLOTD [PAIRS] [BIN_DIR]     (default 8 build/bin)
# Loopback only, like submit_load; each run starts and stops its own allotd.
set -eu
[ $# -ge 1 ] || { echo "usage: bench/submit_pairs.sh OTHER_ALLOTD [PAIRS] [BIN_DIR]" >&2; exit 2; }
other=$1
pairs=${2:-8}
bin=${3:-build/bin}
i=0
while [ "$i" -lt "$pairs" ]; do
  for side in A B; do
    if [ "$side" = A ]; then set -- --allotd "$other"; else set --; fi
    printf '%s ' "$side"
    "$bin/submit_load" "$@" --connections 64 --requests 20000 | grep -E "throughput=|fifth" |
      tr '\n' ' '
    echo
  done
  i=$((i + 1))
done | python3 -c '
import re, statistics, sys
runs = {"A": [], "B": []}
for line in sys.stdin:
    side = line.split()[0]
    rate = re.search(r"throughput=(\d+)", line)
    cpu = re.search(r"allotd_cpu_us_per_job=([\d.]+)", line)
    if not rate or not cpu:
        sys.exit(f"bench/submit_pairs.sh: a run of side {side} reported no rate: {line.strip()}")
    runs[side].append((int(rate.group(1)), float(cpu.group(1))))
    print(line.rstrip())
for side, name in (("A", "other"), ("B", "this build")):
    print(f"{side} ({name}): median {statistics.median(r for r, _ in runs[side]):.0f}/s, allotd "
          f"{statistics.median(c for _, c in runs[side]):.1f} us of CPU a job")
print("B higher in", sum(b[0] > a[0] for a, b in zip(runs["A"], runs["B"])), "of", len(runs["A"]))
'
