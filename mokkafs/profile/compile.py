"""A validated ``Profile`` -> one immutable ``State``, with the checks that cross fields.

The concerns live beside this module: the devices a profile names (``devices``), where they
sit and the bridges above them (``topology``), the HCAs (``infiniband``), the machine around
them (``platform``). This module puts them together into PCI functions and the State. The
problems of each stage are collected in one ``Problems`` and reported together, each naming its
YAML path; a stage that depends on an earlier one runs only once that one has none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile import devices, infiniband, topology
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


def _root_complexes(profile: Profile, found: dict[RootId, topology.Root],
                    problems: Problems) -> tuple[tuple[RootComplex, ...], int]:
    """Every host bridge with its NUMA node and local CPUs, and the node's CPU count."""
    cores = (profile.pcie_topology or PcieTopology()).cores_per_numa
    cpus: dict[RootId, tuple[int, ...]] = {}
    for rid, root in found.items():
        if root.cpu_affinity:
            try:
                cpus[rid] = _parse_cpulist(root.cpu_affinity)
            except ValueError:
                problems.add((*root.where, "cpu_affinity"),
                             f"expected a CPU list such as 0-55,112-167 (CPUs 0-{MAX_CPUS - 1}),"
                             f" got {root.cpu_affinity!r}")
        elif root.numa_node >= 0:
            cpus[rid] = tuple(range(root.numa_node * cores, (root.numa_node + 1) * cores))
    nr_cpus = max((max(c) + 1 for c in cpus.values() if c), default=cores)
    if nr_cpus > MAX_CPUS:
        problems.add(("pcie_topology", "cores_per_numa"),
                     f"the NUMA nodes and cores_per_numa make {nr_cpus} CPUs; no kernel runs "
                     f"more than {MAX_CPUS}: lower cores_per_numa or the roots' numa_node")
    problems.check()
    return tuple(sorted((RootComplex(str(rid), root.numa_node,
                                     cpus.get(rid) or tuple(range(nr_cpus)))
                         for rid, root in found.items()), key=lambda r: r.id)), nr_cpus


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


