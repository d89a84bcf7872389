"""Surfaces: one module per simulated kernel surface, each a pure function of a State.

``SURFACES`` lists them in order; ``build_tree`` assembles the nodes of the surfaces it is given
into one Tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from mokkafs.state import State
from mokkafs.surfaces import (
    cpu,
    dmi,
    host_sysfs,
    infiniband,
    iommu,
    modules,
    net,
    numa,
    nvidia_dev,
    nvswitch_proc,
    pci,
    pci_bus,
    proc_cpu_mem,
    proc_devices,
    proc_driver_nvidia,
    rdma_cm,
    sriov,
)
from mokkafs.tree.build import Part, Tree, build, patch
from mokkafs.tree.nodes import Node

Surface = Callable[[State], Iterator[Node]]

SURFACES: tuple[tuple[str, Surface], ...] = (
    ("host_sysfs", host_sysfs.nodes),
    ("pci", pci.nodes),
    ("pci_bus", pci_bus.nodes),
    ("iommu", iommu.nodes),
    ("infiniband", infiniband.nodes),
    ("rdma_cm", rdma_cm.nodes),
    ("nvidia_dev", nvidia_dev.nodes),
    ("dmi", dmi.nodes),
    ("modules", modules.nodes),
    ("proc_devices", proc_devices.nodes),
    ("proc_driver_nvidia", proc_driver_nvidia.nodes),
    ("nvswitch_proc", nvswitch_proc.nodes),
    ("cpu", cpu.nodes),
    ("numa", numa.nodes),
    ("proc_cpu_mem", proc_cpu_mem.nodes),
    ("sriov", sriov.nodes),
    ("net", net.nodes),
)


# The State fields each surface reads (methods count as the fields they read): a surface
# whose inputs are equal to the last build's is not computed again, and when only content
# changed the last tree is patched rather than built again. tests/unit/test_surface_inputs.py
# proves each list complete.
INPUTS: dict[str, tuple[str, ...]] = {
    "host_sysfs": ("host",),
    "pci": ("functions", "roots", "nr_cpus", "started_at", "counter_quantum", "pci_drivers"),
    "pci_bus": ("functions", "roots", "nr_cpus"),
    "iommu": ("functions", "iommu"),
    "infiniband": ("hcas", "functions", "char_majors", "started_at", "counter_quantum",
                   "rdma_loaded"),
    "rdma_cm": ("rdma_loaded",),
    "nvidia_dev": ("functions", "char_majors", "pci_drivers"),
    "dmi": ("platform",),
    "modules": ("driver", "pci_drivers", "rdma_loaded", "host"),
    "proc_devices": ("host", "char_majors"),
    "proc_driver_nvidia": ("functions", "driver", "platform", "pci_drivers"),
    "nvswitch_proc": ("functions", "pci_drivers"),
    "cpu": ("machine", "host"),
    "numa": ("machine",),
    "proc_cpu_mem": ("machine", "platform"),
    "sriov": ("functions",),
    "net": ("functions", "hcas", "host"),
}


def build_tree(state: State, previous: Tree | None = None,
               surfaces: Sequence[tuple[str, Surface]] = SURFACES,
               ) -> tuple[Tree, dict[str, int]]:
    """The Tree of a State, and how many nodes each surface described. With ``previous``,
    surfaces whose inputs did not change are not computed again, and a swap that changes no
    path patches it; entries equal to ``previous``'s keep their mtime. Raises ``TreeError``
    when two surfaces collide."""
    parts: dict[str, Part] = {}
    changes: list[tuple[tuple[Node, ...], tuple[Node, ...]]] = []
    for name, surface in surfaces:
        fields = INPUTS.get(name)
        key = tuple(getattr(state, f) for f in fields) if fields is not None else None
        old = previous.parts.get(name) if previous is not None else None
        if key is not None and old is not None and old[0] == key:
            parts[name] = old
            continue
        parts[name] = (key, tuple(surface(state)))
        if old is not None:
            changes.append((old[1], parts[name][1]))
    counts = {name: len(part[1]) for name, part in parts.items()}
    mtime = int(state.loaded_at * 1e9)
    tree = None
    if previous is not None and previous.parts.keys() == parts.keys():
        tree = patch(previous, changes, state.generation, mtime, parts)
    if tree is None:
        nodes = [node for part in parts.values() for node in part[1]]
        tree = build(nodes, state.generation, mtime, previous, parts)
    _ = tree.triggers, tree.unit_files  # computed here, off the FUSE loop (in a thread)
    return tree, counts
