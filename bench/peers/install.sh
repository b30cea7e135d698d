#!/usr/bin/env bash
# Installs what only the side-by-side benchmarks in bench/peers/ need: Debian's Slurm 22.05
# (slurmctld, slurmd, the client commands), MUNGE for its authentication, JupyterHub 3.0 and
# its proxy, and podman (bench/image_job_start.py's peer for jobs in images). `make build` and `make test` need none of them (scripts/install-deps.sh does not
# install them). Idempotent and quiet when everything is already there; run as root (or with
# sudo available).
#
# The packages' maintainer scripts would start the system's munged, slurmctld and slurmd; a
# policy-rc.d for the length of the install keeps them stopped (the benchmark starts its own,
# with its own key, config and sockets in a scratch dir, and never touches /etc/slurm or the
# system's munge). An existing policy-rc.d is left as it is.
set -euo pipefail

packages=(
  slurmctld slurmd slurm-client munge
  jupyterhub node-configurable-http-proxy
  podman
)

# shellcheck source=scripts/apt-packages.sh
. "$(dirname "$0")/../../scripts/apt-packages.sh"
mapfile -t missing < <(missing_packages "${packages[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
apt_install "${missing[@]}"