def compile_profile(profile: Profile, lines: dict[YamlPath, int], filename: str,
                    options: Options) -> State:
    """Compile a validated profile into a State, or raise ``ProfileError`` naming every problem."""
    problems = Problems(filename, lines)
    gpus = devices.gpus(profile, problems)
    switches = devices.nvswitches(profile, gpus[0].architecture if gpus else "")
    ib = profile.infiniband
    ib_on = ib.enabled and options.infiniband
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
    roots, nr_cpus = _root_complexes(profile, found, problems)

    hca_count = 0
    if ib_on:
        hca_count = len(declared_hcas) or ib.hca_count or len(gpus) * ib.hcas_per_gpu
        infiniband.check(ib, hca_count, problems)
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
    functions = _functions(profile, endpoints, placement, layout, {r.id: r for r in roots},
                           options.node_name)
    hcas: tuple[Hca, ...] = ()
    if hca_count:
        try:
            hcas = infiniband.hcas(ib, [p.bdf for p in placed], hca_names, options.node_name,
                                   options.node_index)
        except ValueError as exc:
            raise ProfileError(filename, [Problem("infiniband", str(exc))]) from None
    state = State(
        generation=Generation(options.generation),
        source=filename,
        node_name=options.node_name,
        node_index=options.node_index,
        roots=roots,
        functions=functions,
        hcas=hcas,
        char_majors=_majors(profile, bool(hca_count), problems),
        nr_cpus=nr_cpus,
        loaded_at=options.loaded_at,
        platform=platform(profile, options.node_name, options.node_index),
        driver=driver(profile),
        iommu=topo.iommu,
        host=options.host,
        started_at=options.started_at,
        counter_quantum=options.counter_quantum,
    )
    specs = compile_faults(profile.faults, state, ("faults",), problems)
    problems.check()
    return replace(state, faults=specs)


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
        out[sw.bdf] = _Endpoint("nvswitch", devices.NVIDIA, sw.device, devices.NVIDIA, 0,
                                devices.CLASS_BRIDGE_OTHER, 0xA1, "nvidia",
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
    topo = profile.pcie_topology or PcieTopology()
    rp_id, sw_id = topo.root_port, topo.switch
    below: dict[Bdf, list[Bdf]] = {}  # bridge -> the endpoints below it
    for bdf in endpoints:
        for up in layout.ancestors(bdf):
            below.setdefault(up, []).append(bdf)

    def path(bdf: Bdf, root: RootId) -> str:
        chain = [str(b) for b in layout.ancestors(bdf)]
        return "/".join(["sys/devices", str(root), *chain, str(bdf)])

    made: dict[Bdf, PciFunction] = {}
    for bdf, e in endpoints.items():
        root = placement[bdf]
        rc = roots[str(root)]
        parent = layout.parent.get(bdf)
        made[bdf] = PciFunction(
            bdf=str(bdf), root=str(root), path=path(bdf, root),
            parent=None if parent is None else str(parent), kind=e.kind,
            vendor=e.vendor, device=e.device, subsystem_vendor=e.subsystem_vendor,
            subsystem_device=e.subsystem_device, class_code=e.class_code, revision=e.revision,
            driver=e.driver, irq=0, numa_node=rc.numa_node, cpus=rc.cpus, link=e.link, bars=(),
            gpu=e.gpu.info(node_name) if e.gpu else None)
    for spec in layout.bridges:
        rc = roots[str(spec.root)]
        kids = below.get(spec.bdf, [])
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
        made[spec.bdf] = PciFunction(
            bdf=str(spec.bdf), root=str(spec.root), path=path(spec.bdf, spec.root),
            parent=None if spec.parent is None else str(spec.parent), kind="bridge",
            vendor=ids.device_id & 0xFFFF, device=ids.device_id >> 16,
            subsystem_vendor=ids.subsystem_id & 0xFFFF, subsystem_device=ids.subsystem_id >> 16,
            class_code=CLASS_BRIDGE_PCI, revision=0x04 if spec.port == "root" else 0xB0,
            driver="pcieport", irq=0, numa_node=rc.numa_node, cpus=rc.cpus, link=link,
            bars=(), bridge=Bridge(spec.port, spec.secondary, spec.subordinate,
                                   spec.port_number, occupied=bool(slot) or not facing))
    ordered = sorted(made.values(), key=lambda fn: fn.path)  # depth first, so windows nest
    bars = _allocate(ordered, endpoints)
    by_bdf = sorted(made.values(), key=lambda fn: Bdf.parse(fn.bdf))
    group = {fn.bdf: i for i, fn in enumerate(by_bdf)}
    out = []
    for i, fn in enumerate(by_bdf):
        fn = replace(fn, irq=FIRST_IRQ + i, bars=bars.get(fn.bdf, ()),
                     iommu_group=group[fn.bdf] if topo.iommu else None)
        if fn.bridge is not None:
            fn = replace(fn, bridge=_windows(fn, ordered, bars))
        out.append(fn)
    return tuple(out)


def _allocate(ordered: Iterable[PciFunction],
              endpoints: dict[Bdf, _Endpoint]) -> dict[str, tuple[Bar, ...]]:
    allocator = devices.BarAllocator()
    out: dict[str, tuple[Bar, ...]] = {}
    for fn in ordered:
        if fn.bridge is not None:
            allocator.align()
            continue
        spec = endpoints[Bdf.parse(fn.bdf)]
        out[fn.bdf] = tuple(allocator.take(*bar) for bar in spec.bars)
    return out


def _windows(bridge: PciFunction, functions: list[PciFunction],
             bars: dict[str, tuple[Bar, ...]]) -> Bridge:
    """The address windows a bridge forwards: the span of its subtree's BARs of each kind,
    in the 1 MiB granules bridges decode."""
    assert bridge.bridge is not None
    prefix = bridge.path + "/"
    below = [bar for fn in functions if fn.path.startswith(prefix) for bar in bars.get(fn.bdf, ())]

    def span(selected: list[Bar]) -> tuple[int, int] | None:
        if not selected:
            return None
        base = min(b.address for b in selected) & ~(devices.MIB - 1)
        end = max(b.address + b.size for b in selected)
        return base, -(-end // devices.MIB) * devices.MIB - 1

    return replace(bridge.bridge, memory=span([b for b in below if not b.prefetchable]),
                   prefetchable=span([b for b in below if b.prefetchable]))


def _majors(profile: Profile, ib: bool, problems: Problems) -> tuple[CharMajor, ...]:
    pd = profile.proc_devices
    named = [(pd.nvidia_frontend, "nvidia-frontend", "nvidia_frontend"),
             (pd.nvidia_uvm, "nvidia-uvm", "nvidia_uvm"),
             (pd.nvidia_caps, "nvidia-caps", "nvidia_caps"),
             (pd.nvidia_caps_imex_channels, "nvidia-caps-imex-channels",
              "nvidia_caps_imex_channels")]
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
