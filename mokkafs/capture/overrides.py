"""Which functions the sections a capture wrote make as they were captured, and what to keep
where they do not (``mokkafs.capture.layout``). A made function at another place (another
root complex, other bridges above it), on another NUMA node, or none at all cannot be
reproduced. One at its place whose attributes' text or config space differ (a real node's
capability lists, BAR addresses, IRQs) is reproduced by an override: a ``pci_functions``
entry with ``overrides: true`` that keeps the captured ones verbatim
(``mokkafs.profile.raw_override``). Only what differs is kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mokkafs.capture import kept
from mokkafs.capture.pci import SKIP, Function
from mokkafs.state import PciFunction, State
from mokkafs.surfaces import SURFACES
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


@dataclass
class Made:
    """What the view serves in one function's directory: every static, readable file, as a
    capture of the view would read it, and the names surfaces other than PCI's serve there
    (a PF's ``sriov_*``), which an override leaves to them."""

    files: dict[str, bytes] = field(default_factory=dict)
    others: set[str] = field(default_factory=set)


def made_files(state: State) -> dict[str, Made]:
    """Directory of each function -> what the view serves there."""
    out = {fn.path: Made() for fn in state.functions}
    for surface in SURFACES:
        for node in surface.nodes(state, surface.cache()):
            made = out.get(node.directory)
            if made is None or not isinstance(node, File):
                continue
            if not node.error and isinstance(node.content, bytes):
                made.files[node.name] = node.content
            if surface.name != "pci":
                made.others.add(node.name)
    return out


def differs(made_here: Made, fn: Function, group: int | None) -> bool:
    """Whether the made function's files, or ``group`` (the IOMMU group the view puts it in,
    if any), differ from what was captured of it."""
    if fn.iommu_group is not None and group != fn.iommu_group:
        return True
    files = made_here.files
    made = {k: v for k, v in files.items() if not SKIP.match(k)}
    captured = {k: v.encode() for k, v in fn.attributes.items()}
    if made != captured:
        return True
    config = files.get("config", b"")
    if fn.config != config[:len(fn.config)] or len(fn.config) > len(config):
        return True
    return bool(fn.vpd) and fn.vpd != files.get("vpd", b"")


def override(fn: Function, made_here: Made) -> dict[str, Any]:
    """The ``pci_functions`` entry that keeps a made function's captured attributes and
    IOMMU group: its place and driver are the sections'; what other surfaces serve is
    theirs."""
    entry = kept.entry(fn)
    entry["attributes"] = {k: v for k, v in entry["attributes"].items()
                           if k not in made_here.others}
    entry.pop("driver", None)
    entry["overrides"] = True
    return entry
