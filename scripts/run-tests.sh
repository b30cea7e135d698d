#!/usr/bin/env bash
# `make test`: every test through ctest, then the list of skipped tests and why
# (scripts/list-skips.py; under CI=true a skip other than for GPU hardware fails the run).
#   scripts/run-tests.sh BUILD_DIR JOBS
set -uo pipefail
build=${1:-build}
jobs=${2:-$(nproc)}
results="$build/test-results"
rm -rf "$results"
mkdir -p "$results"
# Each GoogleTest binary writes <binary>.xml here, with its skips and their messages.
export GTEST_OUTPUT="xml:$(cd "$results" && pwd)/"
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 600 \
  --output-junit test-results/ctest.xml)
status=$?
python3 "$(dirname "$0")/list-skips.py" "$results" || status=1
exit $status
