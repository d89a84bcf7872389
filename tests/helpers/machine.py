"""Readers of the machine's shape written to its consumers' published logic (our own code):

- ``cadvisor_nodes``: google/cadvisor ``utils/sysinfo/sysinfo.go`` ``GetNodesInfo`` with
  ``utils/sysfs/sysfs.go``: ``node*[0-9]`` under devices/system/node, ``cpu*[0-9]`` under
  each, each CPU's ``topology/{core_id,physical_package_id}`` and ``cache/index*``, the node's
  ``meminfo`` MemTotal and ``distance``.
- ``numa_info``: kubernetes ``pkg/kubelet/cm/topologymanager/numa_info.go`` ``NewNUMAInfo``:
  the nodes cadvisor found with their distance rows, one entry per online node.
- ``pcie_root_by_cpu``: k8s.io/dynamic-resource-allocation ``deviceattribute/pci_linux.go``
  ``GetPCIeRootAttributeMapFromCPUId``: every PCI function's ``local_cpulist``, each CPU of
  which must be in the machine's CPU set, mapped to the function's pcieRoot.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

NODE_DIR = re.compile(r"^node\d+$")
CPU_DIR = re.compile(r"^cpu\d+$")
MEMTOTAL = re.compile(r"Node \d+ MemTotal:\s+(\d+) kB")


def parse_list(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


@dataclass
class CadvisorNode:
    id: int
    memory_kib: int
    cpus: dict[int, tuple[int, int]]  # cpu -> (package, core)
    caches: set[tuple[int, str, str]]  # (level, type, size)
    distances: list[int]


def cadvisor_nodes(sysfs: Path) -> list[CadvisorNode]:
    base = sysfs / "devices/system/node"
    out = []
    for name in sorted((n for n in os.listdir(base) if NODE_DIR.match(n)),
                       key=lambda n: int(n[4:])):
        d = base / name
        cpus: dict[int, tuple[int, int]] = {}
        caches: set[tuple[int, str, str]] = set()
        for cpu in (c for c in os.listdir(d) if CPU_DIR.match(c)):
            topo = d / cpu / "topology"  # through the node's cpuN link, as cadvisor reads
            cpus[int(cpu[3:])] = (int((topo / "physical_package_id").read_text()),
                                  int((topo / "core_id").read_text()))
            cache = d / cpu / "cache"
            for index in (i for i in os.listdir(cache) if i.startswith("index")):
                caches.add((int((cache / index / "level").read_text()),
                            (cache / index / "type").read_text().strip(),
                            (cache / index / "size").read_text().strip()))
        found = MEMTOTAL.search((d / "meminfo").read_text())
        assert found, f"{d}/meminfo has no MemTotal"
        distances = [int(x) for x in (d / "distance").read_text().split()]
        out.append(CadvisorNode(int(name[4:]), int(found.group(1)), cpus, caches, distances))
    return out


def numa_info(sysfs: Path) -> dict[int, dict[int, int]]:
    """Node id -> (node id -> distance), as NewNUMAInfo builds NUMADistances: the distance
    row lists the online nodes in order."""
    nodes = cadvisor_nodes(sysfs)
    ids = [n.id for n in nodes]
    online = sorted(parse_list((sysfs / "devices/system/node/online").read_text()))
    assert ids == online, (ids, online)
    out = {}
    for node in nodes:
        if len(node.distances) != len(ids):
            raise ValueError(f"node{node.id}/distance has {len(node.distances)} entries for "
                             f"{len(ids)} nodes")
        out[node.id] = dict(zip(ids, node.distances, strict=True))
    return out


def pcie_root_by_cpu(sysfs: Path) -> dict[int, set[str]]:
    cpus = parse_list((sysfs / "devices/system/cpu/online").read_text())
    devices = sysfs / "bus/pci/devices"
    out: dict[int, set[str]] = {}
    for bdf in sorted(os.listdir(devices)):
        target = os.readlink(devices / bdf)
        root = next(p for p in target.split("/") if p.startswith("pci"))
        for cpu in parse_list((devices / bdf / "local_cpulist").read_text()):
            if cpu not in cpus:
                raise ValueError(f"CPU ID {cpu} from local_cpulist of {bdf} is not in the "
                                 "CPU ID set")
            out.setdefault(cpu, set()).add(root)
    return out
