#!/usr/bin/env bash
# `make stop` and `make stop-all` (scripts/run-local.sh) on a instance of `make run` of the test's
# own (state in a temporary directory, allotd and the registry on free loopback ports, an agent
# of its own name): `make stop` leaves a running job running and names it, with how to stop it
# too; the next `make run` re-adopts it; `make stop-all` cancels it, and says nothing of it.
# Usage: make_stop_test.sh BIN_DIR.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:?usage: make_stop_test.sh BIN_DIR}" && pwd)
tmp=$(mktemp -d /tmp/allot-make-stop-XXXXXX)
chmod 755 "$tmp"  # the job runs as its owner, who must reach its job dir under the agent's
marker=6543$$     # the job's `sleep` argument: finds its process, and only it

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
export ALLOT_STATE_DIR=$tmp/state ALLOT_AGENT_DIR=$tmp/agent ALLOT_BIN=$bin HOME=$tmp/home
export ALLOT_AGENT_NAME=make-stop-test ALLOT_LISTEN=127.0.0.1:$(free_port)
export ALLOT_REGISTRY_LISTEN=127.0.0.1:$(free_port)
mkdir -p "$HOME"
cleanup() {
  "$repo/scripts/run-local.sh" stop-all >/dev/null 2>&1 || true
  pkill -f "sleep $marker" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
allot() { ALLOT_SERVER=http://$ALLOT_LISTEN ALLOT_TOKEN=$(cat "$ALLOT_STATE_DIR/admin.token") "$bin/allot" "$@"; }
job_state() { allot job show "$1" -o json | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])'; }
wait_state() {
  for _ in $(seq 300); do [ "$(job_state "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "job $1 is $(job_state "$1"), not $2"
}
sleeping() { pgrep -f "sleep $marker" >/dev/null; }

"$repo/scripts/run-local.sh" >"$tmp/run1.out" 2>&1 || { cat "$tmp/run1.out"; fail "make run failed"; }
grep -q "Allot is running" "$tmp/run1.out" || fail "make run said: $(cat "$tmp/run1.out")"
allot team create ml >/dev/null
id=$(allot run --team ml --gpus 1 --name keeper -o json -- sleep "$marker" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
wait_state "$id" running

stop=$("$repo/scripts/run-local.sh" stop)
echo "$stop"
grep -qF "still running, and re-adopted by the next \`make run\`: j-$id" <<<"$stop" ||
  fail "make stop did not name j-$id"
grep -qF "to stop them too: make run && make stop-all" <<<"$stop" || fail "make stop did not say how"
sleeping || fail "the job stopped with make stop"

"$repo/scripts/run-local.sh" >"$tmp/run2.out" 2>&1 || { cat "$tmp/run2.out"; fail "make run again failed"; }
wait_state "$id" running

stopAll=$("$repo/scripts/run-local.sh" stop-all)
echo "$stopAll"
grep -q "still running" <<<"$stopAll" && fail "make stop-all left work running"
for _ in $(seq 100); do sleeping || break; sleep 0.1; done
sleeping && fail "the job's process outlived make stop-all"
echo "ok"
