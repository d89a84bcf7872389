"""What the node says it is and runs: its DMI identity, its drivers and their character
majors."""

from __future__ import annotations

from dataclasses import dataclass


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
    the OFED release of the RDMA stack (None: the kernel's own modules). ``cuda_version``:
    the CUDA version the profile says the driver supports, as NVML spells it (12.4: 12040);
    None: the library derives it from the driver's branch."""

    version: str
    kernel_modules: str  # "open" or "proprietary"
    ofed_version: str | None
    cuda_version: int | None = None
