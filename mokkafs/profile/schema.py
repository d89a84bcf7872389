"""Pydantic models of a hardware profile.

The format is nvml-mock's, read unchanged: the seven profiles nvml-mock ships load as they are.
Top-level keys are closed (a typo there is an error); inside sections, keys mokkafs does not use
(NVML telemetry, clocks, ECC, ...) are accepted and ignored, because they belong to other
consumers of the same file. mokkafs adds a few optional keys of its own, marked "mokkafs:" below.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from mokkafs.profile.raw_schema import MAX_RAW_FUNCTIONS, RawFunction
from mokkafs.profile.values import (
    MAX_GPUS,
    MAX_HCAS,
    MAX_NUMA_NODES,
    MAX_UPTIME,
    Bdf,
    Byte,
    ClosedSection,
    LinkLayer,
    OpenSection,
    PhysStateName,
    PortStateName,
    Rate,
    RootId,
    Text,
    Word16,
    Word32,
)
from mokkafs.state import FaultKind


class PciIds(OpenSection):
    device_id: Word32 | None = None  # (device << 16) | vendor, NVML's packing
    subsystem_id: Word32 | None = None  # (subdevice << 16) | subvendor
    bus_id: Bdf | None = None
    revision: Byte | None = None  # mokkafs: PCI revision id (default 0xa1)


class Pcie(OpenSection):
    max_link_gen: int = Field(default=4, ge=1, le=6)
    current_link_gen: int | None = Field(default=None, ge=1, le=6)
    max_link_width: Literal[1, 2, 4, 8, 16, 32] = 16
    current_link_width: Literal[1, 2, 4, 8, 16, 32] | None = None


class Memory(OpenSection):
    total_bytes: int | None = Field(default=None, ge=0, le=1 << 50)


class DeviceConfig(OpenSection):
    name: Text | None = None
    architecture: Text | None = None
    vbios_version: Text | None = None
    pci: PciIds = PciIds()
    pcie: Pcie = Pcie()
    bar1_memory: Memory = Memory()


class DeviceOverride(DeviceConfig):
    index: int = Field(ge=0, lt=MAX_GPUS)
    uuid: Text | None = None
    minor_number: int | None = Field(default=None, ge=0, le=255)
    serial: Text | None = None


class System(OpenSection):
    driver_version: Text | None = None
    num_devices: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    # mokkafs: which kernel module the driver is: the open one (Turing and newer's default
    # since 560) or the proprietary one (taints the kernel P, names itself differently)
    kernel_modules: Literal["open", "proprietary"] = "open"


class NvSwitch(OpenSection):
    bdf: Bdf
    uuid: Text | None = None
    device_id: Word16 | None = None  # mokkafs: PCI device id (default from the GPUs' architecture)


class NvLink(OpenSection):
    version: int | None = None
    switches: list[NvSwitch] = Field(default=[], max_length=MAX_GPUS)


class Traffic(ClosedSection):
    """mokkafs: the per-port traffic model counters follow (rates per second)."""

    xmit_bytes_per_sec: Rate = 12_500_000.0
    rcv_bytes_per_sec: Rate = 12_500_000.0
    mean_packet_bytes: float = Field(default=2048.0, ge=1, le=65536, allow_inf_nan=False)
    multicast_fraction: float = Field(default=0.001, ge=0, le=1, allow_inf_nan=False)
    xmit_wait_per_sec: Rate = 0.0
    # Error counters, e.g. {symbol_error: 0.01}; every counter not named stays 0.
    errors_per_sec: dict[str, Rate] = Field(default_factory=dict)
    # How long the ports have carried this traffic when the daemon starts: counters begin
    # where that much of it leaves them (a node up a day shows a day of counts), not at 0.
    uptime_seconds: float = Field(default=0.0, ge=0, le=MAX_UPTIME, allow_inf_nan=False)


class Hca(ClosedSection):
    """mokkafs: one HCA where the board has it (its function, and its RDMA device name)."""

    bus_id: Bdf
    name: Annotated[str, Field(pattern=r"^mlx5_\d{1,3}$")] | None = None
    # nvlink-management: an HGX B200's NVLink management port, whose PCI VPD says SW_MNG
    role: Literal["compute", "nvlink-management"] = "compute"


class InfiniBand(OpenSection):
    enabled: bool = False
    hca_type: str = "MT4129"
    fw_version: Text = "28.39.2048"
    hw_rev: Text = "0x0"
    board_id: Text = "MT_0000000838"
    node_desc_template: Text = "{node_name} mlx5_{idx}"
    link_layer: LinkLayer = (
        "InfiniBand"
    )
    rate_gbps: int = Field(default=400, gt=0, le=12 * 200)  # 12X HDR is the widest
    port_state: PortStateName = "ACTIVE"
    phys_state: PhysStateName = "LinkUp"
    hcas_per_gpu: int = Field(default=1, ge=0, le=8)
    hca_count: int = Field(default=0, ge=0, le=MAX_HCAS)
    guid_prefix: str = "a088c20300ab"
    # mokkafs extensions
    ports_per_hca: int = Field(default=1, ge=1, le=2)
    subsystem_id: Word32 | None = None  # (subdevice << 16) | subvendor of the HCA function
    gid_table_len: int = Field(default=8, ge=1, le=256)
    pkey_table_len: int = Field(default=8, ge=1, le=256)
    traffic: Traffic = Traffic()
    # The HCAs where the board has them (else hca_count / hcas_per_gpu place them beside the
    # GPUs), named mlx5_N in PCI order unless named here.
    devices: list[Hca] = Field(default=[], max_length=MAX_HCAS)
    # The MLNX_OFED/DOCA-OFED release the RDMA modules come from (their sysfs version); none:
    # the kernel's own modules, which carry no version.
    ofed_version: Text | None = None

    @field_validator("hca_type")
    @classmethod
    def _check_hca_type(cls, value: str) -> str:
        if not re.fullmatch(r"MT\d{4,5}", value) or int(value[2:]) > 0xFFFF:
            raise ValueError(
                f"expected a Mellanox part such as MT4129 (its number, at most 65535, is the "
                f"PCI device id), got {value!r}"
            )
        return value

    @field_validator("guid_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        digits = value.replace(":", "").lower()
        if not 6 <= len(digits) <= 16 or not re.fullmatch(r"[0-9a-f]+", digits):
            raise ValueError(
                f"expected at least 6 hex digits (an OUI such as a088c2), got {value!r}"
            )
        return digits


class Switch(ClosedSection):
    """mokkafs: a PCIe switch below a root complex's root port: the endpoints (GPUs, HCAs,
    NVSwitches) on its downstream ports."""

    devices: list[Bdf] = Field(min_length=1, max_length=32)


class RootComplex(OpenSection):
    id: RootId
    numa_node: int = Field(default=0, ge=-1, lt=MAX_NUMA_NODES)
    devices: list[Bdf] = Field(default=[], max_length=256)
    cpu_affinity: Text | None = None  # "0-55,112-167": the CPUs local to this root
    # mokkafs: the switches below this root; [] for none (every endpoint on a root port of
    # its own, as PCIe cards sit); absent: derived from the endpoints' bus numbers
    switches: list[Switch] | None = Field(default=None, max_length=32)


class PciId(ClosedSection):
    """mokkafs: a bridge's identity, packed like NVML's (``(device << 16) | vendor``)."""

    device_id: Word32
    subsystem_id: Word32 = 0


class PcieTopology(OpenSection):
    root_complexes: list[RootComplex] = Field(default=[], max_length=256)
    cores_per_numa: int = Field(default=64, ge=1, le=512)
    # mokkafs: the IOMMU: on (every function in an iommu_group) or off
    iommu: bool = True
    # mokkafs: what the root ports and switch ports are (default: a Sapphire Rapids root
    # port, a Broadcom PEX890xx Gen 5 switch)
    root_port: PciId = PciId(device_id=0x352A8086)
    switch: PciId = PciId(device_id=0xC0301000, subsystem_id=0x00001000)
    # mokkafs: the device number of a host bridge's first root port: 1 where device 0 of the
    # root bus is the host bridge itself (x86), 0 where it is not (Grace)
    first_root_port: int = Field(default=1, ge=0, le=31)


class Platform(ClosedSection):
    """mokkafs: what the machine says it is (DMI, /sys/class/dmi/id) and its CPU
    architecture. Serials and the UUID are made per node name and index."""

    sys_vendor: Text = "mokkafs"
    product_name: Text = "Simulated GPU node"
    product_version: Text = ""
    product_family: Text = ""
    product_sku: Text = ""
    board_vendor: Text = ""
    board_name: Text = ""
    board_version: Text = ""
    chassis_vendor: Text = ""
    chassis_type: int = Field(default=23, ge=1, le=0x24)  # 23: rack mount chassis
    chassis_version: Text = ""
    bios_vendor: Text = "American Megatrends International, LLC."
    bios_version: Text = "1.0"
    bios_date: Text = "01/01/2025"
    bios_release: Text = "5.27"
    serial_prefix: Annotated[str, Field(pattern=r"^[0-9A-Za-z-]{0,16}$")] = "MOKKA"
    arch: Literal["x86_64", "aarch64"] = "x86_64"


class Machine(ClosedSection):
    """mokkafs: the CPUs and NUMA nodes (/sys/devices/system/{cpu,node}, /proc/cpuinfo,
    /proc/meminfo; docs/profiles.md). Absent: the shape the root complexes' ``numa_node`` and
    ``cpu_affinity`` imply. CPUs are numbered as Linux enumerates them: every package's first
    threads, then every package's second threads; package N is NUMA node N."""

    sockets: int = Field(ge=1, le=MAX_NUMA_NODES)
    cores_per_socket: int = Field(ge=1, le=512)
    threads_per_core: Literal[1, 2, 4] = 1
    memory_per_socket_gib: int = Field(default=512, ge=1, le=1 << 16)
    # the SLIT distance between two packages' nodes (a node's own is 10)
    remote_distance: int = Field(default=21, ge=11, le=254)
    # Grace: each GPU's memory is a NUMA node of its own, without CPUs, numbered
    # sockets + 8 * GPU index (the driver keeps 8 per GPU for MIG)
    gpu_memory_nodes: bool = False
    gpu_memory_gib: int = Field(default=186, ge=1, le=4096)
    gpu_distance: int = Field(default=80, ge=11, le=254)  # from its own package's node
    gpu_remote_distance: int = Field(default=120, ge=11, le=254)
    cpu_model: Text | None = None  # x86: the model name; default per architecture
    cpu_mhz: float = Field(default=2000.0, gt=0, le=10000)
    # whether the view serves the machine (false: the host's CPUs and nodes show through
    # where its sysfs does, and PCI functions' local_cpulist no longer matches them)
    show: bool = True


