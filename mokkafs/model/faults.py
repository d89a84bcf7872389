"""Faults in a State: each one with its target resolved and its timing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

FaultKind = Literal["ib-port-down", "ib-port-flap", "ib-errors", "ib-degraded",
                    "pcie-degraded", "gpu-lost", "gpu-removed", "hca-removed", "xid",
                    "gpu-hot", "ecc-errors", "gpu-busy"]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault, its target resolved (``ports``: (HCA, port) pairs; ``bdf``: a PCI function;
    ``hca``: an RDMA device) and its timing in seconds from ``origin``, the daemon clock's
    reading when it was first applied (None until then). ``selected``: whether this node is
    among the ``fraction`` the fault picks. See docs/faults.md and ``mokkafs.faults``."""

    name: str
    kind: FaultKind
    target: str
    source: Literal["profile", "control"]
    selected: bool = True
    ports: tuple[tuple[str, int], ...] = ()
    bdf: str | None = None
    hca: str | None = None
    after: float = 0.0
    duration: float | None = None
    every: float | None = None
    count: int | None = None
    cable: bool = False
    rates: tuple[tuple[str, float], ...] = ()
    width: int | None = None
    rate_gbps: int | None = None
    gen: int | None = None
    xid: int | None = None  # xid: the Xid the driver logs (mokkafs.faults.xid)
    text: str | None = None  # xid: its message, instead of the usual one for that Xid
    temperature: int | None = None  # gpu-hot: the GPU's temperature (degrees C)
    clock_mhz: int | None = None  # gpu-hot: the graphics and SM clocks it throttles to
    pid: int | None = None  # gpu-busy: the process running (its pid, its name, its memory)
    process: str | None = None
    memory_mib: int | None = None
    utilization_gpu: int | None = None  # gpu-busy: the GPU's utilization while it runs (%)
    utilization_memory: int | None = None
    revision: int = 0  # how many times before the control socket applied it: each is anew
    restored: bool = False  # applied at run time before the daemon restarted (a state file)
    origin: float | None = None

    def definition(self) -> FaultSpec:
        """Everything but when it was applied: what decides whether it is the same fault."""
        return replace(self, origin=None)


@dataclass(frozen=True, slots=True)
class KeptLog:
    """The kernel-log records a State took over from the States before it
    (``mokkafs.faults.kernel_log``): those logged before ``since`` (the newest the ring keeps),
    numbered up to ``next_seq``. What a cleared fault logged stays logged."""

    records: tuple[tuple[float, int, str], ...] = ()  # (clock time, level, text)
    next_seq: int = 0  # the number of the first record after them
    since: float | None = None  # this State's own records start here (None: from the start)
