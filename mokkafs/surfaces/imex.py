"""IMEX channels: ``dev/nvidia-caps-imex-channels/channel<N>`` for each channel that exists
(``State.imex``: channel 0 when the driver creates it at load, ``NVreg_CreateImexChannel0=1``,
and the channels a profile names), on the ``nvidia-caps-imex-channels`` major of
``proc/devices``, minor ``N``, mode 0666 (what the DRA driver's compute-domain plugin gives
containers, ``cmd/compute-domain-kubelet-plugin/nvlib.go``).

The device plugin's IMEX code (``internal/imex/imex.go``) stats channel 0 and hands it to
containers when it is a character device; the DRA driver enumerates ``ImexChannelCount``
channels of ``params`` on that major. ``proc/driver/nvidia/capabilities/fabric-imex-mgmt``
(the IMEX daemon's capability) is served with the driver's other capabilities.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.surfaces.nvidia_dev import MODE_ALL, DevNode, char_nodes
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Node
from mokkafs.tree.roots import kernel

DIR = "dev/nvidia-caps-imex-channels"


def device_numbers(state: State) -> list[DevNode]:
    if "nvidia" not in state.pci_drivers:
        return []
    channels = state.imex.existing()
    if not channels:
        return []
    major = state.major("nvidia-caps-imex-channels")
    return [(f"/{DIR}/channel{n}", major, n, MODE_ALL) for n in channels]


def nodes(state: State) -> Iterator[Node]:
    return char_nodes(DIR, device_numbers(state))


SURFACE = stateless("imex", nodes, ("imex", "char_majors", "pci_drivers"), (kernel(DIR),))
