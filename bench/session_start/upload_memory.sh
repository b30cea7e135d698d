#!/bin/bash
# allotd's peak memory (VmHWM) across one large PUT to a session's Jupyter through allotd:
# a notebook saved with its outputs. Starts its own allotd and agent on loopback (as `make run`,
# on other ports and directories under /tmp/allot-upload-memory), creates a session, sends the
# body with curl (as is: curl's own Expect: 100-continue included), prints VmHWM before and
# after, and stops everything.
#   bench/session_start/upload_memory.sh [BIN_DIR] [MIB]      (default build/bin, 200)
set -eu
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-build/bin}")
mib=${2:-200}
dir=/tmp/allot-upload-memory
export ALLOT_STATE_DIR=$dir/state ALLOT_AGENT_DIR=$dir/agent ALLOT_LISTEN=127.0.0.1:7180 \
  ALLOT_REGISTRY_LISTEN=127.0.0.1:7185 ALLOT_AGENT_NAME=upload-memory ALLOT_BIN=$bin
server=http://127.0.0.1:7180
# stop-all: the session ends too, not left for a later agent to adopt.
stop() { scripts/run-local.sh stop-all >/dev/null 2>&1 || true; rm -rf "$dir"; }
stop
trap stop EXIT
mkdir -p "$dir"
timeout 120 scripts/run-local.sh >"$dir/run.log" 2>&1
export ALLOT_SERVER=$server ALLOT_TOKEN=$(cat "$dir/state/admin.token")
"$bin/allot" team create upload >/dev/null
"$bin/allot" team add-member upload admin --role member >/dev/null
id=$("$bin/allot" -o json session create --team upload --name upload --gpus 0 |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
python3 -c "import json, sys; json.dump({'type': 'file', 'format': 'text',
  'content': 'x' * ($mib << 20)}, open('$dir/body.json', 'w'))"
ready=no
for _ in $(seq 60); do
  if [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ALLOT_TOKEN" \
    "$server/sessions/$id/api/contents")" = 200 ]; then
    ready=yes
    break
  fi
  sleep 1
done
[ "$ready" = yes ] || { echo "session $id's Jupyter did not answer within 60 s" >&2; exit 1; }
pid=$(cat "$dir/state/allotd.pid")
before=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
put=$(curl -s -o /dev/null -w '%{http_code} in %{time_total} s' -X PUT \
  -H "Authorization: Bearer $ALLOT_TOKEN" -H 'Content-Type: application/json' \
  --data-binary "@$dir/body.json" "$server/sessions/$id/api/contents/upload.txt" || true)
after=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
echo "upload_memory body_mib=$mib put=\"$put\" allotd_vmhwm_kib_before=$before after=$after" \
  "peak_added_mib=$(((after - before) / 1024))"
