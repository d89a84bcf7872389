#!/usr/bin/env bash
# Install everything mokkafs and its test suite need on a fresh Debian 12 machine:
# the FUSE library pyfuse3 builds against, the real consumers the tests run, and a
# virtualenv in .venv with the package installed in editable mode.
# Idempotent: a second run only checks. Needs root (or sudo) for apt.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

APT_PACKAGES=(
  # what a minimal Debian 12 (debootstrap --variant=minbase) lacks to build and run mokkafs
  python3 python3-venv python3-dev ca-certificates
  fuse3 libfuse3-dev pkg-config gcc libc6-dev make patch curl libjson-c-dev
  # the real consumers and runtimes the tests run
  pciutils infiniband-diags ibverbs-utils ibverbs-providers prometheus-node-exporter
  golang-go golang-github-prometheus-procfs-dev hwloc-nox
  podman runc crun busybox-static iproute2 util-linux
  golang-github-container-orchestrated-devices-container-device-interface-dev
  # the deploy tests: systemd-analyze, and the image base made by debootstrap
  systemd debootstrap
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}" >&2
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's own Python (what a stock machine has), unless PYTHON names another.
py=${PYTHON:-/usr/bin/python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$py" -m venv .venv
fi
# pyfuse3 with the project's patch (native/pyfuse3/), before mokkafs so pip keeps it; and the
# unpatched release beside it, which the tests use to prove the keep-cache fallback.
pyfuse3_stamp=.venv/.pyfuse3-patched
if [ ! -f "$pyfuse3_stamp" ] || [ -n "$(find scripts/build-pyfuse3.sh native/pyfuse3 -newer "$pyfuse3_stamp" -print -quit)" ]; then
  echo "setup: building pyfuse3 with native/pyfuse3/pass-inode-when-no-open.patch" >&2
  .venv/bin/pip install -q --upgrade pip
  scripts/build-pyfuse3.sh .venv/bin/pip
  scripts/build-pyfuse3.sh .venv/bin/pip --stock .venv/pyfuse3-stock
  touch "$pyfuse3_stamp"
fi
stamp=.venv/.mokkafs-installed
# Reinstall when the package definition or the shim's C sources (compiled by pip) changed.
if [ ! -f "$stamp" ] || [ -n "$(find pyproject.toml setup.py native -newer "$stamp" -print -quit)" ]; then
  echo "setup: installing mokkafs and test dependencies into .venv" >&2
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[test]'
  touch "$stamp"
fi
