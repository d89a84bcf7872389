"""IOMMU groups (drivers/iommu/iommu.c): with the IOMMU on, every function is in a group,
``sys/kernel/iommu_groups/N/devices/<bdf>`` links to it and its ``iommu_group`` links back.
Each function has a group of its own, as behind switches with ACS."""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, Node, relative_link, text
from mokkafs.tree.roots import kernel

GROUPS = "sys/kernel/iommu_groups"
# The interrupt range every x86 group reserves (IOMMU_RESV_MSI)
RESERVED = "0x00000000fee00000 0x00000000feefffff msi"


def nodes(state: State) -> Iterator[Node]:
    if not state.iommu:
        return
    yield Dir(GROUPS)
    for fn in state.functions:
        if fn.iommu_group is None:
            continue
        g = f"{GROUPS}/{fn.iommu_group}"
        yield Dir(g)
        yield text(f"{g}/type", "DMA", 0o644)
        yield text(f"{g}/reserved_regions", RESERVED)
        yield relative_link(f"{g}/devices/{fn.bdf}", fn.path)
        yield relative_link(f"{fn.path}/iommu_group", g)


SURFACE = stateless("iommu", nodes, ("functions", "iommu"), (kernel(GROUPS),))
