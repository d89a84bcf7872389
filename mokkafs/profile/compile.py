"""A validated ``Profile`` -> one immutable ``State``, with the checks that cross fields.

The concerns live beside this module: the devices a profile names (``devices``), where they
sit and the bridges above them (``topology``), the HCAs (``infiniband``), the machine around
them (``platform``). This module puts them together into PCI functions and the State. The
problems of each stage are collected in one ``Problems`` and reported together, each naming its
YAML path; a stage that depends on an earlier one runs only once that one has none.

Compiling runs on every profile change, so the PCI side (host bridges, functions, addresses,
the HCAs' places and names) of the last compile is reused when the profile differs from the
last one only in HCA-only settings (``HCA_ONLY``: firmware, rates, traffic, ...) or faults.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field, replace

from pydantic import BaseModel

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile import devices, infiniband, machine, sriov, topology
from mokkafs.profile.bdf import Bdf, RootId
from mokkafs.profile.faults import compile_faults
from mokkafs.profile.load import Problems, YamlPath
from mokkafs.profile.platform import driver, platform
from mokkafs.profile.schema import InfiniBand, PcieTopology, Profile
from mokkafs.profile.values import MAX_CPUS
from mokkafs.state import (
    Bar,
    Bridge,
    CharMajor,
    DeviceKind,
    Generation,
    Hca,
    HostFacts,
    Machine,
    PcieLink,
    PciFunction,
    RootComplex,
    State,
)

MELLANOX = 0x15B3
CLASS_INFINIBAND = 0x020700
CLASS_ETHERNET = 0x020000
CLASS_BRIDGE_PCI = 0x060400
# PCIe generation of a ConnectX part, by PCI device id (its MTxxxx number).
HCA_PCIE_GEN = {0x1017: 3, 0x1019: 4, 0x101B: 4, 0x101D: 4, 0x1021: 5, 0x1023: 6}
FIRST_IRQ = 32  # legacy INTx lines as a BIOS routes them: distinct, stable, in address order


@dataclass(frozen=True)
class Options:
    """What the command line adds to a profile."""

    node_name: str
    node_index: int | None = None
    generation: int = 1
    loaded_at: float = 0.0
    started_at: float = 0.0
    counter_quantum: float = 0.1
    host: HostFacts = field(default_factory=HostFacts)
    infiniband: bool = True  # False: serve no IB surface whatever the profile says
    machine: bool = True  # False: serve no CPU, NUMA node, cpuinfo or meminfo (machine.show)


def _parse_cpulist(text: str) -> tuple[int, ...]:
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first or last >= MAX_CPUS:
            raise ValueError(part)
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def _root_complexes(profile: Profile, found: dict[RootId, topology.Root], problems: Problems
                    ) -> tuple[tuple[RootComplex, ...], dict[int, tuple[int, ...]], int]:
    """Every host bridge with its NUMA node and local CPUs, and the machine's CPU nodes (id
    -> CPUs) and threads per core: the ``machine:`` section's, or those the roots imply."""
    cores = (profile.pcie_topology or PcieTopology()).cores_per_numa
    section = profile.machine
    declared = None
    nr_cpus = 0
    if section is not None:
        nr_cpus = section.sockets * section.cores_per_socket * section.threads_per_core
        if nr_cpus > MAX_CPUS:
            problems.add(("machine",), f"sockets, cores_per_socket and threads_per_core make "
                         f"{nr_cpus} CPUs; no kernel runs more than {MAX_CPUS}: lower them")
            problems.check()
        declared = machine.node_cpus(section)
    cpus: dict[RootId, tuple[int, ...]] = {}
    for rid, root in found.items():
        if declared is not None and root.numa_node >= 0 and root.numa_node not in declared:
            problems.add((*root.where, "numa_node"),
                         f"node {root.numa_node} is no package's: the machine has nodes "
                         f"0-{len(declared) - 1} (machine.sockets); name one of them or -1")
        if root.cpu_affinity:
            try:
                cpus[rid] = _parse_cpulist(root.cpu_affinity)
            except ValueError:
                problems.add((*root.where, "cpu_affinity"),
                             f"expected a CPU list such as 0-55,112-167 (CPUs 0-{MAX_CPUS - 1}),"
                             f" got {root.cpu_affinity!r}")
                continue
            if declared is not None and cpus[rid][-1] >= nr_cpus:
                problems.add((*root.where, "cpu_affinity"),
                             f"names CPU {cpus[rid][-1]}, but the machine has CPUs "
                             f"0-{nr_cpus - 1} (machine: sockets x cores_per_socket x "
                             "threads_per_core); name CPUs it has or leave it out")
        elif declared is not None:
            if root.numa_node in declared:
                cpus[rid] = declared[root.numa_node]
        elif root.numa_node >= 0:
            cpus[rid] = tuple(range(root.numa_node * cores, (root.numa_node + 1) * cores))
    if declared is None:
        nr_cpus = max((max(c) + 1 for c in cpus.values() if c), default=cores)
        if nr_cpus > MAX_CPUS:
            problems.add(("pcie_topology", "cores_per_numa"),
                         f"the NUMA nodes and cores_per_numa make {nr_cpus} CPUs; no kernel "
                         f"runs more than {MAX_CPUS}: lower cores_per_numa or the roots' "
                         "numa_node")
    problems.check()
    roots = tuple(sorted((RootComplex(str(rid), root.numa_node,
                                      cpus.get(rid) or tuple(range(nr_cpus)))
                          for rid, root in found.items()), key=lambda r: r.id))
    if section is not None and declared is not None:
        return roots, declared, section.threads_per_core
    nodes, threads = machine.implied(((r.numa_node, r.cpus) for r in roots), nr_cpus)
    return roots, nodes, threads


