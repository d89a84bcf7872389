"""A PCI function a capture kept (``mokkafs.profile.raw_pci``): its attributes and config
space as they were on the captured node, with the modes the kernel gives them
(drivers/pci/pci-sysfs.c), and the links every function has."""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.model.sysfs import (
    BUS_PCI,
    BUS_PCI_DRIVERS,
    FUNCTION_STORES,
    REMOVE,
    RESCAN,
    RESET,
    StoreKey,
)
from mokkafs.state import PciFunction, State
from mokkafs.surfaces import pci_link, power
from mokkafs.tree.nodes import Dir, File, Node, relative_link, write_only

# The kernel's writable attributes (others are 0444)
MODES = {"numa_node": 0o644, "enable": 0o644, "driver_override": 0o644, "msi_bus": 0o644,
         "broken_parity_status": 0o644, "d3cold_allowed": 0o644, "uevent": 0o644,
         "reset_method": 0o644, "sriov_numvfs": 0o664, "sriov_drivers_autoprobe": 0o644}


def function(fn: PciFunction, state: State, rebound: bytes | None = None) -> Iterator[Node]:
    """``rebound``: a made function's own ``uevent``, once a write changed its driver."""
    d = fn.path
    yield Dir(d)
    # A made function whose attributes a capture kept (mokkafs.profile.raw_override): what
    # writes (mokkafs.writes.drivers) and faults change is the State's: its override, its
    # link, and those registers of its config space.
    names = {name for name, _ in fn.raw or ()}
    made = fn.kind != "other"
    own = {"driver_override", *pci_link.NAMES} & names if made else set()
    if rebound is not None and "uevent" in names:
        own.add("uevent")
        yield File(f"{d}/uevent", rebound, 0o644)
    for name, data in fn.raw or ():  # (the writable ones, as captured: writes still reach them)
        if name not in own:
            yield File(f"{d}/{name}", data, MODES.get(name, 0o444),
                       store=StoreKey(fn.bdf, name) if name in FUNCTION_STORES else None)
    if "driver_override" in own:
        yield driver_override(d, fn)
    if own & set(pci_link.NAMES):
        yield from pci_link.attributes(d, fn)
    config = pci_link.patched(fn.config, fn) if made else fn.config
    # fallen off the bus (a fault): every config read completes with all ones
    yield File(f"{d}/config", b"\xff" * len(config) if fn.lost else config, 0o644)
    if fn.vpd:
        yield File(f"{d}/vpd", fn.vpd, 0o600)
    yield write_only(f"{d}/{REMOVE}", 0o220, StoreKey(fn.bdf, REMOVE))
    yield write_only(f"{d}/{RESCAN}", store=StoreKey(fn.bdf, RESCAN))
    if made:  # as the made function has it; a capture cannot read it (write-only)
        yield write_only(f"{d}/{RESET}")
    yield from power.of_pci_function(d, state)
    if fn.driver:
        yield relative_link(f"{d}/driver", f"{BUS_PCI_DRIVERS}/{fn.driver}")
    yield relative_link(f"{d}/subsystem", BUS_PCI)


def driver_override(d: str, fn: PciFunction) -> File:
    """The override as written: bytes, kept as latin-1 text (one character a byte), so
    ``printf '\\377'`` reads back as the one byte it wrote."""
    return File(f"{d}/driver_override", f"{fn.driver_override or '(null)'}\n".encode("latin-1"),
                0o644, store=StoreKey(fn.bdf, "driver_override"))
