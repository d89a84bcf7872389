"""The machine around the devices: CPUs, NUMA nodes, caches and the CPU model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Cpu:
    """One logical CPU: the package (socket) and core it is a thread of, and its NUMA node."""

    id: int
    package: int
    core: int
    node: int


@dataclass(frozen=True, slots=True)
class NumaNode:
    """A NUMA node: its CPUs (none for a GPU's memory), its memory, its SLIT row (the
    distance to every node of ``Machine.nodes``, in their order) and, for a GPU memory node,
    the GPU whose memory it is."""

    id: int
    cpus: tuple[int, ...]
    memory_kib: int
    distance: tuple[int, ...]
    gpu: str | None = None


@dataclass(frozen=True, slots=True)
class Cache:
    """One cache each CPU sees (``cache/index<N>``): shared by a core's threads or by its
    whole package."""

    level: int
    type: Literal["Data", "Instruction", "Unified"]
    size_kib: int
    ways: int
    scope: Literal["core", "package"]
    line: int = 64


@dataclass(frozen=True, slots=True)
class CpuModel:
    """What a CPU says it is. x86: vendor_id, cpu family, model, stepping; aarch64: the
    MIDR's implementer (``vendor``), architecture (``family``), part (``model``) and
    revision (``stepping``). ``flags``: its features, space-separated."""

    name: str
    vendor: str
    family: int
    model: int
    stepping: int
    flags: str


@dataclass(frozen=True, slots=True)
class Machine:
    """The CPUs, NUMA nodes and caches of the node, as ``/sys/devices/system/{cpu,node}``
    and ``/proc/{cpuinfo,meminfo}`` show them. ``shown``: whether the view serves them (else
    the host's show through, where the host's sysfs does)."""

    cpus: tuple[Cpu, ...]
    nodes: tuple[NumaNode, ...]
    caches: tuple[Cache, ...]
    model: CpuModel
    mhz: float
    shown: bool = True

    def node(self, nid: int) -> NumaNode:
        for node in self.nodes:
            if node.id == nid:
                return node
        raise KeyError(nid)
