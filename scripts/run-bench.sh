#!/usr/bin/env bash
# `make bench`: runs every benchmark in bench/ in sequence against the binaries already built in
# $BIN (default build/bin, from `make build`), then prints a summary next to the targets in
# docs/benchmarks.md. Builds nothing itself. Everything runs on 127.0.0.1 with scratch data dirs
# under $ALLOT_BENCH_DIR (default /tmp; use a real disk, not tmpfs, so fsync costs what it costs).
#
# Knobs (environment):
#   BIN                 where the binaries are                  (build/bin)
#   ONLY                subset, e.g. "submit start"   (store submit start container cli memory peers)
#   SUBMIT_CONNECTIONS  submit_load connection levels            (1,16,64,256)
#   SUBMIT_REQUESTS     requests per level                       (20000)
#   SUBMIT_MAX_SECONDS  time bound per level                     (30)
#   START_JOBS          start_latency jobs                       (200)
#   CONTAINER_JOBS      container_start jobs of each kind (root) (100)
#   CHURN_JOBS          executor_churn jobs (root)               (4000)
#   MEM_HOSTS MEM_JOBS  memory_footprint store size              (100, 10000)
#   CLI_HISTORY         cli_latency jobs run before its last row (2000)
#   PEERS_ARGS          extra peers_bench.py flags, e.g. "--n 20 --sessions 0"
#
# `peers` (bench/peers/peers_bench.py: the same job streams through Slurm, and sessions against
# JupyterHub) needs root and bench/peers/install.sh; without them it says so in one line and the
# other entries' summary is still printed.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-$PWD/build/bin}
ONLY=${ONLY:-store submit start container cli memory peers}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/allot-bench-out-XXXXXX")
trap 'rm -rf "$OUT"' EXIT

need() {
  for b in "$@"; do
    if [ ! -x "$BIN/$b" ]; then
      echo "run-bench: $BIN/$b is missing; run \`make build\` (or set BIN)" >&2
      exit 1
    fi
  done
}
want() { [[ " $ONLY " == *" $1 "* ]]; }

need allotd allot-agent allot-job-shim store_bench submit_load start_latency start_stamp memory_footprint \
  container_start executor_churn

echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v n="$(nproc)" 'BEGIN{exit !(l > n/2)}'; then
  echo "WARNING: the machine is busy (load above nproc/2); numbers will be low and noisy"
fi
echo

if want store; then
  echo "== store_bench (SqliteStore group commit, no HTTP)"
  "$BIN/store_bench" --benchmark_counters_tabular=true | tee "$OUT/store"
  echo
fi
if want submit; then
  echo "== submit_load (POST /api/v1/jobs, durable, unplaceable jobs)"
  "$BIN/submit_load" --connections "${SUBMIT_CONNECTIONS:-1,16,64,256}" \
    --requests "${SUBMIT_REQUESTS:-20000}" --max-seconds "${SUBMIT_MAX_SECONDS:-30}" |
    tee "$OUT/submit"
  echo
fi
if want start; then
  echo "== start_latency (POST to process started, loopback agent, sim:8xH100)"
  "$BIN/start_latency" --bin "$BIN" --jobs "${START_JOBS:-200}" | tee "$OUT/start"
  echo
fi
if want container; then
  echo "== container_start (executor start to process running, in an image and as a process)"
  "$BIN/container_start" --jobs "${CONTAINER_JOBS:-100}" | tee "$OUT/container"
  echo
  echo "== executor_churn (CPU per trivial job on the agent's executor: cgroups, shims, job dirs)"
  "$BIN/executor_churn" --jobs "${CHURN_JOBS:-4000}" | tee "$OUT/churn"
  echo
  echo "== image_job_start (POST to process, a job in a cached image against a process job; podman)"
  python3 bench/image_job_start.py --bin "$BIN" --n "${CONTAINER_JOBS:-100}" | tee "$OUT/image" ||
    echo "run-bench: image_job_start did not finish (above); the other entries go on"
  echo
  echo "== image_pull (a 1 GiB image against skopeo copy alone; a second one sharing 90%)"
  python3 bench/image_pull.py --bin "$BIN" --rounds "${PULL_ROUNDS:-3}" | tee "$OUT/pull" ||
    echo "run-bench: image_pull did not finish (above); the other entries go on"
  echo