class Node(ClosedSection):
    """mokkafs: node identity; both usually come from the command line instead."""

    name: Text | None = None
    index: int | None = Field(default=None, ge=0, lt=1 << 32)


class ProcDevices(ClosedSection):
    """mokkafs: the character majors the simulated drivers register in /proc/devices."""

    nvidia_frontend: int = Field(default=195, ge=1, le=511)  # CHRDEV_MAJOR_MAX is 512
    nvidia_uvm: int = Field(default=510, ge=1, le=511)
    nvidia_caps: int = Field(default=236, ge=1, le=511)
    nvidia_caps_imex_channels: int = Field(default=235, ge=1, le=511)
    # registered only where NVSwitches are on the node's bus (linux_nvswitch.c, dynamic)
    nvidia_nvswitch: int = Field(default=509, ge=1, le=511)
    infiniband: int = Field(default=231, ge=1, le=511)


Seconds = Annotated[float, Field(ge=0, le=10 * 365 * 86400, allow_inf_nan=False)]
MAX_FAULTS = 256  # in a profile, and on a node (the profile's and the control socket's)
MAX_FAULTS_PER_APPLY = 64  # in one `mokkafs fault apply`


class Fault(ClosedSection):
    """mokkafs: a fault the node suffers on purpose (docs/faults.md). ``target`` names a port
    (``mlx5_0/1``), an HCA (``mlx5_0``) or a PCI function (``0000:1b:00.0``, ``gpu0``);
    timing is relative to when the fault is first applied."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    kind: FaultKind
    target: Annotated[str, Field(min_length=1, max_length=64)]
    after: Seconds = 0.0
    duration: Seconds | None = Field(default=None, alias="for", gt=0)
    every: Seconds | None = Field(default=None, gt=0)
    count: int | None = Field(default=None, ge=1, le=10_000)
    fraction: float = Field(default=1.0, ge=0, le=1)
    # ib-port-down, ib-port-flap: the cable is out (phys_state Polling, not Disabled)
    cable: bool = False
    # ib-errors: counters/ and hw_counters/ names and how many per second each grows
    rates: dict[str, Rate] = Field(default={}, max_length=64)
    # ib-degraded: the lanes the link trained to, and its total rate (default: the same
    # speed per lane); pcie-degraded: the generation and width the link trained to
    width: Literal[1, 2, 4, 8, 12, 16, 32] | None = None
    rate_gbps: int | None = Field(default=None, ge=1, le=3200)
    gen: int | None = Field(default=None, ge=1, le=6)


class FaultFile(ClosedSection):
    """What ``mokkafs fault apply FILE`` reads: a ``faults:`` list, as in a profile."""

    faults: list[Fault] = Field(max_length=MAX_FAULTS_PER_APPLY)


class Profile(ClosedSection):
    """A whole profile document. Unknown top-level keys are errors."""

    version: str | int | float | None = None
    description: Text | None = None  # mokkafs: one line shown by `mokkafs profiles`
    system: System = System()
    device_defaults: DeviceConfig = DeviceConfig()
    devices: list[DeviceOverride] = Field(default=[], max_length=MAX_GPUS)
    nvlink: NvLink = NvLink()
    infiniband: InfiniBand = InfiniBand()
    pcie_topology: PcieTopology | None = None
    dynamic_metrics_defaults: dict[str, Any] | None = None  # nvml-mock Helm-only; ignored
    node: Node = Node()
    proc_devices: ProcDevices = ProcDevices()
    platform: Platform = Platform()  # mokkafs
    machine: Machine | None = None  # mokkafs
    faults: list[Fault] = Field(default=[], max_length=MAX_FAULTS)  # mokkafs
    # mokkafs: functions kept as a capture found them (mokkafs.profile.raw_schema)
    pci_functions: list[RawFunction] = Field(default=[], max_length=MAX_RAW_FUNCTIONS)
