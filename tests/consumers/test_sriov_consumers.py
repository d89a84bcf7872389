"""SR-IOV as its consumers find it, before and after ``echo 4 > sriov_numvfs``: a reader doing
the SR-IOV network device plugin's discovery, NFD's pci source, lspci and hwloc.

The device plugin's sysfs reads are those of k8snetworkplumbingwg/sriov-network-device-plugin,
pkg/utils/utils.go (IsSriovPF: ``sriov_totalvfs`` exists; GetSriovVFcapacity, GetVFconfigured;
GetNetNames: ``net/`` under the device, else "no net directory under pci device"; GetVFList:
``virtfn*``; IsSriovVF/GetPfAddr: ``physfn``; GetDriverName: ``driver``; GetDevNode... numa_node;
GetIOMMUGroup: ``iommu_group``). NFD's are those of kubernetes-sigs/node-feature-discovery,
source/pci/utils.go and pci.go (``sriov_totalvfs`` > 0 gives ``<class>_<vendor>.sriov.capable``).
This reader is our own code written to that logic.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.live import Live, live_mount
from tests.helpers.profiles import H100_NIC0
from tests.helpers.tools import require_tool

PF = H100_NIC0


@pytest.fixture
def h100(tmp_path: Path) -> Iterator[Live]:
    # A plain view (the node's own namespace): /sys/class/net lists the netdevs, which hwloc
    # reads to place them (docs/writes.md, "Netdevs and network namespaces").
    with live_mount(tmp_path, "h100", extra=["--host-sysfs", "none", "--writable"]) as live:
        yield live


def discover(sys: Path) -> dict[str, dict[str, object]]:
    """The device plugin's netDevice discovery: every PCI device of class 02, as a PF (its
    capacity, configured VFs, netdev names) or a VF (its PF, driver, NUMA node, group)."""
    devices = sys / "bus/pci/devices"
    found: dict[str, dict[str, object]] = {}
    for bdf in sorted(os.listdir(devices)):
        d = devices / bdf
        if not (d / "class").read_text().startswith("0x02"):
            continue
        info: dict[str, object] = {}
        net = d / "net"
        if not net.is_dir():
            raise AssertionError(f"no net directory under pci device {bdf}")
        info["names"] = sorted(os.listdir(net))
        if (d / "sriov_totalvfs").exists():
            info["total"] = int((d / "sriov_totalvfs").read_text())
            info["configured"] = int((d / "sriov_numvfs").read_text())
            info["vfs"] = sorted(os.path.basename(os.readlink(d / v))
                                 for v in os.listdir(d) if v.startswith("virtfn"))
        if (d / "physfn").exists():
            info["pf"] = os.path.basename(os.readlink(d / "physfn"))
            pf_net = devices / str(info["pf"]) / "net"
            info["pf_name"] = sorted(os.listdir(pf_net))[0]
        info["driver"] = os.path.basename(os.readlink(d / "driver"))
        info["numa"] = int((d / "numa_node").read_text())
        info["group"] = os.path.basename(os.readlink(d / "iommu_group"))
        found[bdf] = info
    return found


def nfd_labels(sys: Path, whitelist: tuple[str, ...] = ("02",)) -> set[str]:
    """NFD's pci source with deviceClassWhitelist ["02"] and the default label fields
    (class, vendor)."""
    labels = set()
    for bdf in os.listdir(sys / "bus/pci/devices"):
        d = sys / "bus/pci/devices" / bdf
        cls = (d / "class").read_text().strip()[2:6]
        if not any(cls.startswith(w) for w in whitelist):
            continue
        vendor = (d / "vendor").read_text().strip()[2:]
        labels.add(f"pci-{cls}_{vendor}.present")
        total = d / "sriov_totalvfs"
        if total.exists() and int(total.read_text()) > 0:
            labels.add(f"pci-{cls}_{vendor}.sriov.capable")
    return labels


def lspci(live: Live, *args: str) -> str:
    return subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                           f"sysfs.path={live.mount.sys}/bus/pci", *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_the_device_plugin_finds_pfs_then_four_vfs(h100: Live) -> None:
    sys = h100.mount.sys
    before = discover(sys)
    pfs = {bdf: info for bdf, info in before.items() if "total" in info}
    assert len(pfs) == 12 and all(info["total"] == 8 for info in pfs.values())
    assert before[PF]["names"] == ["ibp24s0"] and before[PF]["configured"] == 0
    assert nfd_labels(sys) == {"pci-0207_15b3.present", "pci-0207_15b3.sriov.capable"}
    result = subprocess.run(["sh", "-c", f"echo 4 > {sys}/bus/pci/devices/{PF}/sriov_numvfs"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    after = discover(sys)
    vfs = {bdf: info for bdf, info in after.items() if info.get("pf") == PF}
    assert sorted(vfs) == after[PF]["vfs"] == [f"0000:18:00.{i}" for i in range(1, 5)]
    groups = {info["group"] for info in after.values()}
    assert len(groups) == len(after)
    for i, (_, info) in enumerate(sorted(vfs.items())):
        assert info["driver"] == "mlx5_core" and info["numa"] == after[PF]["numa"] == 0
        assert info["names"] == [f"ibp24s0v{i}"] and info["pf_name"] == "ibp24s0"


def test_lspci_and_hwloc_show_the_vfs(h100: Live) -> None:
    sys = h100.mount.sys
    (sys / "bus/pci/devices" / PF / "sriov_numvfs").write_text("2\n")
    listing = lspci(h100, "-nn", "-k", "-s", "18:")
    assert len(re.findall(r"\[15b3:101e\]", listing)) == 2
    assert listing.count("Kernel driver in use: mlx5_core") == 3
    tree = lspci(h100, "-tv")
    assert re.search(r"-\[18\]--\+-00\.0  Mellanox.*ConnectX-7\]\n.*\+-00\.1  Mellanox.*"
                     r"Virtual Function\n.*\\-00\.2  Mellanox.*Virtual Function\n", tree), tree
    verbose = lspci(h100, "-vvv", "-s", PF[5:])
    assert "Single Root I/O Virtualization (SR-IOV)" in verbose
    assert re.search(r"Initial VFs: 8, Total VFs: 8, Number of VFs: 2", verbose)
    assert re.search(r"VF offset: 1, stride: 1, Device ID: 101e", verbose)
    exe = require_tool("lstopo-no-graphics")
    topo = subprocess.run([exe, "-v", "--whole-io"], capture_output=True, text=True, check=True,
                          timeout=120, env={"HWLOC_FSROOT": str(h100.mount.path),
                                            "PATH": "/usr/bin:/bin"}).stdout
    # Each VF a PCI device beside its PF, below the PF's bridge, with its netdev and its
    # RDMA device below it.
    lines = topo.splitlines()
    at = next(i for i, line in enumerate(lines) if "busid=0000:18:00.0" in line)
    assert "PCIBridge" in lines[at - 1] and "busid=0000:17:00.0" in lines[at - 1]
    indent = len(lines[at]) - len(lines[at].lstrip())
    siblings = [line.split()[2] for line in lines[at:]
                if len(line) - len(line.lstrip()) == indent]
    assert siblings[:3] == ["(busid=0000:18:00.0", "(busid=0000:18:00.1", "(busid=0000:18:00.2"]
    vf0 = topo[topo.index("busid=0000:18:00.1"):topo.index("busid=0000:18:00.2")]
    assert '"ibp24s0v0"' in vf0 and '"mlx5_12"' in vf0
