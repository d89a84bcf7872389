"""Facts read from the host that the view includes (the only host I/O surfaces depend on)."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

from mokkafs.state import HostFacts


def read_host_facts(proc: Path = Path("/proc"), sysfs: bool = False) -> HostFacts:
    """The host's /proc/devices and /proc/modules (each empty where unreadable or, for
    modules, where the kernel has no module support), and whether its sysfs shows through."""
    def read(name: str) -> str | None:
        try:
            return (proc / name).read_text()
        except OSError:
            return None

    facts = HostFacts(sysfs=sysfs, proc_modules=read("modules") or "")
    devices = read("devices")
    return facts if devices is None else replace(facts, proc_devices=devices)


def default_node_name() -> str:
    return socket.gethostname().split(".")[0] or "localhost"
