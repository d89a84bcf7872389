"""The MIG instances of the GPUs booted in MIG mode (``State.mig``), as the NVIDIA driver's
capability code shows them (open-gpu-kernel-modules ``kernel-open/nvidia/nv-caps.c``):

- ``proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/access`` for each GPU instance and
  ``…/gi<G>/ci<C>/access`` for each of its compute instances, ``N`` the GPU's device minor:
  ``DeviceFileMinor`` (the minor ``proc/driver/nvidia-caps/mig-minors`` gives that path),
  ``DeviceFileMode: 292`` (0444) and ``DeviceFileModify: 1``;
- ``dev/nvidia-caps/nvidia-cap<minor>`` for each, on the ``nvidia-caps`` major, mode 0444.

The device plugin maps instances through mig-minors (``internal/mig/mig.go``), the DRA driver
reads the access files (``cmd/gpu-kubelet-plugin/cdi.go``, ``GetDevNodesForMigDevice``); both
find the same minors here. A GPU a fault removed takes its instances with it. A layout is part
of one State, so a swap replaces every instance at once: no view holds a compute instance
whose GPU instance is gone.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.model.mig import MigGpu
from mokkafs.model.mig_tables import MAX_CIS
from mokkafs.state import State
from mokkafs.surfaces.nvidia_dev import CAPS_DIR, DevNode
from mokkafs.surfaces.proc_driver_nvidia import (
    DRIVER,
    FIRST_GPU_MINOR,
    MODE_ALL_READ,
    PER_GPU,
    capability,
)
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import CharDevice, Dir, File, Node

CAPABILITIES = f"{DRIVER}/capabilities"


def gi_minor(gpu: int, gi: int) -> int:
    """The minor of ``gpu<gpu>/gi<gi>/access`` in mig-minors (nv-caps.c's table)."""
    return FIRST_GPU_MINOR + gpu * PER_GPU + gi * (1 + MAX_CIS)


def ci_minor(gpu: int, gi: int, ci: int) -> int:
    return gi_minor(gpu, gi) + 1 + ci


def partitioned(state: State) -> list[MigGpu]:
    """The MIG GPUs the view shows: those whose function is still on the bus's list, bound
    to the driver."""
    if "nvidia" not in state.pci_drivers:
        return []
    present = {fn.bdf for fn in state.driven_gpus()}
    return [gpu for gpu in state.mig if gpu.bdf in present]


def instance_paths(gpu: MigGpu) -> Iterator[tuple[str, int]]:
    """(capability path below capabilities/, minor) of each instance, GI before its CIs."""
    for gi in gpu.instances:
        yield f"gpu{gpu.minor}/mig/gi{gi.id}/access", gi_minor(gpu.minor, gi.id)
        for ci in gi.compute:
            yield (f"gpu{gpu.minor}/mig/gi{gi.id}/ci{ci.id}/access",
                   ci_minor(gpu.minor, gi.id, ci.id))


def device_numbers(state: State) -> list[DevNode]:
    """(/dev path, major, minor, mode) of every instance's ``nvidia-cap<minor>``."""
    gpus = partitioned(state)
    if not gpus:
        return []
    caps = state.major("nvidia-caps")
    return [(f"/{CAPS_DIR}/nvidia-cap{minor}", caps, minor, MODE_ALL_READ)
            for gpu in gpus for _, minor in instance_paths(gpu)]


def nodes(state: State) -> Iterator[Node]:
    for gpu in partitioned(state):
        base = f"{CAPABILITIES}/gpu{gpu.minor}"
        yield Dir(base)
        yield Dir(f"{base}/mig")
        for gi in gpu.instances:
            yield Dir(f"{base}/mig/gi{gi.id}")
            for ci in gi.compute:
                yield Dir(f"{base}/mig/gi{gi.id}/ci{ci.id}")
        for path, minor in instance_paths(gpu):
            yield File(f"{CAPABILITIES}/{path}", capability(minor, MODE_ALL_READ).encode())
    for path, major, minor, mode in device_numbers(state):
        yield CharDevice(path.lstrip("/"), major, minor, mode)


# (below the driver's proc/driver/nvidia and dev/nvidia-caps: no place of its own)
SURFACE = stateless("mig", nodes, ("mig", "functions", "char_majors", "pci_drivers"), ())
