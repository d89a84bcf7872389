"""Driver binding through a real ``--writable`` mount (docs/writes.md, "Drivers"): unbinding a
GPU takes its driver link, its /proc/driver/nvidia entry, its device node and its CDI device
node away, and binding brings them back; ``driver_override`` and ``drivers_probe`` decide the
driver as the kernel's do; ``lspci -nn -k`` (pciutils) shows the binding; readers that listed
directories before a write see the change after it. Both cache modes (the suite runs again
with MOKKAFS_CACHE_MODE=keep-cache)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuse.test_writes import shell, write_errno, writes_cli
from tests.helpers.dra_vfio import VfioView, vfio_view
from tests.helpers.live import Live, cdi_node, live_mount, profile_text, rename_over, requests
from tests.helpers.mounts import wait_for
from tests.helpers.profiles import H100_GPU0, device_path
from tests.helpers.tools import require_tool

GPU = H100_GPU0
WRITABLE = [sys.executable, "-m", "mokkafs", "mount", "--writable"]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Live]:
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    with live_mount(tmp_path, "h100", extra=["--control", str(control), "--writable"]) as live:
        yield live


def lspci_k(live: Live, bdf: str) -> str:
    return subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                           f"sysfs.path={live.mount.path}/sys/bus/pci", "-nn", "-k", "-s", bdf],
                          capture_output=True, text=True, check=True, timeout=60).stdout


def test_unbind_takes_the_gpus_entries_away_and_bind_brings_them_back(node: Live) -> None:
    root = node.mount.path
    fn = root / device_path(GPU)
    nvidia = root / "sys/bus/pci/drivers/nvidia"
    gpus = root / "proc/driver/nvidia/gpus"
    minor = int(next(line for line in (gpus / GPU / "information").read_text().splitlines()
                     if line.startswith("Device Minor")).split()[-1])
    before = {d: sorted(os.listdir(d)) for d in (nvidia, gpus, root / "dev", fn)}
    assert "Kernel driver in use: nvidia" in lspci_k(node, GPU)
    result = shell(f"echo {GPU} > {nvidia}/unbind")
    assert result.returncode == 0, result.stderr
    # No polling: the write returned once the view was installed and the kernel told.
    assert sorted(os.listdir(nvidia)) == [n for n in before[nvidia] if n != GPU]
    assert sorted(os.listdir(gpus)) == [n for n in before[gpus] if n != GPU]
    assert sorted(os.listdir(root / "dev")) == [n for n in before[root / "dev"]
                                                 if n != f"nvidia{minor}"]
    assert sorted(os.listdir(fn)) == [n for n in before[fn] if n != "driver"]
    assert not (fn / "driver").exists() and "DRIVER=" not in (fn / "uevent").read_text()
    assert "Kernel driver in use" not in lspci_k(node, GPU)
    assert writes_cli(node, "list") == f"{GPU}\tdriver\t\n"
    assert write_errno(nvidia / "unbind", GPU.encode(), 0) == errno.ENODEV  # bound to none
    assert write_errno(nvidia / "bind", GPU.encode(), 0) == 0
    assert {d: sorted(os.listdir(d)) for d in before} == before
    assert (gpus / GPU / "information").exists() and (root / f"dev/nvidia{minor}").exists()
    assert "Kernel driver in use: nvidia" in lspci_k(node, GPU)
    assert write_errno(nvidia / "bind", GPU.encode(), 0) == errno.EBUSY
    assert node.metric('mokkafs_writes_refused_total{errno="EBUSY"}') == 1
    assert node.metric("mokkafs_writes_taken_total") == 2


def test_the_override_and_drivers_probe(node: Live) -> None:
    root = node.mount.path
    fn, bus = root / device_path(GPU), root / "sys/bus/pci"
    override = fn / "driver_override"
    assert override.read_text() == "(null)\n"
    assert write_errno(override, b"mlx5_core\n") == 0
    assert override.read_text() == "mlx5_core\n"
    assert write_errno(bus / "drivers/nvidia/unbind", f"{GPU}\n".encode(), 0) == 0
    assert write_errno(bus / "drivers/nvidia/bind", GPU.encode(), 0) == errno.ENODEV
    listed = sorted(os.listdir(bus / "drivers/mlx5_core"))
    assert write_errno(bus / "drivers_probe", GPU.encode(), 0) == 0
    assert sorted(os.listdir(bus / "drivers/mlx5_core")) == sorted([*listed, GPU])
    assert os.path.basename(os.readlink(fn / "driver")) == "mlx5_core"
    assert "Kernel driver in use: mlx5_core" in lspci_k(node, GPU)
    assert write_errno(bus / "drivers_probe", b"0000:ff:00.0", 0) == errno.ENODEV
    assert write_errno(override, b"x" * 4095) == errno.EINVAL
    assert writes_cli(node, "clear") == "cleared 2 writes\n"
    assert override.read_text() == "(null)\n"
    assert os.path.basename(os.readlink(fn / "driver")) == "nvidia"


def test_a_listing_taken_before_a_bind_sees_it_after(node: Live) -> None:
    nvidia = node.mount.path / "sys/bus/pci/drivers/nvidia"
    assert write_errno(nvidia / "unbind", GPU.encode(), 0) == 0
    os.listdir(nvidia)
    os.listdir(nvidia)  # the kernel holds the listing now (or asks every time: no-open)
    base = requests(node)
    assert write_errno(nvidia / "bind", GPU.encode(), 0) == 0
    after_write = requests(node)
    assert GPU in os.listdir(nvidia)
    asked = requests(node)
    assert asked.get("readdir", 0) > after_write.get("readdir", 0) >= base.get("readdir", 0)


def test_the_cdi_spec_follows_the_binding(tmp_path: Path) -> None:
    with cdi_node(tmp_path, command=WRITABLE) as (live, spec, _):
        def nodes() -> list[str]:
            return [n["path"] for n in json.loads(spec.read_text())["devices"][0]
                    ["containerEdits"]["deviceNodes"]]
        first = nodes()
        assert "/dev/nvidia0" in first
        unbind = live.mount.path / "sys/bus/pci/drivers/nvidia/unbind"
        minor = int(next(line for line in (live.mount.path / "proc/driver/nvidia/gpus" / GPU /
                                           "information").read_text().splitlines()
                         if line.startswith("Device Minor")).split()[-1])
        assert write_errno(unbind, GPU.encode(), 0) == 0
        # the spec is published after the swap: poll for it
        wait_for(lambda: f"/dev/nvidia{minor}" not in nodes(), 20, "the spec without the GPU")
        assert sorted(nodes()) == sorted(n for n in first if n != f"/dev/nvidia{minor}")


VFIO_TEXT = '  driver_version: "550.163.01"\n'


def test_a_gpu_rebound_to_vfio_pci_as_the_dra_driver_checks(tmp_path: Path) -> None:
    with cdi_node(tmp_path, command=WRITABLE) as (live, spec, _):
        root = live.mount.path
        before = vfio_view(root, GPU)
        assert not before.module_loaded and before.driver == "nvidia"  # a stock DGX node
        rename_over(live, profile_text("h100").replace(
            VFIO_TEXT, VFIO_TEXT + "  vfio_pci: true\n"))
        live.wait_generation(2)
        assert vfio_view(root, GPU) == VfioView(True, True, "nvidia", None, None)
        listed = sorted(os.listdir(root / "dev/vfio"))
        assert listed == ["vfio"]
        fn = root / device_path(GPU)
        group = int(os.path.basename(os.readlink(fn / "iommu_group")))
        assert shell(f"echo vfio-pci > {fn}/driver_override && "
                     f"echo {GPU} > {root}/sys/bus/pci/drivers/nvidia/unbind && "
                     f"echo {GPU} > {root}/sys/bus/pci/drivers_probe").returncode == 0
        view = vfio_view(root, GPU)
        assert view == VfioView(True, True, "vfio-pci", str(root / f"dev/vfio/{group}"),
                                str(root / f"dev/vfio/devices/vfio{group}"))
        assert sorted(os.listdir(root / "dev/vfio")) == sorted(["devices", "vfio", str(group)])
        majors = {name: int(major) for major, name in (
            line.split() for line in (root / "proc/devices").read_text().split(
                "Block devices:")[0].splitlines()[1:] if line.strip())}
        assert os.major(os.stat(root / f"dev/vfio/{group}").st_rdev) == majors["vfio"]
        assert os.major(os.stat(root / "dev/vfio/vfio").st_rdev) == majors["misc"] == 10
        assert "Kernel driver in use: vfio-pci" in lspci_k(live, GPU)
        assert "vfio_pci " in (root / "proc/modules").read_text()
        assert not (root / "proc/driver/nvidia/gpus" / GPU).exists()

        def nodes() -> set[str]:
            return {n["path"] for n in json.loads(spec.read_text())["devices"][0]
                    ["containerEdits"]["deviceNodes"]}
        wait_for(lambda: f"/dev/vfio/{group}" in nodes(), 20, "the spec with the group")
        assert {"/dev/vfio/vfio", f"/dev/vfio/devices/vfio{group}"} <= nodes()


def test_remove_and_rescan(node: Live) -> None:
    root = node.mount.path
    devices, gpus = root / "sys/bus/pci/devices", root / "proc/driver/nvidia/gpus"
    before = {d: sorted(os.listdir(d)) for d in (devices, gpus)}
    lspci = [require_tool("lspci"), "-A", "linux-sysfs", "-O",
             f"sysfs.path={root}/sys/bus/pci", "-D", "-n"]
    listed = subprocess.run(lspci, capture_output=True, text=True, check=True).stdout
    assert GPU in listed
    assert write_errno(root / device_path(GPU) / "remove", b"yes", 0) == errno.EINVAL
    assert write_errno(root / device_path(GPU) / "remove", b"1\n", 0) == 0
    assert sorted(os.listdir(devices)) == [n for n in before[devices] if n != GPU]
    assert sorted(os.listdir(gpus)) == [n for n in before[gpus] if n != GPU]
    assert GPU not in subprocess.run(lspci, capture_output=True, text=True, check=True).stdout
    assert writes_cli(node, "list") == f"{GPU}\tremove\t1\n"
    assert write_errno(root / "sys/bus/pci/rescan", b"1", 0) == 0
    assert {d: sorted(os.listdir(d)) for d in before} == before
    assert subprocess.run(lspci, capture_output=True, text=True, check=True).stdout == listed
    assert writes_cli(node, "list") == ""
    # the GPU's own bus, rescanned through its bridge's pci_bus entry
    bridge = (root / device_path(GPU)).parent
    assert write_errno(root / device_path(GPU) / "remove", b"1", 0) == 0
    assert write_errno(bridge / "pci_bus" / GPU[:7] / "rescan", b"1", 0) == 0
    assert {d: sorted(os.listdir(d)) for d in before} == before
