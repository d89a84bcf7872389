"""Every PCI function of a profile, endpoints and bridges: where each sits in the hierarchy,
its BARs and windows, its IRQ and IOMMU group, and the function itself."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from mokkafs.model.bdf import Bdf, RootId
from mokkafs.profile import topology
from mokkafs.profile.compile.endpoints import Endpoint
from mokkafs.profile.compile.links import bridge_link
from mokkafs.profile.compile.windows import allocate, bridge_windows
from mokkafs.profile.schema import PcieTopology, Profile
from mokkafs.state import Bridge, PciFunction, PciIdentity, RootComplex

CLASS_BRIDGE_PCI = 0x060400
FIRST_IRQ = 32  # legacy INTx lines as a BIOS routes them: distinct, stable, in address order


def pci_functions(profile: Profile, endpoints: dict[Bdf, Endpoint], placement: dict[Bdf, RootId],
               layout: topology.Layout, roots: dict[str, RootComplex],
               node_name: str) -> tuple[PciFunction, ...]:
    """Every function, each made once (this runs on every profile change): where it sits,
    then the BARs and the windows its bridges forward, then the function itself."""
    topo = profile.pcie_topology or PcieTopology()
    rp_id, sw_id = topo.root_port, topo.switch
    rp_of = {str(rc.id): rc.root_port for rc in topo.root_complexes if rc.root_port}
    chains = {bdf: layout.ancestors(bdf) for bdf in endpoints}  # the bridges above each
    below: dict[Bdf, list[Bdf]] = {}  # bridge -> the endpoints below it
    for bdf, chain in chains.items():
        for up in chain:
            below.setdefault(up, []).append(bdf)
    bridges = {spec.bdf: spec for spec in layout.bridges}

    def path(bdf: Bdf, root: RootId, chain: list[Bdf]) -> str:
        return "/".join(["sys/devices", str(root), *map(str, chain), str(bdf)])

    paths = {bdf: path(bdf, placement[bdf], chain) for bdf, chain in chains.items()}
    paths.update((b, path(b, spec.root, layout.ancestors(b))) for b, spec in bridges.items())
    bars = allocate(sorted(paths, key=paths.__getitem__), bridges, endpoints)
    windows = {up: bridge_windows([bar for bdf in kids for bar in bars[bdf]])
               for up, kids in below.items()}

    out = []
    for i, bdf in enumerate(sorted(paths)):  # IRQs and IOMMU groups in address order
        irq, group = FIRST_IRQ + i, i if topo.iommu else None
        spec = bridges.get(bdf)
        if spec is None:
            e = endpoints[bdf]
            rc = roots[str(placement[bdf])]
            parent = layout.parent.get(bdf)
            out.append(PciFunction(
                **_fields(e.identity),
                bdf=str(bdf), root=str(placement[bdf]), path=paths[bdf],
                parent=None if parent is None else str(parent), numa_node=rc.numa_node,
                cpus=rc.cpus, irq=irq, link=e.link, bars=bars[bdf], iommu_group=group,
                gpu=e.gpu.info(node_name) if e.gpu else None))
            continue
        rc = roots[str(spec.root)]
        link, slot, facing = bridge_link(spec, below.get(bdf, []), endpoints)
        ids = rp_of.get(str(spec.root), rp_id) if spec.port == "root" else sw_id
        memory, prefetchable = windows.get(bdf, (None, None))
        out.append(PciFunction(
            bdf=str(bdf), root=str(spec.root), path=paths[bdf],
            parent=None if spec.parent is None else str(spec.parent), kind="bridge",
            vendor=ids.device_id & 0xFFFF, device=ids.device_id >> 16,
            subsystem_vendor=ids.subsystem_id & 0xFFFF, subsystem_device=ids.subsystem_id >> 16,
            class_code=CLASS_BRIDGE_PCI, revision=0x04 if spec.port == "root" else 0xB0,
            driver="pcieport", irq=irq, numa_node=rc.numa_node, cpus=rc.cpus, link=link,
            bars=(), iommu_group=group,
            bridge=Bridge(spec.port, spec.secondary, spec.subordinate, spec.port_number,
                          memory, prefetchable, occupied=bool(slot) or not facing)))
    return tuple(out)


def _fields(identity: PciIdentity) -> dict[str, Any]:
    return {f.name: getattr(identity, f.name) for f in fields(PciIdentity)}
