"""Fabric Manager's detection against a real mount: the DRA driver's rule
(``HasFabricManagerFabric``, ``pkg/fabricmanager/fabric.go`` of the
kubernetes-sigs/dra-driver-nvidia-gpu line, as stored from the varunrsekar/k8s-dra-driver
fork; NVIDIA/nvrc's detection reads the same two things), in Python and in Go, and lspci
decoding the management ports' VPD.

Fabric Manager is needed when ``/proc/driver/nvidia-nvswitch/devices`` holds an entry
(HGX A100/H100/H200: the nvswitch driver probed an NVSwitch) or when the ``vpd`` of some
InfiniBand device's PCI function contains ``SW_MNG`` (HGX B200: NVLink5 management ports).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.mounts import Mount, mokkafs_mount
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.consumers


def needs_fabric_manager(root: Path) -> bool:
    """The detection as the consumers do it, on a tree rooted at ``root``: list the
    nvswitch devices directory, else search every HCA's VPD bytes for SW_MNG."""
    devices = root / "proc/driver/nvidia-nvswitch/devices"
    if devices.is_dir() and any(devices.iterdir()):
        return True
    ib = root / "sys/class/infiniband"
    if not ib.is_dir():
        return False
    for dev in ib.iterdir():
        vpd = dev / "device/vpd"
        if vpd.exists() and b"SW_MNG" in vpd.read_bytes():
            return True
    return False


@pytest.fixture(scope="module")
def fmdetect(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go reader (tests/consumers/go/fmdetect), built offline with the standard library."""
    go = require_tool("go")
    work = tmp_path_factory.mktemp("fmdetect")
    out = work / "fmdetect"
    env = {**os.environ, "GO111MODULE": "off", "GOPROXY": "off", "GOPATH": str(work / "gopath"),
           "GOCACHE": str(work / "cache"), "CGO_ENABLED": "0"}
    source = Path(__file__).parent / "go" / "fmdetect" / "main.go"
    subprocess.run([go, "build", "-o", str(out), str(source)], env=env, check=True,
                   timeout=300, cwd=work)
    return out


def go_says(fmdetect: Path, root: Path) -> bool:
    out = subprocess.run([str(fmdetect), str(root)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out in ("yes\n", "no\n"), out
    return out == "yes\n"


@pytest.fixture(scope="module")
def b200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    mnt = tmp_path_factory.mktemp("fabric") / "mnt"
    with mokkafs_mount(mnt, ["--profile", "b200", "--node-name", "node-a"]) as mount:
        yield mount


@pytest.mark.parametrize(("profile", "needed"), [("h100", True), ("a100", True),
                                                  ("gb200", False)])
def test_fabric_manager_detection_follows_the_nvswitches(tmp_path: Path, profile: str,
                                                         needed: bool, fmdetect: Path) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", profile,
                                          "--node-name", "node-a"]) as mount:
        assert needs_fabric_manager(mount.path) is needed
        assert go_says(fmdetect, mount.path) is needed
        devices = mount.path / "proc/driver/nvidia-nvswitch/devices"
        listed = sorted(p.name for p in devices.iterdir())
        state = state_of(profile)
        assert listed == sorted(fn.bdf for fn in state.functions if fn.kind == "nvswitch")
        for bdf in listed:
            info = (devices / bdf / "information").read_text()
            assert info.startswith("BIOS Version: ") and info.endswith("\n")
        # the N of /dev/nvidia-nvswitch<N> is the entry's place in bus order
        nodes = sorted(p.name for p in (mount.path / "dev").glob("nvidia-nvswitch[0-9]*"))
        assert nodes == sorted(f"nvidia-nvswitch{i}" for i in range(len(listed)))


def test_b200_needs_fabric_manager_through_its_management_ports(b200: Mount,
                                                               fmdetect: Path) -> None:
    assert not any((b200.path / "proc/driver/nvidia-nvswitch/devices").iterdir())
    assert needs_fabric_manager(b200.path)
    assert go_says(fmdetect, b200.path)
    marked = sorted(d.name for d in (b200.sys / "class/infiniband").iterdir()
                    if (d / "device/vpd").exists()
                    and b"SW_MNG" in (d / "device/vpd").read_bytes())
    assert marked == ["mlx5_8", "mlx5_9"]


def test_lspci_decodes_the_management_ports_vpd(b200: Mount) -> None:
    out = subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                          f"sysfs.path={b200.sys}/bus/pci", "-vv", "-s", "e9:00.0"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "Capabilities: [80] Vital Product Data" in out, out
    assert "Product Name: NVIDIA ConnectX-7 HHHL NVLink management adapter" in out, out
    assert "SMDL=SW_MNG" in out, out
    assert "[RV] Reserved: checksum good" in out, out
    compute = subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                              f"sysfs.path={b200.sys}/bus/pci", "-vv", "-s", "18:00.0"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert "Vital Product Data" not in compute
