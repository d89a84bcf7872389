#!/usr/bin/env bash
# Install what mokkafs needs on a fresh Debian 12 machine, and a virtualenv in .venv with the
# package installed in editable mode (pyfuse3 built with the project's patch first).
#
#   scripts/setup.sh             everything scripts/test.sh runs: the runtime, the real
#                                consumers and container runtimes the tests drive, the test
#                                and lint tools (the package's [test] extra)
#   scripts/setup.sh --runtime   only what mounts a view and what scripts/demo.sh shows
#                                through it (lspci, ibstat): no test tool chain
#   scripts/setup.sh [--runtime] --list   print what that would install, install nothing
#
# Idempotent: a second run only checks. Needs root (or sudo) for apt. It writes nothing outside
# this directory but the apt packages: the CLI is .venv/bin/mokkafs, and the last line says how
# to type it bare (several checkouts on one machine would fight over one link in /usr/local/bin).
# Each step that takes time (apt, pip, the pyfuse3 build) says what it does, on a "setup: "
# line to stderr, before it starts: a first run takes minutes and is otherwise quiet.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

runtime_only=false list=false
for arg in "$@"; do
  case $arg in
    --runtime) runtime_only=true ;;
    --list) list=true ;;
    *) echo "usage: scripts/setup.sh [--runtime] [--list]" >&2; exit 2 ;;
  esac
done

RUNTIME_PACKAGES=(
  # what a minimal Debian 12 (debootstrap --variant=minbase) lacks to build and run mokkafs
  python3 python3-venv python3-dev ca-certificates
  fuse3 libfuse3-dev pkg-config gcc libc6-dev patch libjson-c-dev
  # the consumers scripts/demo.sh shows the view through
  pciutils infiniband-diags util-linux
)
TEST_PACKAGES=(
  # the real consumers and runtimes the tests run, make for native/Makefile, and git (a
  # test copies the tracked files, as a clean clone has them: tests/e2e/test_setup.py)
  git make curl ibverbs-utils ibverbs-providers prometheus-node-exporter
  golang-go golang-github-prometheus-procfs-dev hwloc-nox numactl
  podman runc crun busybox-static iproute2
  golang-github-container-orchestrated-devices-container-device-interface-dev
  # the deploy tests: systemd-analyze, and the image base made by debootstrap
  systemd debootstrap
  # nvtop on mokkafs's NVML, in a tmux session (nvtop is in Debian's contrib: below)
  nvtop tmux
)
APT_PACKAGES=("${RUNTIME_PACKAGES[@]}")
target=.  # what pip installs: the package, and for the tests its [test] extra
if ! $runtime_only; then
  APT_PACKAGES+=("${TEST_PACKAGES[@]}")
  target=".[test]"
fi
# nvtop is in Debian's contrib component, which a stock Debian 12 does not enable: the tests'
# set-up adds it, in a sources file of its own, unless a sources file enables it already.
# APT_ETC (default /etc/apt) is where apt's sources are; the set-up's own test points it away.
apt_etc=${APT_ETC:-/etc/apt}
contrib_sources=$apt_etc/sources.list.d/mokkafs-contrib.sources
contrib_enabled() {  # a line, not a comment, naming the component
  grep -qsE '^[^#]*\<contrib\>' "$apt_etc/sources.list" "$apt_etc"/sources.list.d/*.list \
    "$apt_etc"/sources.list.d/*.sources
}
if $list; then
  echo "apt: ${APT_PACKAGES[*]}"
  $runtime_only || echo "apt-sources: contrib (bookworm, for nvtop) unless enabled"
  echo "pip: pyfuse3 (patched), -e $target"
  exit 0
fi

say() { echo "setup: $*" >&2; }  # before each step that takes time
pip_upgraded=false
upgrade_pip() {  # once a run, before the first install (Debian's pip is old)
  $pip_upgraded && return
  say "pip install --upgrade pip"
  .venv/bin/pip install -q --upgrade pip
  pip_upgraded=true
}

sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
if ! $runtime_only && ! contrib_enabled; then
  say "adding Debian's contrib component (for nvtop) to apt: $contrib_sources"
  printf '%s\n' "# Debian's contrib component, for nvtop: added by mokkafs's scripts/setup.sh" \
    "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: bookworm bookworm-updates" \
    "Components: contrib" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" |
    "${sudo_cmd[@]}" tee "$contrib_sources" >/dev/null
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "apt-get update (the package lists)"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  say "apt-get install ${#missing[@]} packages (a minute or more on a bare machine): ${missing[*]}"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's own Python (what a stock machine has), unless PYTHON names another.
py=${PYTHON:-/usr/bin/python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$py" -m venv .venv
fi
# pyfuse3 with the project's patch (native/pyfuse3/), before mokkafs so pip keeps it (it is
# the very release pyproject.toml pins).
pyfuse3_stamp=.venv/.pyfuse3-patched
if [ ! -f "$pyfuse3_stamp" ] || [ -n "$(find scripts/build-pyfuse3.sh native/pyfuse3 -newer "$pyfuse3_stamp" -print -quit)" ]; then
  upgrade_pip
  say "building pyfuse3 with native/pyfuse3/pass-inode-when-no-open.patch (about a minute)"
  scripts/build-pyfuse3.sh .venv/bin/pip
  touch "$pyfuse3_stamp"
fi
# The tests' own: the unpatched release beside it, which proves the keep-cache fallback.
stock_stamp=.venv/.pyfuse3-stock
if [ -d .venv/pyfuse3-stock ] && [ -f "$pyfuse3_stamp" ] && [ ! -f "$stock_stamp" ]; then
  touch -r "$pyfuse3_stamp" "$stock_stamp"  # installed by an earlier set-up, with the other
fi
if ! $runtime_only && { [ ! -f "$stock_stamp" ] || [ scripts/build-pyfuse3.sh -nt "$stock_stamp" ]; }; then
  say "installing the unpatched pyfuse3 into .venv/pyfuse3-stock (for the tests)"
  scripts/build-pyfuse3.sh .venv/bin/pip --stock .venv/pyfuse3-stock
  touch "$stock_stamp"
fi
# Reinstall when the package definition or the shim's C sources (compiled by pip) changed;
# the [test] extra has a stamp of its own, so a demo's set-up followed by the tests' adds it.
stamp=.venv/.mokkafs-installed
$runtime_only || stamp=.venv/.mokkafs-test-installed
if [ ! -f "$stamp" ] || [ -n "$(find pyproject.toml setup.py native -newer "$stamp" -print -quit)" ]; then
  upgrade_pip
  say "pip install -e $target: mokkafs, its dependencies and the native shim into .venv"
  .venv/bin/pip install -q -e "$target"
  touch "$stamp"
  $runtime_only || touch .venv/.mokkafs-installed
fi

if [ "$(command -v mokkafs)" != "$here/.venv/bin/mokkafs" ]; then
  say "the CLI is $here/.venv/bin/mokkafs; to type it as the README does, run:"
  echo "  export PATH=\"$here/.venv/bin:\$PATH\"" >&2
fi
