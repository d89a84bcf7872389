"""The kernel log as ``/dev/kmsg`` gives it (``dev/kmsg``): the records of
``mokkafs.faults.kernel_log``, a pure function of the State and the time. The host's own
records are not in it: a container given the view sees the view's log and nothing of the
host's (docs/kmsg.md). Readers' positions are the FUSE edge's (``mokkafs.fuse.stream``).
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.faults.kernel_log import Log
from mokkafs.state import State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import File, Node
from mokkafs.tree.roots import kernel
from mokkafs.tree.stream import Stream

PATH = "dev/kmsg"


def nodes(state: State) -> Iterator[Node]:
    yield File(PATH, b"", mode=0o444, stream=Stream(Log(state)))


SURFACE = stateless("kmsg", nodes, ("faults", "started_at", "driver", "kernel_log"),
                    (kernel(PATH),))
