"""The State: everything the surfaces may look at, immutable, with its generation.

A profile compiles to exactly one State (``mokkafs.profile.compile``). Surfaces are pure
functions of a State (and, for dynamic files, of the time), so two equal States give
byte-identical views. Nothing here does I/O; host facts the view needs (the host's own
/proc/devices) are captured by the source and carried in ``HostFacts``. The models a State is
made of are in ``mokkafs.model``, one module per part of the node; all are named here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NewType

from mokkafs.model.faults import FaultKind, FaultSpec, KeptLog
from mokkafs.model.host import HostFacts
from mokkafs.model.infiniband import (
    IB_ERROR_COUNTERS,
    IB_HW_COUNTERS,
    Hca,
    IbPort,
    Traffic,
    Windows,
)
from mokkafs.model.machine import Cache, Cpu, CpuModel, Machine, NumaNode
from mokkafs.model.pci import (
    Bar,
    Bridge,
    DeviceKind,
    GpuInfo,
    PcieLink,
    PciFunction,
    PciIdentity,
    PortType,
    RootComplex,
    Sriov,
)
from mokkafs.model.platform import CharMajor, Driver, Platform

__all__ = [
    "IB_ERROR_COUNTERS",
    "IB_HW_COUNTERS",
    "Bar",
    "Bridge",
    "Cache",
    "CharMajor",
    "Cpu",
    "CpuModel",
    "DeviceKind",
    "Driver",
    "FaultKind",
    "FaultSpec",
    "Generation",
    "GpuInfo",
    "Hca",
    "HostFacts",
    "IbPort",
    "KeptLog",
    "Machine",
    "NumaNode",
    "PciFunction",
    "PciIdentity",
    "PcieLink",
    "Platform",
    "PortType",
    "RootComplex",
    "Sriov",
    "State",
    "Traffic",
    "Windows",
]

from mokkafs.model.mig import Imex, MigGpu

Generation = NewType("Generation", int)


@dataclass(frozen=True, slots=True)
class State:
    """One desired node. ``generation`` grows by one with every successful load."""

    generation: Generation
    source: str
    node_name: str
    node_index: int | None
    roots: tuple[RootComplex, ...]
    functions: tuple[PciFunction, ...]
    hcas: tuple[Hca, ...]
    char_majors: tuple[CharMajor, ...]
    nr_cpus: int  # len(machine.cpus): the width of every CPU mask
    loaded_at: float
    platform: Platform
    driver: Driver
    # What the profile loads, whatever faults remove later (a removed function is unbound
    # from its driver; the module stays): the PCI drivers its functions use, and whether the
    # RDMA stack (ib_core, mlx5, rdma_cm) serves its HCAs.
    pci_drivers: tuple[str, ...]
    rdma_loaded: bool
    machine: Machine
    iommu: bool = True
    host: HostFacts = field(default_factory=HostFacts)
    # Counters are a function of time since the node started (a time.monotonic() value),
    # quantised to ``counter_quantum`` seconds (0 = exact at every read).
    started_at: float = 0.0
    counter_quantum: float = 0.1
    faults: tuple[FaultSpec, ...] = ()
    # the kernel log taken over at each change of State (faults.effects.carry)
    kernel_log: KeptLog = field(default_factory=KeptLog)
    # The GPUs booted in MIG mode and their instances, and the IMEX channels (model/mig.py)
    mig: tuple[MigGpu, ...] = ()
    imex: Imex = field(default_factory=Imex)

    def major(self, name: str) -> int:
        """The character major the named driver registered (KeyError when none did)."""
        for major in self.char_majors:
            if major.name == name:
                return major.major
        raise KeyError(name)

    def function(self, bdf: str) -> PciFunction:
        for fn in self.functions:
            if fn.bdf == bdf:
                return fn
        raise KeyError(bdf)

    def gpus(self) -> tuple[PciFunction, ...]:
        return tuple(fn for fn in self.functions if fn.kind == "gpu")

    def driven_gpus(self) -> tuple[PciFunction, ...]:
        """The GPUs bound to the NVIDIA driver: those it has files and device nodes for (an
        unbound GPU, or one passed to vfio-pci, has neither; ``mokkafs.writes.drivers``)."""
        return tuple(fn for fn in self.gpus() if fn.driver == "nvidia")
