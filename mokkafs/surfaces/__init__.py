"""Surfaces: one module per simulated kernel surface, each a pure function of a State, each
defining its own record (``SURFACE``: name, nodes, State inputs; ``mokkafs.tree.assemble``).

``SURFACES`` lists them in the order a tree is built from them; ``ROOTS``, the places they
own, in that order (``mokkafs.tree.roots``: what the shim, CDI and the capture derive from).
"""

from __future__ import annotations

from typing import Any

from mokkafs.surfaces import (
    cpu,
    dmi,
    host_sysfs,
    imex,
    infiniband,
    iommu,
    kmsg,
    mig,
    modules,
    net,
    numa,
    nvidia_dev,
    nvml,
    nvswitch_proc,
    pci,
    pci_bus,
    proc_cpu_mem,
    proc_devices,
    proc_driver_nvidia,
    rdma_cm,
    sriov,
    vfio,
)
from mokkafs.tree.assemble import Surface
from mokkafs.tree.roots import Root

SURFACES: tuple[Surface[Any], ...] = (
    host_sysfs.SURFACE,
    pci.SURFACE,
    pci_bus.SURFACE,
    iommu.SURFACE,
    infiniband.SURFACE,
    rdma_cm.SURFACE,
    nvidia_dev.SURFACE,
    vfio.SURFACE,
    dmi.SURFACE,
    modules.SURFACE,
    proc_devices.SURFACE,
    proc_driver_nvidia.SURFACE,
    nvswitch_proc.SURFACE,
    mig.SURFACE,
    imex.SURFACE,
    cpu.SURFACE,
    numa.SURFACE,
    proc_cpu_mem.SURFACE,
    kmsg.SURFACE,
    sriov.SURFACE,
    net.SURFACE,
    nvml.SURFACE,
)

ROOTS: tuple[Root, ...] = tuple(root for surface in SURFACES for root in surface.roots)
