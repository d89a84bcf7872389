"""The DRA driver's VFIO checks, as its kubelet plugin makes them before it passes a GPU
through (NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/vfio-device.go): the vfio_pci
module is a directory below /sys/module (``checkVfioPCIModuleLoaded``), /sys/kernel/iommu_groups
has an entry (``checkIommuEnabled``), and the GPU's driver is the base name of its ``driver``
link (``getDriver``). The device node it hands on is the kernel's for the GPU's IOMMU group,
``/dev/vfio/<group>``, or with the cdev interface ``/dev/vfio/devices/<vfio-dev entry>``.
Our own code, written to that logic."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class VfioView:
    module_loaded: bool
    iommu_enabled: bool
    driver: str | None
    group_node: str | None  # a character device, or None
    cdev_node: str | None


def _char(path: Path) -> str | None:
    try:
        return str(path) if stat.S_ISCHR(os.stat(path).st_mode) else None
    except FileNotFoundError:
        return None


def vfio_view(root: Path, bdf: str) -> VfioView:
    """``root``: a tree with the node's sys/ and dev/ (a mount's root, or / in a container)."""
    module = root / "sys/module/vfio_pci"
    groups = root / "sys/kernel/iommu_groups"
    device = root / "sys/bus/pci/devices" / bdf
    try:
        driver: str | None = os.path.basename(os.readlink(device / "driver"))
    except FileNotFoundError:
        driver = None
    group = os.path.basename(os.readlink(device / "iommu_group"))
    cdev = None
    if (device / "vfio-dev").is_dir():
        names = [n for n in os.listdir(device / "vfio-dev") if n.startswith("vfio")]
        cdev = _char(root / "dev/vfio/devices" / names[0]) if names else None
    return VfioView(module.is_dir(), groups.is_dir() and bool(os.listdir(groups)), driver,
                    _char(root / "dev/vfio" / group), cdev)
