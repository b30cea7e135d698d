#!/usr/bin/env bash
# `make run`: starts allotd on embedded SQLite under ./.allot and one local allot-agent (work dir
# ./.allot-agent; real GPUs through NVML when the host has them, otherwise a simulated 8-GPU
# host) and a container registry on loopback with a demo image (scripts/local-registry.sh), in
# the background, and prints how to use them. `make stop` (this script with "stop") stops them,
# and says which jobs keep running: they survive an agent restart and are re-adopted.
# `make stop-all` ("stop-all") cancels every job first. ALLOT_STATE_DIR, ALLOT_AGENT_DIR,
# ALLOT_LISTEN, ALLOT_REGISTRY_LISTEN, ALLOT_AGENT_NAME and ALLOT_BIN move a second instance out
# of the first one's way (tests/scripts/make_stop_test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${ALLOT_STATE_DIR:-$PWD/.allot}
LISTEN=${ALLOT_LISTEN:-127.0.0.1:7070}
BIN=${ALLOT_BIN:-$PWD/build/bin}
SERVER="http://$LISTEN"
# The agent's work dir sits beside allotd's data dir, not in it: allotd keeps its dir to itself
# (0700), and the workloads, which run as their owners, must reach their job dirs.
AGENT_DIR=${ALLOT_AGENT_DIR:-$STATE_DIR-agent}
# The agent's host name, and so its cgroup subtree (allot-NAME): another one lets a second
# instance (tests/scripts/make_stop_test.sh) run beside this one without touching its jobs.
AGENT_NAME=${ALLOT_AGENT_NAME:-local}
REGISTRY=${ALLOT_REGISTRY_LISTEN:-127.0.0.1:7075}
export ALLOT_STATE_DIR="$STATE_DIR" ALLOT_REGISTRY_LISTEN="$REGISTRY"
mkdir -p "$STATE_DIR" "$AGENT_DIR"

