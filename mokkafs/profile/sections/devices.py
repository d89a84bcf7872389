"""The GPUs and NVSwitches of a profile: the device defaults, each device's overrides, the
system and NVLink sections."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mokkafs.model.nvlink import MAX_LINKS
from mokkafs.profile.imex import ImexSection
from mokkafs.profile.mig import Mig
from mokkafs.profile.sections.nvml import CudaVersion, NvmlKeys
from mokkafs.profile.values import (
    MAX_GPUS,
    Bdf,
    Byte,
    OpenSection,
    Text,
    Word16,
    Word32,
)


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


class DeviceConfig(NvmlKeys):  # with nvml-mock's keys for NVML (sections/nvml.py)
    name: Text | None = None
    architecture: Text | None = None
    vbios_version: Text | None = None
    pci: PciIds = PciIds()
    pcie: Pcie = Pcie()
    bar1_memory: Memory = Memory()
    mig: Mig | None = None  # nvml-mock's MIG block (mokkafs.profile.mig)


class DeviceOverride(DeviceConfig):
    index: int = Field(ge=0, lt=MAX_GPUS)
    uuid: Text | None = None
    minor_number: int | None = Field(default=None, ge=0, le=255)
    serial: Text | None = None


class System(OpenSection):
    driver_version: Text | None = None
    cuda_version: CudaVersion | None = None  # "12.4": what NVML says the driver supports
    num_devices: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    # mokkafs: which kernel module the driver is: the open one (Turing and newer's default
    # since 560) or the proprietary one (taints the kernel P, names itself differently)
    kernel_modules: Literal["open", "proprietary"] = "open"
    # mokkafs: whether vfio-pci is loaded (a passthrough node: the GPU operator's vfio-manager
    # or the DRA driver loads it); a stock DGX OS node does not (docs/writes.md)
    vfio_pci: bool = False
    # mokkafs: the driver's IMEX parameters and channels (mokkafs.profile.imex)
    imex: ImexSection = ImexSection()


class NvSwitch(OpenSection):
    bdf: Bdf
    uuid: Text | None = None
    device_id: Word16 | None = None  # mokkafs: PCI device id (default from the GPUs' architecture)


class NvLink(OpenSection):
    version: int | None = Field(default=None, ge=1, le=6)
    links_per_gpu: int | None = Field(default=None, ge=1, le=MAX_LINKS)  # nvml-mock's key
    switches: list[NvSwitch] = Field(default=[], max_length=MAX_GPUS)
