"""What the command line adds to a profile, for one compile."""

from __future__ import annotations

from dataclasses import dataclass, field

from mokkafs.state import HostFacts


@dataclass(frozen=True)
class Options:
    """What the command line adds to a profile."""

    node_name: str
    node_index: int | None = None
    generation: int = 1
    loaded_at: float = 0.0
    started_at: float = 0.0
    counter_quantum: float = 0.1
    host: HostFacts = field(default_factory=HostFacts)
    infiniband: bool = True  # False: serve no IB surface whatever the profile says
    machine: bool = True  # False: serve no CPU, NUMA node, cpuinfo or meminfo (machine.show)