stop_one() {
  local pidfile="$STATE_DIR/$1.pid"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill "$(cat "$pidfile")" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

# Job ids ("12 13") in STATE (running, queued, ...), asked of allotd as the admin; empty when
# allotd is not up.
jobs_in() {
  [ -f "$STATE_DIR/admin.token" ] || return 0
  ALLOT_SERVER=$SERVER ALLOT_TOKEN=$(cat "$STATE_DIR/admin.token") \
    "$BIN/allot" job list --state "$1" --limit 1000 -o json 2>/dev/null |
    sed -n 's/^    "id": *\([0-9]*\).*/\1/p' | tr '\n' ' ' || true
}

if [ "${1:-}" = "stop" ] || [ "${1:-}" = "stop-all" ]; then
  if [ "$1" = "stop-all" ]; then
    # Cancel every job first, and wait for the agent to stop them: work does not outlive it.
    for id in $(jobs_in queued) $(jobs_in running) $(jobs_in scheduled) $(jobs_in pulling); do
      ALLOT_SERVER=$SERVER ALLOT_TOKEN=$(cat "$STATE_DIR/admin.token") \
        "$BIN/allot" job cancel "$id" >/dev/null 2>&1 || true
    done
    for _ in $(seq 300); do [ -z "$(jobs_in running)" ] && break; sleep 0.1; done
  fi
  running=$(jobs_in running)
  stop_one agent
  stop_one allotd
  scripts/local-registry.sh stop
  echo "stopped allotd, the local agent and the local registry (state kept in $STATE_DIR)"
  if [ -n "$running" ]; then
    echo "still running, and re-adopted by the next \`make run\`: $(printf 'j-%s ' $running | sed 's/ $//')"
    echo "to stop them too: make run && make stop-all"
  fi
  exit 0
fi

stop_one agent
stop_one allotd

# The demo image for jobs in images (README's tour); make run goes on without it if it fails.
DEMO_IMAGE=$(scripts/local-registry.sh start) || DEMO_IMAGE=""

"$BIN/allotd" --listen "$LISTEN" --data-dir "$STATE_DIR" >"$STATE_DIR/allotd.out" 2>"$STATE_DIR/allotd.log" &
echo $! >"$STATE_DIR/allotd.pid"
for _ in $(seq 100); do
  curl -fs "$SERVER/healthz" >/dev/null 2>&1 && break
  if ! kill -0 "$(cat "$STATE_DIR/allotd.pid")" 2>/dev/null; then
    echo "allotd failed to start:"; tail -20 "$STATE_DIR/allotd.log"; exit 1
  fi
  sleep 0.1
done
ADMIN_TOKEN=$(cat "$STATE_DIR/admin.token")
export ALLOT_SERVER="$SERVER" ALLOT_TOKEN="$ADMIN_TOKEN"

# The console logs in with a password; the admin allotd created has only a token. Give it a
# random first password once, kept next to the token (mode 0600).
if [ ! -f "$STATE_DIR/admin.password" ]; then
  ADMIN_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  if curl -fs -X PUT -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
      -d "{\"password\": \"$ADMIN_PASSWORD\"}" "$SERVER/api/v1/users/admin/password" >/dev/null; then
    (umask 077 && printf '%s\n' "$ADMIN_PASSWORD" >"$STATE_DIR/admin.password")
  fi
fi
ADMIN_PASSWORD=$(cat "$STATE_DIR/admin.password" 2>/dev/null || echo "(not set: see allotd.log)")

# The join token goes in the agent's environment, not its command line (which ps shows to all).
ALLOT_JOIN_TOKEN=""
if [ ! -f "$AGENT_DIR/credential.json" ]; then
  ALLOT_JOIN_TOKEN=$("$BIN/allot" host join-token --ttl 10m -o json | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p')
fi
ALLOT_JOIN_TOKEN="$ALLOT_JOIN_TOKEN" "$BIN/allot-agent" --server "$SERVER" --name "$AGENT_NAME" --gpus auto \
  --work-dir "$AGENT_DIR" --insecure-registry "$REGISTRY" >"$STATE_DIR/agent.log" 2>&1 &
echo $! >"$STATE_DIR/agent.pid"
for _ in $(seq 100); do
  "$BIN/allot" host list -o json 2>/dev/null | grep -q '"state": *"online"' && break
  sleep 0.1
done

# Shell completion and the manual page, for this user (no root needed), written by the CLI from
# its own definitions.
DATA_HOME=${XDG_DATA_HOME:-$HOME/.local/share}
mkdir -p "$DATA_HOME/bash-completion/completions" "$DATA_HOME/man/man1"
"$BIN/allot" completion bash >"$DATA_HOME/bash-completion/completions/allot"
"$BIN/allot" man >"$DATA_HOME/man/man1/allot.1"

PROVIDER=$("$BIN/allot" host show "$AGENT_NAME" -o json | sed -n 's/.*"gpu_provider": *"\([^"]*\)".*/\1/p' | head -1)
GPUS=$("$BIN/allot" host show "$AGENT_NAME" -o json | grep -c '"uuid"' || true)
cat <<MSG

Allot is running.
  web console: $SERVER/   (user admin, password $ADMIN_PASSWORD)
  admin token: $ADMIN_TOKEN
  local agent: host '$AGENT_NAME' with $GPUS GPUs via $PROVIDER$( [ "$PROVIDER" = simulated ] && echo " (SIMULATED: no NVIDIA driver here)")
  registry:    $REGISTRY, with the demo image ${DEMO_IMAGE:-(none: see $STATE_DIR/registry/registry.log)}
  logs:        $STATE_DIR/allotd.log, $STATE_DIR/agent.log
  installed:   bash completion ($DATA_HOME/bash-completion/completions/allot; zsh: source <(allot completion zsh)),
               man page ($DATA_HOME/man/man1/allot.1: man allot)

Try:
  export ALLOT_SERVER=$SERVER ALLOT_TOKEN=$ADMIN_TOKEN PATH=$BIN:\$PATH
  allot host list
  allot team create ml && allot run --team ml --gpus 2 --wait -- sh -c 'echo \$CUDA_VISIBLE_DEVICES'
  allot job list

Stop with: make stop
MSG
