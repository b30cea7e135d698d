#!/bin/sh
# System calls of allotd and of the load generator during section 1's run (docs/benchmarks.md):
# submit_load at 64 connections, 60,000 submissions, with `strace -c -f` attached to each for
# three seconds from 1.2 s in (strace slows both, so read the counts a submission, not the rate).
#   bench/submit_syscalls.sh [ALLOTD] [BIN_DIR]     (default: BIN_DIR/allotd, build/bin)
# Loopback only, like submit_load, which starts and stops its own allotd.
set -eu
bin=${2:-build/bin}
allotd=${1:-$bin/allotd}
command -v strace >/dev/null || { echo "bench/submit_syscalls.sh: needs strace" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin/submit_load" --allotd "$allotd" --connections 64 --requests 60000 >"$out/load" 2>&1 &
load=$!
sleep 1.2
# submit_load's own allotd, not another one on this machine (a test suite's).
server=$(pgrep -P "$load" -x allotd || true)
if [ -z "$server" ]; then
  kill "$load" 2>/dev/null || true
  echo "bench/submit_syscalls.sh: submit_load's allotd was not running 1.2 s in" >&2
  exit 1
fi
timeout 3 strace -c -f -p "$server" -o "$out/allotd" &
timeout 3 strace -c -f -p "$load" -o "$out/generator" &
wait "$load"
wait
head -2 "$out/load"
echo "== allotd"
head -22 "$out/allotd"
echo "== submit_load"
head -10 "$out/generator"
