"""SR-IOV sysfs (drivers/pci/iov.c): a PF's ``sriov_*`` attributes and ``virtfn<i>`` links, a
VF's ``physfn`` link, and the SR-IOV extended capability of a PF's config space.

Modes as the kernel has them: ``sriov_numvfs`` and ``sriov_drivers_autoprobe`` 0664, the others
0444; those two carry their store's key (``StoreKey``: the PF, the attribute). The VFs
themselves are PCI functions of the State (``mokkafs.model.sriov``), so the pci and iommu
surfaces serve them as any other function.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from mokkafs.model.sriov import vf_bar_base, vf_bdf
from mokkafs.model.sysfs import StoreKey
from mokkafs.state import PciFunction, Sriov, State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Node, relative_link, text

WRITABLE = 0o664
SRIOV_CAP = 0x100  # the first extended capability
SRIOV_ID = 0x0010
VF_ENABLE, VF_MSE = 0x0001, 0x0008
SYSTEM_PAGE_SIZES = 0x0000_0553  # 4K, 8K, 64K, 256K, 1M, 4M supported
VF_BAR_FLAGS = 0x0C  # 64-bit, prefetchable


def nodes(state: State) -> Iterator[Node]:
    paths = {fn.bdf: fn.path for fn in state.functions}
    for fn in state.functions:
        if fn.sriov is not None:
            yield from _pf(fn, fn.sriov, paths)
        if fn.physfn is not None and fn.physfn in paths:
            yield relative_link(f"{fn.path}/physfn", paths[fn.physfn])


def _pf(fn: PciFunction, cap: Sriov, paths: dict[str, str]) -> Iterator[Node]:
    d = fn.path
    yield text(f"{d}/sriov_totalvfs", cap.total)
    yield text(f"{d}/sriov_numvfs", cap.numvfs, WRITABLE, StoreKey(fn.bdf, "sriov_numvfs"))
    yield text(f"{d}/sriov_offset", cap.offset)
    yield text(f"{d}/sriov_stride", cap.stride)
    yield text(f"{d}/sriov_vf_device", f"{cap.vf_device:x}")
    yield text(f"{d}/sriov_drivers_autoprobe", int(cap.autoprobe), WRITABLE,
               StoreKey(fn.bdf, "sriov_drivers_autoprobe"))
    yield text(f"{d}/sriov_vf_total_msix", cap.total_msix)
    for i in range(cap.numvfs):
        bdf = vf_bdf(fn, i)
        if bdf in paths:
            yield relative_link(f"{d}/virtfn{i}", paths[bdf])


def capability(buf: bytearray, fn: PciFunction) -> None:
    """Write the SR-IOV extended capability (PCIe base spec 9.3.3) at 0x100 of a PF's
    config space: initial and total VFs, NumVFs, offset, stride, VF device ID, and VF Enable
    while it has VFs; ``lspci -vvv`` decodes it."""
    cap = fn.sriov
    if cap is None:
        return
    struct.pack_into("<I", buf, SRIOV_CAP, SRIOV_ID | 1 << 16)  # version 1, the last one
    struct.pack_into("<H", buf, SRIOV_CAP + 0x08, VF_ENABLE | VF_MSE if cap.numvfs else 0)
    struct.pack_into("<HHH", buf, SRIOV_CAP + 0x0C, cap.total, cap.total, cap.numvfs)
    struct.pack_into("<HH", buf, SRIOV_CAP + 0x14, cap.offset, cap.stride)
    struct.pack_into("<H", buf, SRIOV_CAP + 0x1A, cap.vf_device)
    struct.pack_into("<II", buf, SRIOV_CAP + 0x1C, SYSTEM_PAGE_SIZES, 1)
    base = vf_bar_base(fn)
    struct.pack_into("<II", buf, SRIOV_CAP + 0x24, (base & 0xFFFF_FFF0) | VF_BAR_FLAGS,
                     base >> 32)


SURFACE = stateless("sriov", nodes, ("functions",), ())  # in the PCI functions' directories
