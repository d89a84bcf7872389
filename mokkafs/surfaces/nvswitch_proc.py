"""The nvswitch half of nvidia.ko's procfs: ``proc/driver/nvidia-nvswitch/`` (NVIDIA/
open-gpu-kernel-modules ``kernel-open/nvidia/procfs_nvswitch.c``; ``linux_nvswitch.c``
calls ``nvswitch_procfs_device_add`` from its PCI probe).

- ``permissions``: ``DeviceFileMode: <mode in decimal>``, the mode nvidia-modprobe gives
  ``/dev/nvidia-nvswitch*`` (the nodes of mokkafs.surfaces.nvidia_dev, one definition);
- ``devices/``: made when the module loads, so present (and empty) on a node without
  NVSwitches, as on rack-scale compute trays; below it one ``<bdf>/`` per NVSwitch the
  driver probed, in bus order, whose index is the ``N`` of ``/dev/nvidia-nvswitch<N>``;
- ``devices/<bdf>/information``: ``BIOS Version: `` and the switch BIOS version, as
  ``nv_procfs_read_device_info`` prints it (five two-digit hex fields).

Fabric Manager's start condition (``ConditionDirectoryNotEmpty``) and the DRA driver's
fabric detection read ``devices/`` (docs/surfaces.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.surfaces.nvidia_dev import MODE_NVSWITCH, nvswitches
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node
from mokkafs.tree.roots import kernel

NVSWITCH = "proc/driver/nvidia-nvswitch"
# A fixed switch BIOS (bios_ver 0x9610550001 as the driver prints it); no profile sets it
BIOS_VERSION = "96.10.55.00.01"


def nodes(state: State) -> Iterator[Node]:
    if "nvidia" not in state.pci_drivers:
        return
    yield Dir(NVSWITCH)
    yield File(f"{NVSWITCH}/permissions", f"DeviceFileMode: {MODE_NVSWITCH}\n".encode())
    yield Dir(f"{NVSWITCH}/devices")
    for bdf in nvswitches(state):
        d = f"{NVSWITCH}/devices/{bdf}"
        yield Dir(d)
        yield File(f"{d}/information", f"BIOS Version: {BIOS_VERSION}\n".encode())


SURFACE = stateless("nvswitch_proc", nodes, ("functions", "pci_drivers"), (kernel(NVSWITCH),))
