"""Facts read from the host that the view includes (the only host I/O surfaces depend on)."""

from __future__ import annotations

import socket
from pathlib import Path

from mokkafs.state import HostFacts


def read_host_facts(proc: Path = Path("/proc"), sysfs: bool = False) -> HostFacts:
    """The host's /proc/devices, and whether its sysfs shows through."""
    try:
        return HostFacts(proc_devices=(proc / "devices").read_text(), sysfs=sysfs)
    except OSError:
        return HostFacts(sysfs=sysfs)


def default_node_name() -> str:
    return socket.gethostname().split(".")[0] or "localhost"
