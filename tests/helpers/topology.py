"""Readers written to the consumers' published logic, for tests (stdlib only, so a test can run
this file inside a container: ``python3 topology.py SYSROOT nccl|dra ...``).

- NCCL (src/graph/xml.cc, topo.cc, paths.cc): a GPU's sysfs directory is the realpath of
  ``class/pci_bus/<dddd:bb>/../../<bdf>``; a NIC's is the realpath of
  ``class/infiniband/<dev>/device`` with its function (and, merging VFs, its device) set to 0.
  Walking up, the first-level parent is skipped and the second, if it is a BDF, becomes the
  parent PCI node (a switch's upstream port); a component that is not a BDF is the root
  complex: a CPU node keyed by the numa_node of the node below it. The path type between two
  devices is the worst hop: PIX within one PCI node, PXB across nested ones, PHB through a
  CPU, SYS across CPUs. (BCM switch flattening and NVML's C2C/P2C are not modelled: no
  sysfs file drives them.)
- DRA (k8s.io/dynamic-resource-allocation/deviceattribute): ``pcieRoot`` is the first path
  component under /sys/devices of ``readlink /sys/bus/pci/devices/<bdf>``, joined lexically.
- hwloc: the objects ``lstopo -v`` draws above a device, by indentation.
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mokkafs.state import State

BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
PIX, PXB, PHB, SYS = "PIX", "PXB", "PHB", "SYS"
ORDER = (PIX, PXB, PHB, SYS)


def gpu_path(sysroot: str, bdf: str) -> str:
    return os.path.realpath(f"{sysroot}/class/pci_bus/{bdf[:7]}/../../{bdf}".lower())


def nic_path(sysroot: str, ibdev: str) -> str:
    path = list(os.path.realpath(f"{sysroot}/class/infiniband/{ibdev}/device"))
    path[-1] = "0"  # multi-port NICs merge onto function 0
    path[-3] = path[-4] = "0"  # NCCL_IB_MERGE_VFS: and VFs onto device 00
    return "".join(path)


def ancestors(path: str) -> list[str]:
    """The nodes above a device, nearest first: PCI nodes by bus id, then ``cpu<numa>``."""
    out: list[str] = []
    while True:
        parts = path.split("/")
        first, second = parts[-2], parts[-3]
        if not BDF.match(first) or not BDF.match(second):
            with open(f"{path}/numa_node") as f:
                out.append(f"cpu{int(f.read())}")
            return out
        out.append(second)
        path = "/".join(parts[:-2])


def path_type(a: list[str], b: list[str]) -> str:
    """NCCL's path type between two devices given their ancestors."""
    for i, node in enumerate(a):
        if node in b:
            j = b.index(node)
            if node.startswith("cpu"):
                return PHB
            return PIX if i == 0 and j == 0 else PXB
    return SYS


def nccl(sysroot: str, gpu_bdf: str, ibdev: str) -> str:
    return path_type(ancestors(gpu_path(sysroot, gpu_bdf)), ancestors(nic_path(sysroot, ibdev)))


def pcie_root(sysroot: str, bdf: str) -> str:
    target = os.readlink(f"{sysroot}/bus/pci/devices/{bdf}")
    path = posixpath.normpath(posixpath.join("/sys/bus/pci/devices", target))
    if not path.startswith("/sys/devices/pci") or posixpath.basename(path) != bdf:
        raise ValueError(f"{bdf}: {target} is not below /sys/devices/pci*")
    return path.split("/")[3]


def partners(state: State) -> dict[str, list[str]]:
    """Each GPU's NICs by the State: the HCAs on the same PCIe switch (one upstream port)."""
    def switch(bdf: str) -> str | None:
        parent = state.function(bdf).parent
        return state.function(parent).parent if parent else None

    return {gpu.bdf: [h.name for h in state.hcas if switch(h.bdf) == switch(gpu.bdf)
                      and switch(gpu.bdf) is not None] for gpu in state.gpus()}


def hwloc_ancestors(lines: list[str], needle: str) -> list[str]:
    """The objects above the line containing ``needle`` in ``lstopo -v``, nearest first."""
    idx = next(i for i, line in enumerate(lines) if needle in line)
    depth = len(lines[idx]) - len(lines[idx].lstrip())
    out = []
    for line in reversed(lines[:idx]):
        indent = len(line) - len(line.lstrip())
        if indent < depth:
            out.append(line.strip())
            depth = indent
    return out


def check_hwloc(lines: list[str], state: State) -> None:
    for gpu, nics in partners(state).items():
        assert nics, gpu
        above_gpu = hwloc_ancestors(lines, f"busid={gpu} ")
        for nic in nics:
            above_nic = hwloc_ancestors(lines, f'"{nic}"')
            common = next(a for a in above_gpu if a in above_nic)
            assert common.startswith("PCIBridge") and "id=1000:c030" in common, common


if __name__ == "__main__":
    root, what, *args = sys.argv[1:]
    if what == "nccl":  # nccl GPU_BDF IBDEV...: one path type per NIC
        print(" ".join(nccl(root, args[0], dev) for dev in args[1:]))
    elif what == "dra":  # dra BDF...: one pcieRoot per device
        print(" ".join(pcie_root(root, bdf) for bdf in args))
    else:
        sys.exit(f"unknown reader {what}")
