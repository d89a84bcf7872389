"""sysfs's words, as the kernel spells them: where PCI lives, and the attributes that are
written but never read. One spelling for every layer that names them: the surfaces that serve
them, the writes that take them, the capture that reads a machine's.

A write-only attribute (one with a store method and no show method, drivers/pci/pci-sysfs.c)
has mode 0200 (``remove``: 0220) and fails to open for reading with EACCES, even for root.

A file whose writes the view simulates carries a ``StoreKey``, made by the surface that serves
it: the FUSE edge forwards it with what is written and never looks inside; the writes
(``mokkafs.writes.stores``) look the store up by it.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

SYS_DEVICES = "sys/devices"
HOST_BRIDGES = f"{SYS_DEVICES}/pci"  # + DDDD:BB, the root of a PCI hierarchy (pciDDDD:BB)
BUS_PCI = "sys/bus/pci"
BUS_PCI_DEVICES = f"{BUS_PCI}/devices"  # a link per function, named by its address
BUS_PCI_DRIVERS = f"{BUS_PCI}/drivers"  # a directory per PCI driver loaded
PCI_BUS = "pci_bus"  # in a host bridge's and a bridge's directory: their buses, as dddd:bb
PCI_BUS_CLASS = f"sys/class/{PCI_BUS}"  # a link to each bus

WRITE_ONLY = 0o200
UNREADABLE = errno.EACCES  # what a read of a write-only attribute fails with

REMOVE, RESCAN, RESET = "remove", "rescan", "reset"
# A function's write-only attributes (``remove`` is group-writable too: 0220), a PCI
# driver's (in ``bus/pci/drivers/<name>``) and the bus's
FUNCTION_WRITE_ONLY = (REMOVE, RESCAN, RESET)
DRIVER_WRITE_ONLY = ("bind", "unbind", "new_id", "remove_id", "uevent")
BUS_WRITE_ONLY = ("drivers_probe", RESCAN, "uevent")
# The files of those, and of a function's attributes, with a store the view simulates: the
# surfaces that serve them give them a ``StoreKey`` (a kept function's captured files too)
FUNCTION_STORES = ("sriov_numvfs", "sriov_drivers_autoprobe", "driver_override", REMOVE, RESCAN)
DRIVER_STORES = ("bind", "unbind", "new_id", "remove_id")
BUS_STORES = ("drivers_probe", RESCAN)


@dataclass(frozen=True, slots=True)
class StoreKey:
    """Which store a write goes to: ``name``, the attribute's (its file's name), and
    ``holder``, what holds it (its directory's name): a PCI function's address, a driver's
    name, a bus's ``dddd:bb``, or ``pci`` for the bus type."""

    holder: str
    name: str
