"""Binary PCI configuration space of a simulated function, consistent with its text attributes.

4096 bytes (a PCIe function's full extended space): a type-0 header with the ids, class, BARs,
interrupt line and pin (endpoints), or a type-1 header with the primary, secondary and
subordinate buses and the windows the bridge forwards (include/uapi/linux/pci_regs.h); a PCI
Express capability (v2) at 0x40 of the function's port type (endpoint, root port, switch
upstream or downstream port) whose link capability/status carry its generation and width, so
``lspci -vvv`` decodes ``LnkCap``/``LnkSta`` and hwloc computes link bandwidth from it; and on
bridges the subsystem ids' capability at 0x80. Root and downstream ports have a slot and report
data-link-layer-active: present when a function sits in the slot, up when its link is. An
SR-IOV PF has its SR-IOV extended capability (``mokkafs.surfaces.sriov``); no others. A
function that fell off the bus reads all ones.
"""

from __future__ import annotations

import struct

from mokkafs.model import sriov as sriov_regions
from mokkafs.state import Bar, Bridge, PciFunction
from mokkafs.surfaces import sriov

CONFIG_SIZE = 4096
PCIE_CAP = 0x40
SSVID_CAP = 0x80  # bridges: Bridge Subsystem Vendor ID capability, after the PCIe one
VPD_CAP = 0x80  # endpoints with VPD: the Vital Product Data capability, after the PCIe one

# Kernel resource flags (include/linux/ioport.h) and the BAR type bits they carry.
IORESOURCE_MEM = 0x0000_0200
IORESOURCE_PREFETCH = 0x0000_2000
IORESOURCE_SIZEALIGN = 0x0004_0000
IORESOURCE_MEM_64 = 0x0010_0000
BAR_MEM_64 = 0x4
BAR_PREFETCH = 0x8
PREF_RANGE_64 = 0x1  # a bridge's prefetchable window type, kept in its flags like a BAR's bits
RESOURCE_LINES = 13  # 6 BARs, the ROM, 6 SR-IOV BARs
BRIDGE_RESOURCE_LINES = 17  # and the 4 bridge windows (io, memory, prefetchable, spare)
PORT_TYPES = {"root": 4, "upstream": 5, "downstream": 6}  # PCI_EXP_FLAGS_TYPE, endpoint 0
DLL_LINK_ACTIVE_REPORTING = 1 << 20  # LnkCap: root and downstream ports report DLActive
DLL_LINK_ACTIVE = 1 << 13  # LnkSta
SLOT_IMPLEMENTED = 0x0100
PRESENCE_DETECT = 0x0040  # SltSta


def bar_type_bits(bar: Bar) -> int:
    return (BAR_MEM_64 if bar.is_64bit else 0) | (BAR_PREFETCH if bar.prefetchable else 0)


def resource_flags(bar: Bar) -> int:
    flags = IORESOURCE_MEM | IORESOURCE_SIZEALIGN | bar_type_bits(bar)
    if bar.prefetchable:
        flags |= IORESOURCE_PREFETCH
    if bar.is_64bit:
        flags |= IORESOURCE_MEM_64
    return flags


def resource_text(fn: PciFunction) -> bytes:
    """The ``resource`` attribute: start, end and flags of every resource, one line each
    (bridges add their windows, as the kernel prints all of a bridge's resources)."""
    rows = [(0, 0, 0)] * (RESOURCE_LINES if fn.bridge is None else BRIDGE_RESOURCE_LINES)
    iov = sriov_regions.iov_bar(fn)  # a PF's VF BAR region: lines 7-12, the IOV resources
    for bar in (*fn.bars, *([iov] if iov is not None else [])):
        rows[bar.index] = (bar.address, bar.address + bar.size - 1, resource_flags(bar))
    if fn.bridge is not None:
        if fn.bridge.memory:
            rows[14] = (*fn.bridge.memory, IORESOURCE_MEM)
        if fn.bridge.prefetchable:
            rows[15] = (*fn.bridge.prefetchable,
                        IORESOURCE_MEM | IORESOURCE_PREFETCH | IORESOURCE_MEM_64 | PREF_RANGE_64)
    return "".join(f"0x{a:016x} 0x{b:016x} 0x{c:016x}\n" for a, b, c in rows).encode()


