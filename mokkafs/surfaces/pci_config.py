"""Binary PCI configuration space of a simulated function, consistent with its text attributes.

4096 bytes (a PCIe function's full extended space): a type-0 header with the ids, class, BARs,
interrupt line and pin, and one PCI Express capability (v2, endpoint) at 0x40 whose link
capability/status carry the function's generation and width, so ``lspci -vvv`` decodes
``LnkCap``/``LnkSta`` and hwloc computes link bandwidth from it. No extended capabilities.
"""

from __future__ import annotations

import struct

from mokkafs.state import Bar, PciFunction

CONFIG_SIZE = 4096
PCIE_CAP = 0x40

# Kernel resource flags (include/linux/ioport.h) and the BAR type bits they carry.
IORESOURCE_MEM = 0x0000_0200
IORESOURCE_PREFETCH = 0x0000_2000
IORESOURCE_SIZEALIGN = 0x0004_0000
IORESOURCE_MEM_64 = 0x0010_0000
BAR_MEM_64 = 0x4
BAR_PREFETCH = 0x8
RESOURCE_LINES = 13  # 6 BARs, the ROM, 6 SR-IOV BARs


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
    """The ``resource`` attribute: start, end and flags of every resource, one line each."""
    rows = [(0, 0, 0)] * RESOURCE_LINES
    for bar in fn.bars:
        rows[bar.index] = (bar.address, bar.address + bar.size - 1, resource_flags(bar))
    return "".join(f"0x{a:016x} 0x{b:016x} 0x{c:016x}\n" for a, b, c in rows).encode()


def config_space(fn: PciFunction) -> bytes:
    buf = bytearray(CONFIG_SIZE)
    command = 0x0406  # memory space, bus master, INTx disabled (MSI-X in use)
    status = 0x0010  # capabilities list present
    struct.pack_into("<HHHH", buf, 0x00, fn.vendor, fn.device, command, status)
    struct.pack_into("<I", buf, 0x08, (fn.class_code << 8) | fn.revision)
    buf[0x0E] = 0x00  # header type 0, single function
    for bar in fn.bars:
        offset = 0x10 + 4 * bar.index
        low = (bar.address & 0xFFFF_FFF0) | bar_type_bits(bar)
        struct.pack_into("<I", buf, offset, low)
        if bar.is_64bit:
            struct.pack_into("<I", buf, offset + 4, bar.address >> 32)
    struct.pack_into("<HH", buf, 0x2C, fn.subsystem_vendor, fn.subsystem_device)
    buf[0x34] = PCIE_CAP
    buf[0x3C] = fn.irq & 0xFF
    buf[0x3D] = 0x01  # INTA#
    link = fn.link
    cap = PCIE_CAP
    buf[cap] = 0x10  # PCI Express capability id
    buf[cap + 1] = 0x00  # last capability
    struct.pack_into("<H", buf, cap + 0x02, 0x0002)  # version 2, endpoint
    struct.pack_into("<I", buf, cap + 0x04, 0x0000_8001)  # DevCap: MPS 256, role-based errors
    struct.pack_into("<H", buf, cap + 0x08, 0x2020)  # DevCtl: MPS 256, MRRS 512
    struct.pack_into("<I", buf, cap + 0x0C, link.max_gen | (link.max_width << 4))  # LnkCap
    struct.pack_into("<H", buf, cap + 0x10, 0x0040)  # LnkCtl: common clock
    struct.pack_into("<H", buf, cap + 0x12, link.current_gen | (link.current_width << 4) | 0x1000)
    struct.pack_into("<I", buf, cap + 0x2C, ((1 << link.max_gen) - 1) << 1)  # LnkCap2 speeds
    struct.pack_into("<H", buf, cap + 0x30, link.max_gen)  # LnkCtl2: target speed
    return bytes(buf)
