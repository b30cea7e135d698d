#!/bin/sh
# allotd's instructions per durable job submission, counted by callgrind: a figure that swings far
# less with the machine than times do (the scheduling passes' share still moves with timing, a few
# per cent; docs/benchmarks.md, section 1). Runs submit_load twice at
# 64 connections against an allotd under valgrind, with N1 and N2 requests, and divides the
# difference in instructions by N2 - N1, so that start-up and set-up cancel out.
#   bench/submit_instructions.sh [BIN_DIR] [N1] [N2]     (default build/bin 1000 4000)
# Needs valgrind. Loopback only, like submit_load; takes about a minute.
set -eu
command -v valgrind >/dev/null || { echo "submit_instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
bin=$(cd "${1:-build/bin}" && pwd)
n1=${2:-1000}
n2=${3:-4000}
work=$(mktemp -d /tmp/allot-submit-instructions.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/allotd" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" \
  --log-file="$work/valgrind.%p" "$bin/allotd" "\$@"
WRAP
chmod +x "$work/allotd"
instructions() {
  rm -f "$work"/callgrind.* "$work"/valgrind.*
  "$bin/submit_load" --allotd "$work/allotd" --connections 64 --requests "$1" \
    --max-seconds 500 >"$work/load.out" 2>&1 || { cat "$work/load.out" >&2; exit 1; }
  grep -h "Collected" "$work"/valgrind.* | awk '{print $4}'
}
i1=$(instructions "$n1")
i2=$(instructions "$n2")
echo "submit_instructions requests=$n1,$n2 allotd_instructions_per_job=$(( (i2 - i1) / (n2 - n1) ))"