def config_space(fn: PciFunction) -> bytes:
    """4096 bytes: a type-0 header (endpoints) or type-1 header (bridges), and one PCI Express
    capability whose link fields match the sysfs link attributes."""
    if fn.lost:  # fallen off the bus: every config read completes with all ones
        return b"\xff" * CONFIG_SIZE
    buf = bytearray(CONFIG_SIZE)
    bridge = fn.bridge
    command = 0x0406 if bridge is None else 0x0407  # memory, bus master (+ I/O for bridges)
    struct.pack_into("<HHHH", buf, 0x00, fn.vendor, fn.device, command, 0x0010)
    struct.pack_into("<I", buf, 0x08, (fn.class_code << 8) | fn.revision)
    buf[0x34] = PCIE_CAP
    buf[0x3C] = fn.irq & 0xFF
    buf[0x3D] = 0x01  # INTA#
    if bridge is None:
        buf[0x0E] = 0x00  # header type 0, single function
        for bar in fn.bars if fn.physfn is None else ():  # a VF's BARs read 0 (SR-IOV 3.4.1.11)
            offset = 0x10 + 4 * bar.index
            struct.pack_into("<I", buf, offset, (bar.address & 0xFFFF_FFF0) | bar_type_bits(bar))
            if bar.is_64bit:
                struct.pack_into("<I", buf, offset + 4, bar.address >> 32)
        struct.pack_into("<HH", buf, 0x2C, fn.subsystem_vendor, fn.subsystem_device)
    else:
        _bridge_header(buf, fn, bridge)
    _pcie_capability(buf, fn, bridge)
    if bridge is not None:  # a bridge's subsystem ids live in a capability of their own
        buf[PCIE_CAP + 1] = SSVID_CAP
        buf[SSVID_CAP] = 0x0D
        struct.pack_into("<HH", buf, SSVID_CAP + 4, fn.subsystem_vendor, fn.subsystem_device)
    elif fn.vpd:  # lspci decodes the sysfs vpd file only where this capability is listed
        buf[PCIE_CAP + 1] = VPD_CAP
        buf[VPD_CAP] = 0x03
    sriov.capability(buf, fn)  # a PF's SR-IOV extended capability, at 0x100
    return bytes(buf)


def _bridge_header(buf: bytearray, fn: PciFunction, bridge: Bridge) -> None:
    buf[0x0E] = 0x01  # header type 1: PCI-to-PCI bridge
    buf[0x18] = int(fn.bdf[5:7], 16)  # primary: the bus the bridge sits on
    buf[0x19] = bridge.secondary
    buf[0x1A] = bridge.subordinate
    buf[0x1C], buf[0x1D] = 0xF0, 0x00  # no I/O window (base above limit)
    if bridge.memory:
        base, limit = bridge.memory
        struct.pack_into("<HH", buf, 0x20, (base >> 16) & 0xFFF0, (limit >> 16) & 0xFFF0)
    else:
        struct.pack_into("<HH", buf, 0x20, 0xFFF0, 0x0000)
    if bridge.prefetchable:
        base, limit = bridge.prefetchable
        struct.pack_into("<HH", buf, 0x24, ((base >> 16) & 0xFFF0) | 1,
                         ((limit >> 16) & 0xFFF0) | 1)  # 64-bit decoding
        struct.pack_into("<II", buf, 0x28, base >> 32, limit >> 32)
    else:
        struct.pack_into("<HH", buf, 0x24, 0xFFF1, 0x0001)
    struct.pack_into("<H", buf, 0x3E, 0x0002)  # bridge control: SERR# forwarded


def _pcie_capability(buf: bytearray, fn: PciFunction, bridge: Bridge | None) -> None:
    link = fn.link
    cap = PCIE_CAP
    port_type = PORT_TYPES[bridge.port] if bridge else 0
    facing = bridge is not None and bridge.port in ("root", "downstream")  # a slot below
    present = facing and bridge is not None and bridge.occupied
    up = present and link.current_width > 0
    buf[cap] = 0x10  # PCI Express capability id
    buf[cap + 1] = 0x00  # last capability
    struct.pack_into("<H", buf, cap + 0x02,
                     0x0002 | port_type << 4 | (SLOT_IMPLEMENTED if facing else 0))
    struct.pack_into("<I", buf, cap + 0x04, 0x0000_8001)  # DevCap: MPS 256, role-based errors
    struct.pack_into("<H", buf, cap + 0x08, 0x2020)  # DevCtl: MPS 256, MRRS 512
    port_number = bridge.port_number if bridge else 0
    struct.pack_into("<I", buf, cap + 0x0C, link.max_gen | link.max_width << 4
                     | (DLL_LINK_ACTIVE_REPORTING if facing else 0) | port_number << 24)
    struct.pack_into("<H", buf, cap + 0x10, 0x0040)  # LnkCtl: common clock
    struct.pack_into("<H", buf, cap + 0x12, link.current_gen | link.current_width << 4 | 0x1000
                     | (DLL_LINK_ACTIVE if up else 0))  # slot clock, link up
    if facing and bridge is not None:
        struct.pack_into("<I", buf, cap + 0x14, (bridge.port_number + 1) << 19)  # SltCap: PSN
        struct.pack_into("<H", buf, cap + 0x1A, PRESENCE_DETECT if present else 0)
    struct.pack_into("<I", buf, cap + 0x2C, ((1 << link.max_gen) - 1) << 1)  # LnkCap2 speeds
    struct.pack_into("<H", buf, cap + 0x30, link.max_gen)  # LnkCtl2: target speed
