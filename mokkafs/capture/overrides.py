"""Which functions the sections a capture wrote make as they were captured, and what to keep
where they do not (``mokkafs.capture.layout``). A made function at another place (another
root complex, other bridges above it), on another NUMA node, or none at all cannot be
reproduced. One at its place whose attributes' text or config space differ (a real node's
capability lists, BAR addresses, IRQs) is reproduced by an override: a ``pci_functions``
entry with ``overrides: true`` that keeps the captured ones verbatim
(``mokkafs.profile.raw_override``). Only what differs is kept."""

from __future__ import annotations

from typing import Any

from mokkafs.capture import kept
from mokkafs.capture.pci import SKIP, Function
from mokkafs.state import PciFunction, State
from mokkafs.surfaces import pci
from mokkafs.tree.nodes import File


def unplaced(made: PciFunction, fn: Function | None) -> str | None:
    """Why the sections do not reproduce the captured function's place, or None."""
    if fn is None:
        return "mokkafs would add it"
    if made.path.split("/")[2:] != [fn.root, *fn.chain, fn.bdf]:
        return "another place"
    if made.numa_node != fn.number("numa_node", -1):
        return "another NUMA node"
    return None


def made_files(state: State) -> dict[str, dict[str, bytes]]:
    """Directory -> name -> bytes of every static, readable file the PCI surface makes in a
    function's directory, as a capture of the view would read them."""
    dirs = {fn.path for fn in state.functions}
    out: dict[str, dict[str, bytes]] = {d: {} for d in dirs}
    for node in pci.nodes(state):
        if isinstance(node, File) and node.directory in dirs and not node.error \
                and isinstance(node.content, bytes):
            out[node.directory][node.name] = node.content
    return out


def differs(files: dict[str, bytes], fn: Function) -> bool:
    """Whether the made function's files differ from what was captured of it."""
    made = {k: v for k, v in files.items() if not SKIP.match(k)}
    captured = {k: v.encode() for k, v in fn.attributes.items()}
    if made != captured:
        return True
    config = files.get("config", b"")
    if fn.config != config[:len(fn.config)] or len(fn.config) > len(config):
        return True
    return bool(fn.vpd) and fn.vpd != files.get("vpd", b"")


def override(fn: Function) -> dict[str, Any]:
    """The ``pci_functions`` entry that keeps a made function's captured attributes: its
    place, driver and IOMMU group are the sections'."""
    entry = kept.entry(fn)
    entry.pop("driver", None)
    entry.pop("iommu_group", None)
    entry["overrides"] = True
    return entry