@dataclass
class _Endpoint:
    """What a function is, before the hierarchy says where: identity, link, BARs to take."""

    kind: DeviceKind
    vendor: int
    device: int
    subsystem_vendor: int
    subsystem_device: int
    class_code: int
    revision: int
    driver: str
    link: PcieLink
    bars: list[tuple[int, int, bool, bool]]
    gpu: devices.Gpu | None = None


# The InfiniBand settings that place no function, bus or address: the PCI side of a profile
# (below) never sees them, so a swap that changes only these (firmware, rates, traffic) or the
# faults reuses the last compile's PCI side. ``infiniband.check`` reads some of them; it runs
# on every compile.
HCA_ONLY = ("fw_version", "hw_rev", "board_id", "node_desc_template", "rate_gbps", "port_state",
            "phys_state", "guid_prefix", "ports_per_hca", "gid_table_len", "pkey_table_len",
            "traffic", "ofed_version")
_HCA_DEFAULTS = {name: InfiniBand.model_fields[name].get_default(call_default_factory=True)
                 for name in HCA_ONLY}


@dataclass(frozen=True)
class _PciSide:
    """What a profile's PCI devices compile to: the host bridges, every function, and the
    HCAs' addresses and names."""

    roots: tuple[RootComplex, ...]
    machine: Machine
    functions: tuple[PciFunction, ...]
    hca_bdfs: tuple[Bdf, ...]
    hca_names: tuple[str, ...]


# The last PCI side compiled, with what it was compiled from: one entry, replaced whole (a
# compile abandoned in one thread while the next runs in another at worst misses it).
_last_pci: tuple[tuple[Profile, object, str, bool], _PciSide] | None = None


def _set_fields(value: object) -> object:
    """Which fields of every model in ``value`` the document set. Pydantic's equality leaves
    this out, and it matters: a GPU's own ``pcie: {}`` overrides ``device_defaults`` where
    leaving the key out does not (``devices.gpus``)."""
    if isinstance(value, BaseModel):
        names = sorted(value.model_fields_set)
        return tuple((name, _set_fields(getattr(value, name))) for name in names)
    if isinstance(value, list | tuple):
        return tuple(_set_fields(item) for item in value)
    if isinstance(value, dict):
        return tuple((key, _set_fields(item)) for key, item in value.items())
    return None


