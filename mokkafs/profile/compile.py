"""A validated ``Profile`` -> one immutable ``State``, with the cross-field checks.

Placement rules (kept from nvml-mock where it had one, from the kernel where it did not):
- GPUs come from ``devices`` (count: ``system.num_devices``, else the entries, else 8), each
  merged over ``device_defaults``; every GPU needs a ``pci.bus_id``.
- Root complexes come from ``pcie_topology``; a GPU or NVSwitch that no root lists sits under
  the declared root whose bus range covers its address (as the kernel enumerates it), else
  under the root its own address implies (``pciDDDD:BB``) with NUMA node -1. No topology at
  all: one root ``pciDDDD:00`` per domain, NUMA 0.
- IB HCA i (``hca_count``, else GPUs x ``hcas_per_gpu``) pairs with GPU ``i*G//H`` and takes the
  next free bus after it inside that GPU's root, as on HGX boards where each GPU and its NIC
  share a PCIe switch.
- GUIDs and LIDs: see ``mokkafs.ib_identity``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Any

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile import identity as ib_identity
from mokkafs.profile.load import Problems, YamlPath
from mokkafs.profile.schema import MAX_CPUS, DeviceOverride, InfiniBand, Profile
from mokkafs.state import (
    IB_ERROR_COUNTERS,
    Bar,
    CharMajor,
    Generation,
    Hca,
    HostFacts,
    IbPort,
    PcieLink,
    PciFunction,
    RootComplex,
    State,
    Traffic,
)

NVIDIA = 0x10DE
MELLANOX = 0x15B3
CLASS_3D = 0x030200
CLASS_BRIDGE_OTHER = 0x068000
CLASS_INFINIBAND = 0x020700
CLASS_ETHERNET = 0x020000

# NVSwitch PCI device ids by GPU architecture (pci.ids: 1af1 "GA100 [A100 NVSwitch]",
# 22a3 "GH100 [H100 NVSwitch]"). pci.ids has no entry for NVLink-5 switch chips yet; they
# reuse the Hopper id unless a profile names one in nvlink.switches[].device_id.
NVSWITCH_DEVICE_IDS = {"ampere": 0x1AF1, "hopper": 0x22A3}
NVSWITCH_DEFAULT_DEVICE_ID = 0x22A3

# PCIe generation of a ConnectX part, by PCI device id (its MTxxxx number).
HCA_PCIE_GEN = {0x1017: 3, 0x1019: 4, 0x101B: 4, 0x101D: 4, 0x1021: 5, 0x1023: 6}

MIB = 1 << 20

# A bound on what the InfiniBand surface may cost: files per HCA and per port besides the GID
# and P_Key tables (counted in surfaces/infiniband.py), and the most a node may have in all
# (256 HCAs with the default tables are about 31,000).
HCA_NODES = 40
PORT_NODES = 60
MAX_IB_NODES = 150_000


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


@dataclass
class _Gpu:
    index: int
    bdf: str
    vendor: int
    device: int
    subsystem_vendor: int
    subsystem_device: int
    revision: int
    link: PcieLink
    bar1_size: int
    architecture: str


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


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _gpus(profile: Profile, problems: Problems) -> list[_Gpu]:
    overrides: dict[int, tuple[int, DeviceOverride | None]] = {}
    for pos, entry in enumerate(profile.devices):
        if entry.index in overrides:
            problems.add(("devices", pos, "index"), f"index {entry.index} is declared twice")
        overrides[entry.index] = (pos, entry)
    count = profile.system.num_devices or len(profile.devices) or 8
    defaults = profile.device_defaults
    gpus: list[_Gpu] = []
    for index in range(count):
        pos, ov = overrides.get(index, (-1, None))
        path: YamlPath = ("devices", pos) if pos >= 0 else ("device_defaults",)
        pci = ov.pci if ov else None
        device_id = (pci.device_id if pci else None) or defaults.pci.device_id
        subsystem_id = (pci.subsystem_id if pci else None) or defaults.pci.subsystem_id
        bus_id = (pci.bus_id if pci else None) or defaults.pci.bus_id
        revision = (pci.revision if pci else None) or defaults.pci.revision or 0xA1
        if device_id is None:
            problems.add((*path, "pci", "device_id"), "required: (device << 16) | vendor, "
                         "e.g. 0x233010DE for an H100 SXM5")
            continue
        if bus_id is None:
            problems.add((*path, "pci", "bus_id"),
                         f"GPU {index} needs a PCI address such as \"0000:1a:00.0\"")
            continue
        vendor = device_id & 0xFFFF or NVIDIA
        subsystem = subsystem_id if subsystem_id is not None else vendor
        pcie = ov.pcie if ov and "pcie" in ov.model_fields_set else defaults.pcie
        bar1 = (ov.bar1_memory if ov and "bar1_memory" in ov.model_fields_set
                else defaults.bar1_memory).total_bytes or 256 * MIB
        gpus.append(_Gpu(
            index=index, bdf=bus_id, vendor=vendor, device=device_id >> 16,
            subsystem_vendor=subsystem & 0xFFFF or vendor, subsystem_device=subsystem >> 16,
            revision=revision,
            link=PcieLink(pcie.max_link_gen, pcie.max_link_width,
                          pcie.current_link_gen or pcie.max_link_gen,
                          pcie.current_link_width or pcie.max_link_width),
            bar1_size=_pow2_at_least(min(bar1, 1 << 40)),
            architecture=((ov.architecture if ov else None) or defaults.architecture or "")
            .lower(),
        ))
    return gpus


def _roots(profile: Profile, problems: Problems, members: dict[str, YamlPath],
           ) -> tuple[dict[str, tuple[str, int, str | None]], dict[str, str]]:
    """Roots as {id: (id, numa, cpu_affinity)} and placement {bdf: root id}."""
    roots: dict[str, tuple[str, int, str | None]] = {}
    placement: dict[str, str] = {}
    topo = profile.pcie_topology
    if topo is None or not topo.root_complexes:
        for bdf in members:
            rid = f"pci{bdf[:4]}:00"
            roots.setdefault(rid, (rid, 0, None))
            placement[bdf] = rid
        return roots, placement
    for ri, rc in enumerate(topo.root_complexes):
        rpath: YamlPath = ("pcie_topology", "root_complexes", ri)
        if rc.id in roots:
            problems.add((*rpath, "id"), f"root complex {rc.id} is declared twice")
            continue
        roots[rc.id] = (rc.id, rc.numa_node, rc.cpu_affinity)
        domain, root_bus = rc.id[3:7], int(rc.id[8:10], 16)
        for di, bdf in enumerate(rc.devices):
            dpath = (*rpath, "devices", di)
            if bdf in placement:
                problems.add(dpath, f"{bdf} is already listed under {placement[bdf]}; "
                             "a device sits under exactly one root complex")
                continue
            if bdf not in members:
                problems.add(dpath, f"{bdf} is not a GPU in devices[] nor an NVSwitch in "
                             "nvlink.switches[]; declare it there or remove it here")
                continue
            if bdf[:4] != domain or int(bdf[5:7], 16) < root_bus:
                problems.add(dpath, f"{bdf} cannot sit under {rc.id}: a root complex holds "
                             f"buses of its own domain from its own bus number up")
                continue
            placement[bdf] = rc.id
    declared = sorted(roots)
    for bdf in members:
        if bdf in placement:
            continue
        # The host bridge whose bus range covers the address, as the kernel would find it.
        covering = [r for r in declared if r[3:7] == bdf[:4] and r[8:10] <= bdf[5:7]]
        if covering:
            placement[bdf] = covering[-1]
        else:
            rid = f"pci{bdf[:4]}:{bdf[5:7]}"
            roots.setdefault(rid, (rid, -1, None))
            placement[bdf] = rid
    return roots, placement


class _BarAllocator:
    def __init__(self) -> None:
        self.next32 = 0x9000_0000
        self.next64 = 0x2000_0000_0000

    def take(self, index: int, size: int, is_64bit: bool, prefetchable: bool) -> Bar:
        if is_64bit:
            addr = -(-self.next64 // size) * size
            self.next64 = addr + size
        else:
            addr = -(-self.next32 // size) * size
            self.next32 = addr + size
        return Bar(index, addr, size, is_64bit, prefetchable)


def _place_hcas(count: int, gpus: list[_Gpu], placement: dict[str, str],
                used: set[tuple[int, int]], domain_roots: dict[str, list[int]],
                ) -> list[tuple[str, str, int]]:
    """(bdf, root, paired GPU index) for every HCA; see the module docstring."""
    out: list[tuple[str, str, int]] = []
    for i in range(count):
        gpu = gpus[i * len(gpus) // count]
        root = placement[gpu.bdf]
        domain, root_bus, gpu_bus = gpu.bdf[:4], int(root[8:10], 16), int(gpu.bdf[5:7], 16)
        starts = domain_roots[domain]
        end = next((b for b in starts if b > root_bus), 0x100)
        order = [*range(gpu_bus + 1, end), *range(root_bus + 1, gpu_bus)]
        slot = next(((bus, dev) for dev in range(32) for bus in order
                     if (bus, dev) not in used), None)
        if slot is None:
            raise ValueError(f"no free PCI slot left under {root} for HCA {i}")
        used.add(slot)
        out.append((f"{domain}:{slot[0]:02x}:{slot[1]:02x}.0", root, gpu.index))
    return out


def compile_profile(profile: Profile, lines: dict[YamlPath, int], filename: str,
                    options: Options) -> State:
    """Compile a validated profile into a State, or raise ``ProfileError`` naming every problem."""
    problems = Problems(filename, lines)
    gpus = _gpus(profile, problems)
    members: dict[str, YamlPath] = {}
    for gpu in gpus:
        if gpu.bdf in members:
            problems.add(("devices",), f"{gpu.bdf} is the bus_id of two GPUs; "
                         "every device needs its own PCI address")
        members[gpu.bdf] = ("devices", gpu.index)
    for si, sw in enumerate(profile.nvlink.switches):
        if sw.bdf in members:
            problems.add(("nvlink", "switches", si, "bdf"),
                         f"{sw.bdf} is already used by another device")
        members[sw.bdf] = ("nvlink", "switches", si)
    roots_decl, placement = _roots(profile, problems, members)
    problems.check()

    topo = profile.pcie_topology
    cores = topo.cores_per_numa if topo else 64
    root_cpus: dict[str, tuple[int, ...]] = {}
    for ri, (rid, numa, affinity) in enumerate(roots_decl.values()):
        if affinity:
            try:
                root_cpus[rid] = _parse_cpulist(affinity)
            except ValueError:
                problems.add(("pcie_topology", "root_complexes", ri, "cpu_affinity"),
                             f"expected a CPU list such as 0-55,112-167 (CPUs 0-{MAX_CPUS - 1}),"
                             f" got {affinity!r}")
        elif numa >= 0:
            root_cpus[rid] = tuple(range(numa * cores, (numa + 1) * cores))
    nr_cpus = max((max(c) + 1 for c in root_cpus.values() if c), default=cores)
    if nr_cpus > MAX_CPUS:
        problems.add(("pcie_topology", "cores_per_numa"),
                     f"the NUMA nodes and cores_per_numa make {nr_cpus} CPUs; no kernel runs "
                     f"more than {MAX_CPUS}: lower cores_per_numa or the roots' numa_node")
        problems.check()
    roots = tuple(sorted(
        (RootComplex(rid, numa, root_cpus.get(rid) or tuple(range(nr_cpus)))
         for rid, numa, _ in roots_decl.values()),
        key=lambda r: r.id))
    by_root = {r.id: r for r in roots}

    ib = profile.infiniband
    hca_count = 0
    if ib.enabled and options.infiniband:
        hca_count = ib.hca_count or len(gpus) * ib.hcas_per_gpu
        if hca_count == 0:
            problems.add(("infiniband", "hca_count"), "InfiniBand is enabled but there are 0 "
                         "HCAs; set hca_count or hcas_per_gpu >= 1, or enabled: false")
        elif hca_count * ib.ports_per_hca > ib_identity.SLOTS_PER_NODE:
            problems.add(("infiniband", "hca_count"),
                         f"{hca_count} HCAs x {ib.ports_per_hca} ports exceed the "
                         f"{ib_identity.SLOTS_PER_NODE} port identities a node has")
        per_hca = HCA_NODES + ib.ports_per_hca * (
            PORT_NODES + 3 * ib.gid_table_len + ib.pkey_table_len)
        if hca_count * per_hca > MAX_IB_NODES:
            problems.add(("infiniband", "gid_table_len"),
                         f"{hca_count} HCAs with {ib.ports_per_hca} port(s), {ib.gid_table_len} "
                         f"GIDs and {ib.pkey_table_len} P_Keys each would make about "
                         f"{hca_count * per_hca:,} files; at most {MAX_IB_NODES:,} are served. "
                         "Lower gid_table_len, pkey_table_len or the HCA count")
        for name in ib.traffic.errors_per_sec:
            if name not in IB_ERROR_COUNTERS:
                known = ", ".join(IB_ERROR_COUNTERS)
                problems.add(("infiniband", "traffic", "errors_per_sec", name),
                             f"not an error counter; expected one of {known}")
    problems.check()

    used = {(int(b[5:7], 16), int(b[8:10], 16)) for b in members}
    reserved_buses = {int(b[5:7], 16) for b in members}
    used |= {(bus, dev) for bus in reserved_buses for dev in range(32)}
    domain_roots: dict[str, list[int]] = {}
    for r in roots:
        bisect.insort(domain_roots.setdefault(r.id[3:7], []), int(r.id[8:10], 16))
    try:
        hca_slots = _place_hcas(hca_count, gpus, placement, used, domain_roots)
    except ValueError as exc:
        raise ProfileError(filename, [Problem("infiniband.hca_count", str(exc))]) from None

    functions = _functions(profile, gpus, placement, by_root, hca_slots, ib)
    hcas = _hcas(ib, hca_slots, options, filename) if hca_count else ()
    return State(
        generation=Generation(options.generation),
        source=filename,
        node_name=options.node_name,
        node_index=options.node_index,
        roots=roots,
        functions=functions,
        hcas=hcas,
        char_majors=_majors(profile, bool(hca_count), problems, filename),
        nr_cpus=nr_cpus,
        loaded_at=options.loaded_at,
        host=options.host,
        started_at=options.started_at,
        counter_quantum=options.counter_quantum,
    )


def _functions(profile: Profile, gpus: list[_Gpu], placement: dict[str, str],
               by_root: dict[str, RootComplex], hca_slots: list[tuple[str, str, int]],
               ib: InfiniBand) -> tuple[PciFunction, ...]:
    arch = gpus[0].architecture if gpus else ""
    entries: list[tuple[str, PciFunction]] = []
    bars = _BarAllocator()

    def function(bdf: str, root: str, **identity: Any) -> PciFunction:
        rc = by_root[root]
        return PciFunction(bdf=bdf, root=root, numa_node=rc.numa_node, cpus=rc.cpus, irq=0,
                           **identity)

    for gpu in gpus:
        entries.append((gpu.bdf, function(
            gpu.bdf, placement[gpu.bdf], kind="gpu", vendor=gpu.vendor, device=gpu.device,
            subsystem_vendor=gpu.subsystem_vendor, subsystem_device=gpu.subsystem_device,
            class_code=CLASS_3D, revision=gpu.revision, driver="nvidia", link=gpu.link,
            bars=(bars.take(0, 16 * MIB, False, False), bars.take(1, gpu.bar1_size, True, True),
                  bars.take(3, 32 * MIB, True, True)),
        )))
    for sw in profile.nvlink.switches:
        link = PcieLink(4, 2, 4, 2)  # NVSwitch management links are narrow
        entries.append((sw.bdf, function(
            sw.bdf, placement[sw.bdf], kind="nvswitch", vendor=NVIDIA,
            device=sw.device_id or NVSWITCH_DEVICE_IDS.get(arch, NVSWITCH_DEFAULT_DEVICE_ID),
            subsystem_vendor=NVIDIA, subsystem_device=0x0000, class_code=CLASS_BRIDGE_OTHER,
            revision=0xA1, driver="nvidia", link=link,
            bars=(bars.take(0, 32 * MIB, False, False),),
        )))
    hca_device = int(ib.hca_type[2:])
    sub = ib.subsystem_id if ib.subsystem_id is not None else MELLANOX
    for bdf, root, _ in hca_slots:
        gen = HCA_PCIE_GEN.get(hca_device, 5)
        entries.append((bdf, function(
            bdf, root, kind="hca", vendor=MELLANOX, device=hca_device,
            subsystem_vendor=sub & 0xFFFF or MELLANOX, subsystem_device=sub >> 16,
            class_code=CLASS_ETHERNET if ib.link_layer == "Ethernet" else CLASS_INFINIBAND,
            revision=0x00, driver="mlx5_core", link=PcieLink(gen, 16, gen, 16),
            bars=(bars.take(0, 32 * MIB, True, True),),
        )))
    entries.sort(key=lambda e: e[0])
    # Legacy INTx lines as a BIOS would route them: distinct, stable, in address order.
    return tuple(replace(fn, irq=32 + i) for i, (_, fn) in enumerate(entries))


def _hcas(ib: InfiniBand, slots: list[tuple[str, str, int]], options: Options,
          filename: str) -> tuple[Hca, ...]:
    count, ports = len(slots), ib.ports_per_hca
    try:
        ident = ib_identity.NodeIdentity.derive(
            options.node_name, options.node_index, ib.guid_prefix, count * ports)
    except ValueError as exc:
        raise ProfileError(filename, [Problem("infiniband", str(exc))]) from None
    t = ib.traffic
    traffic = Traffic(t.xmit_bytes_per_sec, t.rcv_bytes_per_sec, t.mean_packet_bytes,
                      t.multicast_fraction, t.xmit_wait_per_sec,
                      tuple(sorted(t.errors_per_sec.items())))
    hcas = []
    for i, (bdf, _, _) in enumerate(slots):
        port_list = tuple(
            IbPort(number=p, guid=ident.guid(i * ports + p - 1), lid=ident.lid(i * ports + p - 1),
                   sm_lid=ib_identity.SM_LID, state=ib.port_state, phys_state=ib.phys_state,
                   rate_gbps=ib.rate_gbps, link_layer=ib.link_layer,
                   umad_index=i * ports + p - 1, traffic=traffic)
            for p in range(1, ports + 1))
        node_guid = port_list[0].guid
        desc = ib.node_desc_template.replace("{node_name}", options.node_name)
        hcas.append(Hca(
            name=f"mlx5_{i}", index=i, bdf=bdf, node_guid=node_guid, sys_image_guid=node_guid,
            hca_type=ib.hca_type, fw_ver=ib.fw_version, hw_rev=ib.hw_rev, board_id=ib.board_id,
            node_desc=desc.replace("{idx}", str(i)), ports=port_list,
            gid_table_len=ib.gid_table_len, pkey_table_len=ib.pkey_table_len))
    return tuple(hcas)


def _majors(profile: Profile, ib: bool, problems: Problems, filename: str,
            ) -> tuple[CharMajor, ...]:
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
