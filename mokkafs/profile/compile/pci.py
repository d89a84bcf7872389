"""The PCI side of a profile: the devices it names, where they sit (the host bridges, the
bridges above them), the HCAs' places and names, and every PCI function. A function of
exactly what ``reuse.key_of`` keys its reuse on."""

from __future__ import annotations

from collections.abc import Callable

from mokkafs.errors import Problem, ProfileError
from mokkafs.model import sriov
from mokkafs.model.bdf import Bdf, RootId
from mokkafs.profile import devices, infiniband, machine, topology
from mokkafs.profile.compile.cpus import root_complexes
from mokkafs.profile.compile.endpoints import identities
from mokkafs.profile.compile.functions import pci_functions
from mokkafs.profile.compile.reuse import PciSide
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import PcieTopology, Profile


def pci_side(profile: Profile, filename: str, node_name: str, ib_served: bool,
              problems: Problems, check_ib: Callable[[int], None]) -> PciSide:
    """The PCI devices of ``profile`` (as ``reuse.pci_profile`` lets it be seen: no HCA-only
    setting, no faults) on node ``node_name``, its HCAs only if ``ib_served``: a function of
    exactly what ``compile_profile`` keys its reuse on. ``check_ib(count)`` checks the
    InfiniBand section once the HCAs are counted. Raises ``ProfileError``."""
    gpus = devices.gpus(profile, problems)
    switches = devices.nvswitches(profile, gpus[0].architecture if gpus else "")
    ib = profile.infiniband
    ib_on = ib.enabled and ib_served
    declared_hcas = infiniband.declared(ib)
    # Declared HCAs a node serves without InfiniBand leave their slots empty, so the
    # bridges, buses and every other device's path stay as they are with it.
    absent = set() if ib_on else {hca.bdf for hca in declared_hcas}
    members: dict[Bdf, YamlPath] = {}
    for gpu in gpus:
        if gpu.bdf in members:
            problems.add(("devices",), f"{gpu.bdf} is the bus_id of two GPUs; every device "
                         "needs its own PCI address")
        members[gpu.bdf] = gpu.where
    others: list[tuple[Bdf, YamlPath]] = [(sw.bdf, sw.where) for sw in switches]
    others += [(hca.bdf, hca.where) for hca in declared_hcas]
    for bdf, where in others:
        if bdf in members:
            problems.add(where, f"{bdf} is already used by another device")
        members[bdf] = where
    found, placement = topology.roots(profile, problems, members)
    problems.check()
    roots, nodes, threads = root_complexes(profile, found, problems)
    homes = {r.id: r.numa_node for r in roots}
    shape = machine.build(profile.machine, profile.platform.arch, nodes, threads,
                          [(str(g.bdf), max(homes[str(placement[g.bdf])], 0))
                           for g in sorted(gpus, key=lambda g: g.index)])

    hca_count = 0
    if ib_on:
        hca_count = len(declared_hcas) or ib.hca_count or len(gpus) * ib.hcas_per_gpu
        check_ib(hca_count)
    problems.check()
    placed = declared_hcas if ib_on else []
    if ib_on and not declared_hcas:
        try:
            placed = infiniband.beside_gpus(hca_count, gpus, placement, set(members),
                                            sorted(found))
        except ValueError as exc:
            raise ProfileError(filename, [Problem("infiniband.hca_count", str(exc))]) from None
        for p in placed:
            placement[p.bdf] = root_of(p.bdf, found)
    placed = sorted(placed, key=lambda p: p.bdf)
    hca_names = infiniband.names(placed, problems)

    endpoints = identities(gpus, switches, placed, ib)
    category: dict[Bdf, topology.Category] = {
        b: "nvswitch" if e.identity.kind == "nvswitch" else "other" for b, e in endpoints.items()}
    category.update((b, "other") for b in absent)
    topo = profile.pcie_topology or PcieTopology()
    layout = topology.layout(found, {b: placement[b] for b in [*endpoints, *absent]}, category,
                             problems, topo.first_root_port)
    problems.check()
    functions = sriov.capable(infiniband.with_vpd(  # ConnectX-7/8 functions are SR-IOV PFs
        pci_functions(profile, endpoints, placement, layout, {r.id: r for r in roots}, node_name),
        ib, node_name))
    return PciSide(roots, shape, functions, tuple(p.bdf for p in placed),
                    tuple(hca_names))


def root_of(bdf: Bdf, found: dict[RootId, topology.Root]) -> RootId:
    return max(r for r in found if r.holds(bdf))
