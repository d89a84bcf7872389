"""Surfaces: one module per simulated kernel surface, each a pure function of a State.

``SURFACES`` lists them in order; ``build_tree`` assembles the nodes of the surfaces it is given
into one Tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from mokkafs.state import State
from mokkafs.surfaces import (
    dmi,
    host_sysfs,
    infiniband,
    iommu,
    modules,
    pci,
    pci_bus,
    proc_devices,
    proc_driver_nvidia,
    rdma_cm,
)
from mokkafs.tree.build import Tree, build
from mokkafs.tree.nodes import Node

Surface = Callable[[State], Iterator[Node]]

SURFACES: tuple[tuple[str, Surface], ...] = (
    ("host_sysfs", host_sysfs.nodes),
    ("pci", pci.nodes),
    ("pci_bus", pci_bus.nodes),
    ("iommu", iommu.nodes),
    ("infiniband", infiniband.nodes),
    ("rdma_cm", rdma_cm.nodes),
    ("dmi", dmi.nodes),
    ("modules", modules.nodes),
    ("proc_devices", proc_devices.nodes),
    ("proc_driver_nvidia", proc_driver_nvidia.nodes),
)


def build_tree(state: State, previous: Tree | None = None,
               surfaces: Sequence[tuple[str, Surface]] = SURFACES,
               ) -> tuple[Tree, dict[str, int]]:
    """The Tree of a State, and how many nodes each surface described. Entries equal to
    ``previous``'s keep their mtime. Raises ``TreeError`` when two surfaces collide."""
    counts: dict[str, int] = {}
    nodes: list[Node] = []
    for name, surface in surfaces:
        before = len(nodes)
        nodes.extend(surface(state))
        counts[name] = len(nodes) - before
    tree = build(nodes, state.generation, int(state.loaded_at * 1e9), previous)
    _ = tree.dynamic_parents  # computed here, off the FUSE loop (builds run in worker threads)
    return tree, counts
