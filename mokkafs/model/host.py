"""What the host contributes to the view."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host contributes to the view, captured at load time by the source."""

    proc_devices: str = "Character devices:\n\nBlock devices:\n"
    proc_modules: str = ""  # the host's /proc/modules ("" where the kernel has none)
    # Whether the host's sysfs shows through beneath the simulated nodes: a container given
    # the view as its /sys keeps its CPU topology, cgroups, DMI and its own interfaces.
    sysfs: bool = False
