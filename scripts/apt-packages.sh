# Sourced by scripts/install-deps.sh and bench/peers/install.sh: which Debian packages of a list
# are missing, and installing them quietly (through sudo when not root).

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Prints, one per line, the packages named that are not installed.
missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