def compile_profile(profile: Profile, lines: dict[YamlPath, int], filename: str,
                    options: Options) -> State:
    """Compile a validated profile into a State, or raise ``ProfileError`` naming every problem."""
    global _last_pci
    problems = Problems(filename, lines)
    ib = profile.infiniband
    # What the PCI side may see: the profile without its HCA-only settings and its faults.
    pci_profile = profile.model_copy(update={
        "infiniband": ib.model_copy(update=_HCA_DEFAULTS), "faults": []})
    key = (pci_profile, _set_fields(pci_profile), options.node_name, options.infiniband)
    last = _last_pci
    if last is not None and last[0] == key:
        pci = last[1]
        if pci.hca_bdfs:  # the checks of what the PCI side did not see
            infiniband.check(ib, len(pci.hca_bdfs), problems)
            problems.check()
    else:
        pci = _pci_side(pci_profile, filename, options.node_name, options.infiniband,
                        problems, lambda count: infiniband.check(ib, count, problems))
        _last_pci = key, pci
    hcas: tuple[Hca, ...] = ()
    if pci.hca_bdfs:
        try:
            hcas = infiniband.hcas(ib, list(pci.hca_bdfs), list(pci.hca_names),
                                   options.node_name, options.node_index)
        except ValueError as exc:
            raise ProfileError(filename, [Problem("infiniband", str(exc))]) from None
    state = State(
        generation=Generation(options.generation),
        source=filename,
        node_name=options.node_name,
        node_index=options.node_index,
        roots=pci.roots,
        functions=pci.functions,
        hcas=hcas,
        char_majors=_majors(profile, bool(pci.hca_bdfs),
                            any(fn.kind == "nvswitch" for fn in pci.functions), problems),
        nr_cpus=len(pci.machine.cpus),
        loaded_at=options.loaded_at,
        platform=platform(profile, options.node_name, options.node_index),
        driver=driver(profile),
        pci_drivers=tuple(sorted({fn.driver for fn in pci.functions})),
        rdma_loaded=bool(hcas),
        # The PCI side keeps the machine's shape (the functions' local CPUs); only whether
        # the view serves it follows the command line.
        machine=pci.machine if options.machine else replace(pci.machine, shown=False),
        iommu=(profile.pcie_topology or PcieTopology()).iommu,
        host=options.host,
        started_at=options.started_at,
        counter_quantum=options.counter_quantum,
    )
    specs = compile_faults(profile.faults, state, ("faults",), problems)
    problems.check()
    return replace(state, faults=specs)


def _pci_side(profile: Profile, filename: str, node_name: str, ib_served: bool,
              problems: Problems, check_ib: Callable[[int], None]) -> _PciSide:
    """The PCI devices of ``profile`` (as ``compile_profile`` lets this see it: no HCA-only
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
    roots, nodes, threads = _root_complexes(profile, found, problems)
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
            placement[p.bdf] = _root_of(p.bdf, found)
    placed = sorted(placed, key=lambda p: p.bdf)
    hca_names = infiniband.names(placed, problems)

    endpoints = _endpoints(gpus, switches, placed, ib)
    category: dict[Bdf, topology.Category] = {
        b: "nvswitch" if e.kind == "nvswitch" else "other" for b, e in endpoints.items()}
    category.update((b, "other") for b in absent)
    topo = profile.pcie_topology or PcieTopology()
    layout = topology.layout(found, {b: placement[b] for b in [*endpoints, *absent]}, category,
                             problems, topo.first_root_port)
    problems.check()
    functions = sriov.capable(infiniband.with_vpd(  # ConnectX-7/8 functions are SR-IOV PFs
        _functions(profile, endpoints, placement, layout, {r.id: r for r in roots}, node_name),
        ib, node_name))
    return _PciSide(roots, shape, functions, tuple(p.bdf for p in placed),
                    tuple(hca_names))


def _root_of(bdf: Bdf, found: dict[RootId, topology.Root]) -> RootId:
    return max(r for r in found if r.holds(bdf))


def _endpoints(gpus: list[devices.Gpu], switches: list[devices.NvSwitch],
               placed: list[infiniband.Placed], ib: InfiniBand) -> dict[Bdf, _Endpoint]:
    out: dict[Bdf, _Endpoint] = {}
    for gpu in gpus:
        out[gpu.bdf] = _Endpoint("gpu", gpu.vendor, gpu.device, gpu.subsystem_vendor,
                                 gpu.subsystem_device, devices.CLASS_3D, gpu.revision,
                                 "nvidia", gpu.link, gpu.bars(), gpu)
    for sw in switches:
        # nvidia.ko binds NVSwitches with a PCI driver of their own (linux_nvswitch.c)
        out[sw.bdf] = _Endpoint("nvswitch", devices.NVIDIA, sw.device, devices.NVIDIA, 0,
                                devices.CLASS_BRIDGE_OTHER, 0xA1, "nvidia-nvswitch",
                                devices.NVSWITCH_LINK, [(0, 32 * devices.MIB, False, False)])
    hca_device = int(ib.hca_type[2:])
    sub = ib.subsystem_id if ib.subsystem_id is not None else MELLANOX
    gen = HCA_PCIE_GEN.get(hca_device, 5)
    for p in placed:
        out[p.bdf] = _Endpoint(
            "hca", MELLANOX, hca_device, sub & 0xFFFF or MELLANOX, sub >> 16,
            CLASS_ETHERNET if ib.link_layer == "Ethernet" else CLASS_INFINIBAND, 0x00,
            "mlx5_core", PcieLink(gen, 16, gen, 16), [(0, 32 * devices.MIB, True, True)])
    return out


def _functions(profile: Profile, endpoints: dict[Bdf, _Endpoint], placement: dict[Bdf, RootId],
               layout: topology.Layout, roots: dict[str, RootComplex],
               node_name: str) -> tuple[PciFunction, ...]:
    """Every function, each made once (this runs on every profile change): where it sits,
    then the BARs and the windows its bridges forward, then the function itself."""
    topo = profile.pcie_topology or PcieTopology()
    rp_id, sw_id = topo.root_port, topo.switch
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
    bars = _allocate(sorted(paths, key=paths.__getitem__), bridges, endpoints)
    windows = {up: _windows([bar for bdf in kids for bar in bars[bdf]])
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
                bdf=str(bdf), root=str(placement[bdf]), path=paths[bdf],
                parent=None if parent is None else str(parent), kind=e.kind,
                vendor=e.vendor, device=e.device, subsystem_vendor=e.subsystem_vendor,
                subsystem_device=e.subsystem_device, class_code=e.class_code,
                revision=e.revision, driver=e.driver, numa_node=rc.numa_node, cpus=rc.cpus,
                irq=irq, link=e.link, bars=bars[bdf], iommu_group=group,
                gpu=e.gpu.info(node_name) if e.gpu else None))
            continue
        rc = roots[str(spec.root)]
        kids = below.get(bdf, [])
        gen = max((endpoints[k].link.max_gen for k in kids), default=5)
        link = PcieLink(gen, 16, gen, 16)
        facing = spec.port == "downstream" or spec.secondary == spec.subordinate
        slot = [k for k in kids if k.bus == spec.secondary]
        if facing and slot:  # the port whose link goes to the endpoint trains to its link
            first = endpoints[min(slot)].link
            link = PcieLink(max(gen, first.max_gen), max(16, first.max_width),
                            first.current_gen, first.current_width)
        elif facing:  # an empty slot: the link is down (2.5 GT/s, no lanes)
            link = PcieLink(gen, 16, 1, 0)
        ids = rp_id if spec.port == "root" else sw_id
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


def _allocate(depth_first: Iterable[Bdf], bridges: Container[Bdf],
              endpoints: dict[Bdf, _Endpoint]) -> dict[Bdf, tuple[Bar, ...]]:
    """Every endpoint's BARs, taken in the hierarchy's depth-first order with each bridge's
    subtree starting on a window boundary, so the subtree's ranges are contiguous."""
    allocator = devices.BarAllocator()
    out: dict[Bdf, tuple[Bar, ...]] = {}
    for bdf in depth_first:
        if bdf in bridges:
            allocator.align()
        else:
            out[bdf] = tuple(allocator.take(*bar) for bar in endpoints[bdf].bars)
    return out


