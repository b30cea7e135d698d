#!/usr/bin/env bash
# A container registry for `make run` (Debian's docker-registry on loopback), holding one small
# image built here from the machine's busybox with umoci, so that the README's tour runs a job
# in an image with nothing fetched from outside:
#
#   scripts/local-registry.sh start   starts it (if not running) and pushes demo/busybox:1 once
#   scripts/local-registry.sh stop
#
# State under $ALLOT_STATE_DIR/registry (default ./.allot/registry); it listens on
# $ALLOT_REGISTRY_LISTEN (default 127.0.0.1:7075), plain HTTP, so the local agent lists it with
# --insecure-registry.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${ALLOT_STATE_DIR:-$PWD/.allot}
LISTEN=${ALLOT_REGISTRY_LISTEN:-127.0.0.1:7075}
DIR="$STATE_DIR/registry"
PIDFILE="$DIR/registry.pid"
IMAGE="$LISTEN/demo/busybox:1"

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

case "${1:-start}" in
stop)
  if running; then kill "$(cat "$PIDFILE")"; fi
  rm -f "$PIDFILE"
  exit 0
  ;;
start) ;;
*)
  echo "usage: $0 start|stop" >&2
  exit 2
  ;;
esac

if ! command -v docker-registry >/dev/null || ! command -v umoci >/dev/null; then
  echo "local registry: docker-registry or umoci missing (scripts/install-deps.sh installs them)" >&2
  exit 1
fi
mkdir -p "$DIR"
if ! running; then
  cat >"$DIR/registry.yml" <<YML
version: 0.1
log: {level: error}
storage:
  filesystem: {rootdirectory: $DIR/storage}
http:
  addr: $LISTEN
YML
  docker-registry serve "$DIR/registry.yml" >>"$DIR/registry.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 100); do
    curl -fs "http://$LISTEN/v2/" >/dev/null 2>&1 && break
    sleep 0.1
  done
fi
curl -fs "http://$LISTEN/v2/" >/dev/null || { echo "local registry did not start: $DIR/registry.log" >&2; exit 1; }

# The demo image: busybox, a shell, and a file that says where it came from.
if ! curl -fs "http://$LISTEN/v2/demo/busybox/manifests/1" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' >/dev/null; then
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  umoci init --layout "$build/layout"
  umoci new --image "$build/layout:demo"
  umoci unpack --rootless --image "$build/layout:demo" "$build/bundle" >/dev/null
  mkdir -p "$build/bundle/rootfs/bin" "$build/bundle/rootfs/etc"
  cp /bin/busybox "$build/bundle/rootfs/bin/busybox"
  for tool in sh cat ls echo id env uname sleep true; do ln -s busybox "$build/bundle/rootfs/bin/$tool"; done
  echo "Hello from an image built by scripts/local-registry.sh" >"$build/bundle/rootfs/etc/allot-demo"
  umoci repack --image "$build/layout:demo" "$build/bundle"
  umoci config --image "$build/layout:demo" --config.cmd /bin/sh
  skopeo --insecure-policy copy --quiet --dest-tls-verify=false "oci:$build/layout:demo" "docker://$IMAGE"
fi
echo "$IMAGE"
