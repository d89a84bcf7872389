"""Faults in a profile (mokkafs) and in a file for ``mokkafs fault apply``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from mokkafs.profile.sections.nvml import PID_MAX, ProcessName
from mokkafs.profile.values import (
    ClosedSection,
    Rate,
)
from mokkafs.state import FaultKind

Seconds = Annotated[float, Field(ge=0, le=10 * 365 * 86400, allow_inf_nan=False)]
MAX_FAULTS = 256  # in a profile, and on a node (the profile's and the control socket's)
MAX_FAULTS_PER_APPLY = 64  # in one `mokkafs fault apply`


class Fault(ClosedSection):
    """mokkafs: a fault the node suffers on purpose (docs/faults.md). ``target`` names a port
    (``mlx5_0/1``), an HCA (``mlx5_0``) or a PCI function (``0000:1b:00.0``, ``gpu0``);
    timing is relative to when the fault is first applied."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    kind: FaultKind
    target: Annotated[str, Field(min_length=1, max_length=64)]
    after: Seconds = 0.0
    duration: Seconds | None = Field(default=None, alias="for", gt=0)
    every: Seconds | None = Field(default=None, gt=0)
    count: int | None = Field(default=None, ge=1, le=10_000)
    fraction: float = Field(default=1.0, ge=0, le=1)
    # ib-port-down, ib-port-flap: the cable is out (phys_state Polling, not Disabled)
    cable: bool = False
    # ib-errors: counters/ and hw_counters/ names and how many per second each grows;
    # ecc-errors: corrected, uncorrected
    rates: dict[str, Rate] = Field(default={}, max_length=64)
    # ib-degraded: the lanes the link trained to, and its total rate (default: the same
    # speed per lane); pcie-degraded: the generation and width the link trained to
    width: Literal[1, 2, 4, 8, 12, 16, 32] | None = None
    rate_gbps: int | None = Field(default=None, ge=1, le=3200)
    gen: int | None = Field(default=None, ge=1, le=6)
    # xid: the Xid the driver logs, and its message (default: the driver's usual one)
    xid: int | None = Field(default=None, ge=1, le=255)
    text: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[ -~]+$")] | None = None
    # gpu-hot: the temperature the GPU reads (C), and the clocks it throttles to (MHz)
    temperature: int | None = Field(default=None, ge=0, le=150)
    clock_mhz: int | None = Field(default=None, ge=1, le=10_000)
    # gpu-busy: the process running on the GPU (its pid, its name as nvidia-smi shows it, the
    # framebuffer it holds), and the GPU's utilization while it runs (%)
    pid: int | None = Field(default=None, ge=1, le=PID_MAX)
    process: ProcessName | None = None
    memory_mib: int | None = Field(default=None, ge=0, le=1 << 24)
    utilization_gpu: int | None = Field(default=None, ge=0, le=100)
    utilization_memory: int | None = Field(default=None, ge=0, le=100)


class FaultFile(ClosedSection):
    """What ``mokkafs fault apply FILE`` reads: a ``faults:`` list, as in a profile."""

    faults: list[Fault] = Field(max_length=MAX_FAULTS_PER_APPLY)
