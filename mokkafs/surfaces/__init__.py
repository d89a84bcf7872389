"""Surfaces: one module per simulated kernel surface, each a pure function of a State.

``SURFACES`` lists them in order; ``mokkafs.swap.build_tree`` assembles their nodes.
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

