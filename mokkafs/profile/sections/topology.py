"""The ``pcie_topology:`` section of a profile (mokkafs): host bridges, switches and the ids
of their ports."""

from __future__ import annotations

from pydantic import Field

from mokkafs.profile.values import (
    MAX_NUMA_NODES,
    Bdf,
    ClosedSection,
    OpenSection,
    RootId,
    Text,
    Word32,
)


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
    # mokkafs: what this root's ports are, where they differ from pcie_topology.root_port
    root_port: PciId | None = None


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
