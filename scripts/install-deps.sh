#!/usr/bin/env bash
# Installs the Debian packages that building, running and testing Allot need. Idempotent and
# quiet when everything is already there; run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libboost-url1.81-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev
  # `allot run -f job.yaml` reads job specs with yaml-cpp.
  libyaml-cpp-dev
  libsodium-dev zlib1g-dev libsqlite3-dev sqlite3 libpq-dev libssl-dev openssl
  # Container images (docs/environments.md): layers read with libarchive, pulled with skopeo; the
  # image tests run Debian's docker-registry on loopback and build their images with umoci from
  # busybox (docker-registry's package starts no service here: there is no systemd); jobs in an
  # image run under crun, with containers-common's seccomp profile (golang-github-containers-common,
  # which skopeo depends on anyway), compiled once by the agent with libseccomp.
  libarchive-dev skopeo umoci docker-registry busybox-static crun golang-github-containers-common
  libseccomp-dev
  libldap-dev slapd ldap-utils
  libgtest-dev libgmock-dev libbenchmark-dev
  # The fuzz target (fuzz/) is built by clang with libFuzzer, ASan and UBSan.
  clang libclang-rt-dev
  curl procps iproute2
  # promtool checks the /metrics output in the tests; the Prometheus daemon it comes with is
  # neither started nor used.
  prometheus
  # Reprovisioning hooks run host profiles with ansible-playbook (deploy/ansible/); the
  # integration tests run the shipped example with it.
  ansible-core
  # The console's end-to-end tests drive Debian's Chromium with playwright-core (web/test/).
  chromium
  # Interactive sessions (docs/sessions.md): the default jupyter profile runs Debian's Jupyter
  # (the fork server imports it) with the classic notebook interface (nbclassic, a jupyter-server
  # extension: JupyterLab's server is not packaged in Debian), kernels are ipykernel, and SSH to
  # a session runs OpenSSH's sshd in inetd mode per connection (no system sshd is started or used).
  python3-jupyter-server jupyter-server python3-nbclassic python3-notebook jupyter-notebook
  python3-ipykernel
  openssh-server openssh-client
  # Multi-host jobs' tests rendezvous a real two-rank torch.distributed all-reduce (gloo on CPU)
  # and torchrun --nnodes 2 across two agents (docs/scheduler.md, "Multi-host jobs").
  python3-torch
  # `allot man` writes roff that the CLI's tests check with groff; man reads it. The zsh
  # completion is tested in a real zsh (tests/scripts/zsh_completion_test.zsh).
  groff-base man-db zsh
)

# Node.js and npm build the web console (Vite needs Node 20.19 or later). Machines of this kind
# come with them; elsewhere Debian's packages are the fallback.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

# shellcheck source=scripts/apt-packages.sh
. "$(dirname "$0")/apt-packages.sh"
mapfile -t missing < <(missing_packages "${packages[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
apt_install "${missing[@]}"
