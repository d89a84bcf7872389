"""What a profile says of the machine around the devices (mokkafs): its DMI identity, CPUs
and NUMA nodes, the node's place in its fleet, and the drivers' character majors."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from mokkafs.profile.values import (
    MAX_NUMA_NODES,
    ClosedSection,
    Text,
)


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
    # registered only where vfio-pci is loaded (drivers/vfio: dynamic, as nvidia-uvm's)
    vfio: int = Field(default=508, ge=1, le=511)
    vfio_dev: int = Field(default=507, ge=1, le=511)
