#!/usr/bin/env bash
# Set up what it runs (setup.sh --runtime: mokkafs and the consumers below, not the test tool
# chain), mount the default profile in a temporary directory, show what real consumers see
# through it, and keep serving until Ctrl-C, which unmounts cleanly.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh" --runtime
profile=${MOKKAFS_PROFILE:-h100}
mnt=$(mktemp -d /tmp/mokkafs-demo.XXXXXX)
"$here/.venv/bin/mokkafs" mount --profile "$profile" "$mnt" &
pid=$!
cleanup() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 0' INT TERM
for _ in $(seq 100); do
  [ -e "$mnt/sys/bus/pci/devices" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "demo: mokkafs exited" >&2; exit 1; }
  sleep 0.1
done
echo
echo "== lspci -nn -k, reading $mnt/sys/bus/pci"
lspci -A linux-sysfs -O "sysfs.path=$mnt/sys/bus/pci" -nn -k 2>/dev/null
echo
echo "== lspci -tv: host bridges, root ports and PCIe switches"
lspci -A linux-sysfs -O "sysfs.path=$mnt/sys/bus/pci" -tv 2>/dev/null
if [ -d "$mnt/sys/class/infiniband" ]; then
  echo
  echo "== ibstat -l and ibstatus, with $mnt/sys over /sys in a private mount namespace"
  unshare -m sh -c "mount --make-rprivate / && mount --bind '$mnt/sys' /sys && ibstat -l && ibstatus | head -9"
fi
echo
echo "== /proc/devices as served: simulated majors"
grep -E 'nvidia|infiniband' "$mnt/proc/devices"
echo
echo "== the machine (DMI) and its driver"
echo "product_name: $(cat "$mnt/sys/class/dmi/id/product_name")"
if [ -e "$mnt/proc/driver/nvidia/version" ]; then
  head -1 "$mnt/proc/driver/nvidia/version"
  echo "/sys/module/nvidia/version: $(cat "$mnt/sys/module/nvidia/version")"
fi
echo
echo "mokkafs serves $profile at $mnt (pid $pid). Try:"
echo "  lspci -A linux-sysfs -O sysfs.path=$mnt/sys/bus/pci -vvv"
echo "  ls $mnt/sys/class/infiniband/mlx5_0/ports/1/counters"
echo "Press Ctrl-C to unmount."
wait "$pid"
