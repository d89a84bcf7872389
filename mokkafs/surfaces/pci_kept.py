"""A PCI function a capture kept (``mokkafs.profile.raw_pci``, ``raw_override``): the made
function (``mokkafs.surfaces.pci``) with the captured bytes laid over it.

- A captured attribute takes the place of the made one of its name: its bytes, the made
  node's mode. A captured attribute the made function lacks is added, with the kernel's mode
  (drivers/pci/pci-sysfs.c).
- A made attribute the capture lacks is not served: the captured node had none. What a
  capture cannot read stays: ``config``, ``vpd``, the write-only ``remove`` and ``rescan``,
  and ``reset`` on a function the sections make (a kept one's is not known).
- What writes and faults change is the State's, as on a made function: ``driver_override``;
  ``uevent`` once a write rebound the function; on a function the sections make, its link
  attributes and those registers of its config space (``pci_link.patched``).
- A function that fell off the bus (a fault) reads all ones for its captured config space.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from mokkafs.model.sysfs import FUNCTION_STORES, RESET, StoreKey
from mokkafs.state import PciFunction
from mokkafs.surfaces import pci_link
from mokkafs.tree.nodes import File, Node

# The kernel's modes of writable attributes the made function lacks (others are 0444)
MODES = {"reset_method": 0o644, "sriov_numvfs": 0o664, "sriov_drivers_autoprobe": 0o644}
UNCAPTURED = ("config", "vpd")  # binary: a capture keeps them apart from the attributes


def _live(fn: PciFunction) -> frozenset[str]:
    """The attributes whose content is the State's even where the capture kept them."""
    names = {"driver_override"}
    if fn.native_driver is not None:  # a write rebound it: the driver the State binds
        names.add("uevent")
    if fn.kind != "other":  # the sections' link, which faults change
        names.update(pci_link.NAMES)
    return frozenset(names)


def _config(fn: PciFunction) -> bytes:
    config = pci_link.patched(fn.config, fn) if fn.kind != "other" else fn.config
    return b"\xff" * len(config) if fn.lost else config


def _stays(fn: PciFunction, node: File) -> bool:
    """Whether a made file the capture lacks stays: one a capture cannot read."""
    if node.name == RESET:
        return fn.kind != "other"
    return bool(node.error) or node.name in UNCAPTURED


def _holding(node: File, data: bytes) -> File:
    """The made node, every field as made (its mode, what its writes reach), with ``data``."""
    return replace(node, path=node.path, content=data)


def laid_over(fn: PciFunction, made: Iterable[Node]) -> Iterator[Node]:
    """``made`` (the made function's nodes) with ``fn.raw`` laid over them."""
    d = fn.path
    captured = dict(fn.raw or ())
    own = _live(fn)
    for node in made:
        if not isinstance(node, File) or node.directory != d:
            yield node  # its links and its power/ directory
            continue
        data = captured.pop(node.name, None)  # (a profile gives none of the names below)
        if node.name == "config":
            yield _holding(node, _config(fn))
        elif data is not None and not node.error:
            yield node if node.name in own else _holding(node, data)
        elif _stays(fn, node):
            yield node
    for name, data in captured.items():  # what the made function lacks
        yield File(f"{d}/{name}", data, MODES.get(name, 0o444),
                   store=StoreKey(fn.bdf, name) if name in FUNCTION_STORES else None)
