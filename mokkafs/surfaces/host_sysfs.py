"""Where the host's sysfs shows through the view (when the State has a host sysfs).

The simulated nodes own what they describe; everything else under ``sys/`` is the host's own
sysfs, read at request time (``mokkafs.fuse.passthrough``). The host's ``devices/pci*`` roots
are hidden: the simulated node's PCI hierarchy replaces the host's, as ``bus/pci`` does.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, Node


def nodes(state: State) -> Iterator[Node]:
    if not state.host.sysfs:
        return
    yield Dir("sys", merge="")
    yield Dir("sys/devices", merge="devices", hide=("pci*",))
    yield Dir("sys/bus", merge="bus")
    yield Dir("sys/class", merge="class")


SURFACE = stateless("host_sysfs", nodes, ("host",), ())  # the host's own, merged
