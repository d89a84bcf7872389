"""A function's PCIe link as sysfs shows it: the link attributes (drivers/pci/pci-sysfs.c), and
for a function whose config space a capture kept (``mokkafs.profile.raw_override``), that
config space with what faults and writes change patched in: the PCI Express capability's
Link Status, and the SR-IOV capability's NumVFs and VF Enable."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from mokkafs.model.pci import LINK_SPEEDS
from mokkafs.state import PciFunction
from mokkafs.surfaces.sriov import SRIOV_ID, VF_ENABLE, VF_MSE
from mokkafs.tree.nodes import Node, text

LOST_WIDTH = 63  # current/max_link_width of a function whose config reads all ones
NAMES = ("current_link_speed", "current_link_width", "max_link_width", "max_link_speed")
PCIE_ID = 0x10  # the PCI Express capability
CAPABILITIES = 0x34  # the capabilities pointer; bit 4 of Status says there is a list
EXTENDED = 0x100  # the first extended capability


def attributes(d: str, fn: PciFunction) -> Iterator[Node]:
    if fn.lost:  # the link registers read all ones: speed 0xf, width 0x3f
        yield text(f"{d}/current_link_speed", "Unknown")
        yield text(f"{d}/current_link_width", LOST_WIDTH)
        yield text(f"{d}/max_link_width", LOST_WIDTH)
    else:
        yield text(f"{d}/current_link_speed", LINK_SPEEDS[fn.link.current_gen])
        yield text(f"{d}/current_link_width", fn.link.current_width)
        yield text(f"{d}/max_link_width", fn.link.max_width)
    # kernels since 6.13 keep the supported speeds they read at probe time
    yield text(f"{d}/max_link_speed", LINK_SPEEDS[fn.link.max_gen])


def _pcie(config: bytes) -> int | None:
    """The offset of the PCI Express capability in ``config``, if it shows one."""
    if len(config) < 0x40 or not struct.unpack_from("<H", config, 0x06)[0] & 0x10:
        return None
    at, seen = config[CAPABILITIES] & 0xFC, set()
    while at >= 0x40 and at + 0x14 <= len(config) and at not in seen:
        seen.add(at)
        if config[at] == PCIE_ID:
            return at
        at = config[at + 1] & 0xFC
    return None


def _sriov(config: bytes) -> int | None:
    """The offset of the SR-IOV extended capability in ``config``, if it shows one."""
    at, seen = EXTENDED, set()
    while at >= EXTENDED and at + 0x14 <= len(config) and at not in seen:
        seen.add(at)
        header = struct.unpack_from("<I", config, at)[0]
        if header & 0xFFFF == SRIOV_ID:
            return at
        at = header >> 20 & 0xFFC
    return None


def patched(config: bytes, fn: PciFunction) -> bytes:
    """``config`` with the function's current link and its VFs' count: equal to ``config``
    where the State says what it said at the capture."""
    buf = bytearray(config)
    pcie = _pcie(config)
    if pcie is not None:
        status = struct.unpack_from("<H", buf, pcie + 0x12)[0] & ~0x3FF
        struct.pack_into("<H", buf, pcie + 0x12,
                         status | fn.link.current_gen | fn.link.current_width << 4)
    sriov = _sriov(config) if fn.sriov is not None else None
    if sriov is not None and fn.sriov is not None:
        control = struct.unpack_from("<H", buf, sriov + 0x08)[0] & ~(VF_ENABLE | VF_MSE)
        struct.pack_into("<H", buf, sriov + 0x08,
                         control | (VF_ENABLE | VF_MSE if fn.sriov.numvfs else 0))
        struct.pack_into("<H", buf, sriov + 0x10, fn.sriov.numvfs)
    return bytes(buf)
