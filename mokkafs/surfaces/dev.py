"""Every character device the view names below ``dev/``: the RDMA stack's
(``infiniband.device_numbers``, in the mode ``CharDevice`` gives them) and the NVIDIA driver's
(``nvidia_dev.device_numbers``), with the MIG instances' and IMEX channels' (``mig``,
``imex``), and VFIO's (``vfio``). The CDI spec's device nodes and ``--host-dev`` are made from
this list, so they and the view agree."""

from __future__ import annotations

from mokkafs.state import State
from mokkafs.surfaces import imex, infiniband, mig, nvidia_dev, vfio
from mokkafs.surfaces.nvidia_dev import MODE_ALL, DevNode


def char_devices(state: State) -> list[DevNode]:
    """(/dev path, major, minor, mode) of each node, RDMA's first."""
    ib = [(path, major, minor, MODE_ALL) for path, major, minor
          in infiniband.device_numbers(state)]
    return ib + nvidia_dev.device_numbers(state) + mig.device_numbers(state) + \
        imex.device_numbers(state) + vfio.device_numbers(state)
