"""Surfaces: one module per simulated kernel surface, each a pure function of a State.

``describe`` lists every node of the view in a fixed order; the tree builder assembles them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mokkafs.state import State
from mokkafs.surfaces import host_sysfs, infiniband, pci, proc_devices
from mokkafs.tree.nodes import Node

Surface = Callable[[State], Iterator[Node]]

SURFACES: tuple[tuple[str, Surface], ...] = (
    ("host_sysfs", host_sysfs.nodes),
    ("pci", pci.nodes),
    ("infiniband", infiniband.nodes),
    ("proc_devices", proc_devices.nodes),
)


def describe(state: State) -> Iterator[Node]:
    for _, surface in SURFACES:
        yield from surface(state)
