"""The State: everything the surfaces may look at, immutable, with its generation.

A profile compiles to exactly one State (``mokkafs.profile.compile``). Surfaces are pure
functions of a State (and, for dynamic files, of the time), so two equal States give
byte-identical views. Nothing here does I/O; host facts the view needs (the host's own
/proc/devices) are captured by the source and carried in ``HostFacts``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, NewType

Generation = NewType("Generation", int)

DeviceKind = Literal["gpu", "nvswitch", "hca", "bridge"]
PortType = Literal["root", "upstream", "downstream"]


@dataclass(frozen=True, slots=True)
class Bar:
    """One PCI base address register: index 0-5, address, size, 64-bit and prefetchable flags."""

    index: int
    address: int
    size: int
    is_64bit: bool
    prefetchable: bool


@dataclass(frozen=True, slots=True)
class PcieLink:
    max_gen: int
    max_width: int
    current_gen: int
    current_width: int


@dataclass(frozen=True, slots=True)
class RootComplex:
    """A PCI host bridge ``pciDDDD:BB`` and the NUMA node and CPUs local to it."""

    id: str
    numa_node: int
    cpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Bridge:
    """A PCI-to-PCI bridge's own facts: which port it is, the buses behind it, the address
    windows it forwards ((base, limit) or None), and its link's port number. A root or
    downstream port whose slot holds nothing (an HCA the node serves without InfiniBand) is
    not ``occupied``: no presence, link down."""

    port: PortType
    secondary: int
    subordinate: int
    port_number: int
    memory: tuple[int, int] | None = None  # 32-bit non-prefetchable
    prefetchable: tuple[int, int] | None = None  # 64-bit prefetchable
    occupied: bool = True


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """What the NVIDIA driver reports of a GPU (/proc/driver/nvidia/gpus/<bdf>/information)."""

    index: int
    minor: int
    uuid: str
    model: str
    vbios: str
    serial: str
    architecture: str


@dataclass(frozen=True, slots=True)
class Sriov:
    """A physical function's SR-IOV capability (drivers/pci/iov.c): how many VFs it may have
    and has, where their routing IDs start (``offset``) and step (``stride``), their device
    ID, and whether new VFs are bound to the PF's driver. ``numvfs`` is what was written to
    ``sriov_numvfs`` (``mokkafs.writes``); ``probed``: whether autoprobe was on then.
    ``slot``: this PF's place among the node's PFs, which fixes its VFs' IOMMU groups and
    RDMA names whatever other PFs do (``mokkafs.profile.sriov``)."""

    total: int
    offset: int
    stride: int
    vf_device: int
    total_msix: int
    slot: int
    numvfs: int = 0
    autoprobe: bool = True
    probed: bool = True


@dataclass(frozen=True, slots=True)
class PciFunction:
    """One simulated PCI function (GPU, NVSwitch, IB HCA, or a bridge above them) as the
    kernel would expose it. ``path`` is its directory below the mount root
    (``sys/devices/pciDDDD:BB/<bridges>/<bdf>``); ``parent`` the bridge it sits below."""

    bdf: str
    root: str
    path: str
    parent: str | None
    kind: DeviceKind
    vendor: int
    device: int
    subsystem_vendor: int
    subsystem_device: int
    class_code: int
    revision: int
    driver: str
    irq: int
    numa_node: int
    cpus: tuple[int, ...]
    link: PcieLink
    bars: tuple[Bar, ...]
    bridge: Bridge | None = None
    iommu_group: int | None = None
    gpu: GpuInfo | None = None
    # Fell off the bus: config reads complete with all ones (a fault, mokkafs.faults)
    lost: bool = False
    # Its PCI Vital Product Data (mokkafs.profile.vpd), empty where it has none
    vpd: bytes = b""
    # A PF's SR-IOV capability; a VF's PF and its index there (mokkafs.profile.sriov)
    sriov: Sriov | None = None
    physfn: str | None = None
    vf_index: int = 0


@dataclass(frozen=True, slots=True)
class Windows:
    """What faults do to a port's counters, in seconds since the node started (``end`` may
    be ``math.inf``): the link is down over each of ``pauses`` (nothing moves; ``link_downed``
    counts each start), and each of ``bursts`` adds ``rate`` per second to one counter."""

    pauses: tuple[tuple[float, float], ...] = ()
    bursts: tuple[tuple[str, float, float, float], ...] = ()  # (counter, rate, start, end)


@dataclass(frozen=True, slots=True)
class Traffic:
    """Per-port rates the counters follow; see ``mokkafs.surfaces.ib_traffic``.

    ``origin`` and ``base`` make counters continue across a change of rates or faults: from
    ``origin`` seconds on, a counter is its ``base`` value plus what the rates add since then,
    less what ``windows`` pause, plus what they burst. A negative ``origin`` is traffic from
    before the daemon started (the profile's ``uptime_seconds``).
    """

    xmit_bytes_per_sec: float
    rcv_bytes_per_sec: float
    mean_packet_bytes: float
    multicast_fraction: float
    xmit_wait_per_sec: float
    errors_per_sec: tuple[tuple[str, float], ...]
    origin: float = 0.0
    base: tuple[tuple[str, int], ...] = ()
    windows: Windows = Windows()

    def same_rates(self, other: Traffic) -> bool:
        return (self.xmit_bytes_per_sec, self.rcv_bytes_per_sec, self.mean_packet_bytes,
                self.multicast_fraction, self.xmit_wait_per_sec, self.errors_per_sec) == (
            other.xmit_bytes_per_sec, other.rcv_bytes_per_sec, other.mean_packet_bytes,
            other.multicast_fraction, other.xmit_wait_per_sec, other.errors_per_sec)


@dataclass(frozen=True, slots=True)
class IbPort:
    number: int
    guid: int
    lid: int
    sm_lid: int
    state: str
    phys_state: str
    rate_gbps: int
    link_layer: str
    umad_index: int
    traffic: Traffic
    width: int = 4  # lanes the link trained to


@dataclass(frozen=True, slots=True)
class Hca:
    """One RDMA device ``mlx5_N`` bound to the PCI function at ``bdf``."""

    name: str
    index: int
    bdf: str
    node_guid: int
    sys_image_guid: int
    hca_type: str
    fw_ver: str
    hw_rev: str
    board_id: str
    node_desc: str
    ports: tuple[IbPort, ...]
    gid_table_len: int
    pkey_table_len: int


@dataclass(frozen=True, slots=True)
class CharMajor:
    major: int
    name: str


@dataclass(frozen=True, slots=True)
class Platform:
    """What the machine says it is: its DMI identity (serials and UUID are this node's own)
    and its CPU architecture."""

    sys_vendor: str
    product_name: str
    product_version: str
    product_family: str
    product_sku: str
    product_serial: str
    product_uuid: str
    board_vendor: str
    board_name: str
    board_version: str
    board_serial: str
    chassis_vendor: str
    chassis_type: int
    chassis_version: str
    chassis_serial: str
    bios_vendor: str
    bios_version: str
    bios_date: str
    bios_release: str
    arch: str


@dataclass(frozen=True, slots=True)
class Driver:
    """The drivers loaded: the NVIDIA driver's version and which kernel module it is, and
    the OFED release of the RDMA stack (None: the kernel's own modules)."""

    version: str
    kernel_modules: str  # "open" or "proprietary"
    ofed_version: str | None


FaultKind = Literal["ib-port-down", "ib-port-flap", "ib-errors", "ib-degraded",
                    "pcie-degraded", "gpu-lost", "gpu-removed", "hca-removed"]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault, its target resolved (``ports``: (HCA, port) pairs; ``bdf``: a PCI function;
    ``hca``: an RDMA device) and its timing in seconds from ``origin``, the daemon clock's
    reading when it was first applied (None until then). ``selected``: whether this node is
    among the ``fraction`` the fault picks. See docs/faults.md and ``mokkafs.faults``."""

    name: str
    kind: FaultKind
    target: str
    source: Literal["profile", "control"]
    selected: bool = True
    ports: tuple[tuple[str, int], ...] = ()
    bdf: str | None = None
    hca: str | None = None
    after: float = 0.0
    duration: float | None = None
    every: float | None = None
    count: int | None = None
    cable: bool = False
    rates: tuple[tuple[str, float], ...] = ()
    width: int | None = None
    rate_gbps: int | None = None
    gen: int | None = None
    revision: int = 0  # how many times before the control socket applied it: each is anew
    restored: bool = False  # applied at run time before the daemon restarted (a state file)
    origin: float | None = None

    def definition(self) -> FaultSpec:
        """Everything but when it was applied: what decides whether it is the same fault."""
        return replace(self, origin=None)


@dataclass(frozen=True, slots=True)
class Cpu:
    """One logical CPU: the package (socket) and core it is a thread of, and its NUMA node."""

    id: int
    package: int
    core: int
    node: int


@dataclass(frozen=True, slots=True)
class NumaNode:
    """A NUMA node: its CPUs (none for a GPU's memory), its memory, its SLIT row (the
    distance to every node of ``Machine.nodes``, in their order) and, for a GPU memory node,
    the GPU whose memory it is."""

    id: int
    cpus: tuple[int, ...]
    memory_kib: int
    distance: tuple[int, ...]
    gpu: str | None = None


@dataclass(frozen=True, slots=True)
class Cache:
    """One cache each CPU sees (``cache/index<N>``): shared by a core's threads or by its
    whole package."""

    level: int
    type: Literal["Data", "Instruction", "Unified"]
    size_kib: int
    ways: int
    scope: Literal["core", "package"]
    line: int = 64


@dataclass(frozen=True, slots=True)
class CpuModel:
    """What a CPU says it is. x86: vendor_id, cpu family, model, stepping; aarch64: the
    MIDR's implementer (``vendor``), architecture (``family``), part (``model``) and
    revision (``stepping``). ``flags``: its features, space-separated."""

    name: str
    vendor: str
    family: int
    model: int
    stepping: int
    flags: str


@dataclass(frozen=True, slots=True)
class Machine:
    """The CPUs, NUMA nodes and caches of the node, as ``/sys/devices/system/{cpu,node}``
    and ``/proc/{cpuinfo,meminfo}`` show them. ``shown``: whether the view serves them (else
    the host's show through, where the host's sysfs does)."""

    cpus: tuple[Cpu, ...]
    nodes: tuple[NumaNode, ...]
    caches: tuple[Cache, ...]
    model: CpuModel
    mhz: float
    shown: bool = True

    def node(self, nid: int) -> NumaNode:
        for node in self.nodes:
            if node.id == nid:
                return node
        raise KeyError(nid)



@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host contributes to the view, captured at load time by the source."""

    proc_devices: str = "Character devices:\n\nBlock devices:\n"
    proc_modules: str = ""  # the host's /proc/modules ("" where the kernel has none)
    # Whether the host's sysfs shows through beneath the simulated nodes: a container given
    # the view as its /sys keeps its CPU topology, cgroups, DMI and its own interfaces.
    sysfs: bool = False


@dataclass(frozen=True, slots=True)
class State:
    """One desired node. ``generation`` grows by one with every successful load."""

    generation: Generation
    source: str
    node_name: str
    node_index: int | None
    roots: tuple[RootComplex, ...]
    functions: tuple[PciFunction, ...]
    hcas: tuple[Hca, ...]
    char_majors: tuple[CharMajor, ...]
    nr_cpus: int  # len(machine.cpus): the width of every CPU mask
    loaded_at: float
    platform: Platform
    driver: Driver
    # What the profile loads, whatever faults remove later (a removed function is unbound
    # from its driver; the module stays): the PCI drivers its functions use, and whether the
    # RDMA stack (ib_core, mlx5, rdma_cm) serves its HCAs.
    pci_drivers: tuple[str, ...]
    rdma_loaded: bool
    machine: Machine
    iommu: bool = True
    host: HostFacts = field(default_factory=HostFacts)
    # Counters are a function of time since the node started (a time.monotonic() value),
    # quantised to ``counter_quantum`` seconds (0 = exact at every read).
    started_at: float = 0.0
    counter_quantum: float = 0.1
    faults: tuple[FaultSpec, ...] = ()

    def major(self, name: str) -> int:
        """The character major the named driver registered (KeyError when none did)."""
        for major in self.char_majors:
            if major.name == name:
                return major.major
        raise KeyError(name)

    def function(self, bdf: str) -> PciFunction:
        for fn in self.functions:
            if fn.bdf == bdf:
                return fn
        raise KeyError(bdf)

    def gpus(self) -> tuple[PciFunction, ...]:
        return tuple(fn for fn in self.functions if fn.kind == "gpu")


# mlx5's per-port hw_counters/ (drivers/infiniband/hw/mlx5/counters.c), 0 unless a fault
# makes one grow.
IB_HW_COUNTERS = (
    "duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "out_of_buffer",
    "out_of_sequence", "packet_seq_err", "req_cqe_error", "req_cqe_flush_error",
    "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
    "resp_cqe_flush_error", "resp_local_length_error", "resp_remote_access_errors",
    "rnr_nak_retry_err", "rx_atomic_requests", "rx_read_requests", "rx_write_requests",
)

# The port error counters a traffic model may drive (all others of counters/ stay 0).
IB_ERROR_COUNTERS = (
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_constraint_errors",
    "port_rcv_discards",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_discards",
    "symbol_error",
)