Window = tuple[int, int] | None


def _windows(below: list[Bar]) -> tuple[Window, Window]:
    """The address windows a bridge forwards, given the BARs of its subtree: the span of each
    kind (non-prefetchable, prefetchable), in the 1 MiB granules bridges decode."""

    def span(selected: list[Bar]) -> Window:
        if not selected:
            return None
        base = min(b.address for b in selected) & ~(devices.MIB - 1)
        end = max(b.address + b.size for b in selected)
        return base, -(-end // devices.MIB) * devices.MIB - 1

    return (span([b for b in below if not b.prefetchable]),
            span([b for b in below if b.prefetchable]))


def _majors(profile: Profile, ib: bool, nvswitch: bool, problems: Problems,
            ) -> tuple[CharMajor, ...]:
    pd = profile.proc_devices
    named = [(pd.nvidia_frontend, "nvidia-frontend", "nvidia_frontend"),
             (pd.nvidia_uvm, "nvidia-uvm", "nvidia_uvm"),
             (pd.nvidia_caps, "nvidia-caps", "nvidia_caps"),
             (pd.nvidia_caps_imex_channels, "nvidia-caps-imex-channels",
              "nvidia_caps_imex_channels")]
    if nvswitch:
        named.append((pd.nvidia_nvswitch, "nvidia-nvswitch", "nvidia_nvswitch"))
    if ib:
        named += [(pd.infiniband, "infiniband_mad", "infiniband"),
                  (pd.infiniband, "infiniband_verbs", "infiniband")]
    owner: dict[int, str] = {}
    for major, name, key in named:
        other = owner.get(major)
        if other and not (other.startswith("infiniband") and name.startswith("infiniband")):
            problems.add(("proc_devices", key), f"major {major} is already used by {other}; "
                         "each driver needs its own major")
        owner.setdefault(major, name)
    problems.check()
    return tuple(sorted((CharMajor(m, n) for m, n, _ in named), key=lambda c: (c.major, c.name)))
