"""PCI in a State: host bridges, functions (endpoints and bridges), their BARs and links."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mokkafs.model.nvml import GpuNvml

DeviceKind = Literal["gpu", "nvswitch", "hca", "bridge", "other"]  # other: a captured one
PortType = Literal["root", "upstream", "downstream"]


@dataclass(frozen=True, slots=True)
class Bar:
    """One PCI base address register: index 0-5, address, size, 64-bit and prefetchable flags."""

    index: int
    address: int
    size: int
    is_64bit: bool
    prefetchable: bool


# A link speed as the kernel prints it (current_link_speed, max_link_speed), by PCIe generation
LINK_SPEEDS = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
               5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}
LINK_GENERATIONS = {speed: gen for gen, speed in LINK_SPEEDS.items()}


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
class Sriov:
    """A physical function's SR-IOV capability (drivers/pci/iov.c): how many VFs it may have
    and has, where their routing IDs start (``offset``) and step (``stride``), their device
    ID, and whether new VFs are bound to the PF's driver. ``numvfs`` is what was written to
    ``sriov_numvfs`` (``mokkafs.writes``); ``probed``: whether autoprobe was on then.
    ``slot``: this PF's place among the node's PFs, which fixes its VFs' IOMMU groups and
    RDMA names whatever other PFs do (``mokkafs.model.sriov``)."""

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
class GpuInfo:
    """What the NVIDIA driver reports of a GPU (/proc/driver/nvidia/gpus/<bdf>/information)."""

    index: int
    minor: int
    uuid: str
    model: str
    vbios: str
    serial: str
    architecture: str
    nvml: GpuNvml = field(default_factory=GpuNvml)  # what only NVML says (surfaces/nvml.py)


@dataclass(frozen=True, slots=True)
class PciIdentity:
    """What a PCI function says it is, wherever it sits: its kind, its ids and class, and the
    driver bound to it."""

    kind: DeviceKind
    vendor: int
    device: int
    subsystem_vendor: int
    subsystem_device: int
    class_code: int
    revision: int
    driver: str


@dataclass(frozen=True, slots=True)
class PciFunction(PciIdentity):
    """One simulated PCI function (GPU, NVSwitch, IB HCA, or a bridge above them) as the
    kernel would expose it. ``path`` is its directory below the mount root
    (``sys/devices/pciDDDD:BB/<bridges>/<bdf>``); ``parent`` the bridge it sits below."""

    bdf: str
    root: str
    path: str
    parent: str | None
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
    # A PF's SR-IOV capability; a VF's PF and its index there (mokkafs.model.sriov)
    sriov: Sriov | None = None
    physfn: str | None = None
    vf_index: int = 0
    # Its ``driver_override`` (None: unset; the bytes written, as latin-1 text), and the
    # driver the profile bound it to once a write changed its binding (None: ``driver`` is
    # still the profile's; mokkafs.writes.drivers)
    driver_override: str | None = None
    native_driver: str | None = None
    # A function a capture kept as it was (mokkafs.profile.raw_pci): its attributes' bytes,
    # served verbatim with its ``config`` (``None``: every attribute is made from the fields)
    raw: tuple[tuple[str, bytes], ...] | None = None
    config: bytes = b""