fi
if want cli; then
  echo "== cli_latency (allot processes; run --wait -- true fresh, after a burst, with history)"
  python3 bench/cli_latency.py --bin "$BIN" --history "${CLI_HISTORY:-2000}" | tee "$OUT/cli"
  echo
fi
if want memory; then
  echo "== memory_footprint (allotd RSS with hosts and finished jobs)"
  "$BIN/memory_footprint" --allotd "$BIN/allotd" --hosts "${MEM_HOSTS:-100}" \
    --jobs "${MEM_JOBS:-10000}" | tee "$OUT/memory"
  echo
fi

if want peers; then
  echo "== peers (the same streams through Slurm 22.05, sessions against JupyterHub; loopback only)"
  # shellcheck disable=SC2086
  python3 bench/peers/peers_bench.py --bin "$BIN" ${PEERS_ARGS:-} 2>&1 | tee "$OUT/peers" ||
    echo "run-bench: peers did not finish (above); the other entries go on" | tee -a "$OUT/peers"
  echo
fi

echo "== summary (targets: docs/benchmarks.md)"
if [ -f "$OUT/store" ]; then
  grep -E '^BM_' "$OUT/store" | awk '{printf "  store      %-38s %s durable jobs/s, %s batches per transaction\n", $1, $NF, $(NF-1)}' || true
fi
if [ -f "$OUT/submit" ]; then
  sed -n 's/^submit_load connections=\([0-9]*\).* throughput=\([^ ]*\) p50_ms=\([^ ]*\) p99_ms=\([^ ]*\).*/  submit     C=\1: \2 (target >= 5000\/s), p50 \3 ms, p99 \4 ms/p' "$OUT/submit"
fi
if [ -f "$OUT/start" ]; then
  sed -n 's/^ *post_to_process_started n=\([0-9]*\).* p50_ms=\([^ ]*\) p90_ms=[^ ]* p99_ms=\([^ ]*\) max_ms=\([^ ]*\)/  start      n=\1: p50 \2 ms (target < 20), p99 \3 ms (target < 100), max \4 ms/p' "$OUT/start"
fi
if [ -f "$OUT/container" ]; then
  sed -n 's/^container_start \([a-z]*\) jobs=\([0-9]*\) p50_ms=\([^ ]*\) p90_ms=[^ ]* p99_ms=\([^ ]*\).*/  container  \1, n=\2: p50 \3 ms, p99 \4 ms (executor start to process; docs 2e)/p' "$OUT/container"
fi
if [ -f "$OUT/churn" ]; then
  sed -n 's/^executor_churn jobs=\([0-9]*\).* jobs_per_s=\([^ ]*\) cpu_ms_per_job=\([^ ]*\).*/  churn      n=\1: \2 jobs\/s, \3 ms of CPU a job (agent side; docs 2c)/p' "$OUT/churn"
fi
if [ -f "$OUT/cli" ]; then
  sed -n 's/^  \(run --wait, [^n]*\) *n=[0-9]* *p50_ms= *\([^ ]*\) p99_ms= *\([^ ]*\).*/  cli        \1: p50 \2 ms (target < 15), p99 \3 ms (target < 40)/p' "$OUT/cli"
fi
if [ -f "$OUT/memory" ]; then
  sed -n 's/^ *after [0-9]* rounds: *VmRSS=\([^ ]*\) MiB VmHWM=\([^ ]*\) MiB/  memory     VmRSS \1 MiB, VmHWM \2 MiB (target < 200 MiB)/p' "$OUT/memory"
fi
if [ -f "$OUT/peers" ]; then
  sed -n 's/^| \([^|]*[^ ]\) | \([^|]*[^ ]\) | \([^|]*[^ ]\) | \([^|]*[^ ]\) |$/  peers      \1: Allot \2, peer \3, ratio \4/p' "$OUT/peers" |
    grep -v -e ': Allot Allot,' -e ': Allot ---,' || true
  grep -E '^target:|^(run-bench|bench/peers|peers):' "$OUT/peers" | sed 's/^/  peers      /' || true
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
