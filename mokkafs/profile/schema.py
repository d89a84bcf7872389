"""Pydantic models of a hardware profile.

The format is nvml-mock's, read unchanged: the seven profiles nvml-mock ships load as they are.
Top-level keys are closed (a typo there is an error); inside sections, keys mokkafs does not use
(NVML telemetry, clocks, ECC, ...) are accepted and ignored, because they belong to other
consumers of the same file. mokkafs adds a few optional keys of its own, marked "mokkafs:".
Each section is a module of ``mokkafs.profile.sections``; all are named here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mokkafs.profile.sections.devices import (
    DeviceConfig,
    DeviceOverride,
    Memory,
    NvLink,
    NvSwitch,
    Pcie,
    PciIds,
    System,
)
from mokkafs.profile.sections.faults import (
    MAX_FAULTS,
    MAX_FAULTS_PER_APPLY,
    Fault,
    FaultFile,
    Seconds,
)
from mokkafs.profile.sections.infiniband import (
    Hca,
    InfiniBand,
    Traffic,
)
from mokkafs.profile.sections.machine import (
    Machine,
    Node,
    Platform,
    ProcDevices,
)
from mokkafs.profile.sections.raw_functions import MAX_RAW_FUNCTIONS, RawFunction
from mokkafs.profile.sections.topology import (
    PcieTopology,
    PciId,
    RootComplex,
    Switch,
)
from mokkafs.profile.values import MAX_GPUS, ClosedSection, Text

__all__ = [
    "MAX_FAULTS",
    "MAX_FAULTS_PER_APPLY",
    "DeviceConfig",
    "DeviceOverride",
    "Fault",
    "FaultFile",
    "Hca",
    "InfiniBand",
    "Machine",
    "Memory",
    "Node",
    "NvLink",
    "NvSwitch",
    "PciId",
    "PciIds",
    "Pcie",
    "PcieTopology",
    "Platform",
    "ProcDevices",
    "Profile",
    "RootComplex",
    "Seconds",
    "Switch",
    "System",
    "Traffic",
]


class Profile(ClosedSection):
    """A whole profile document. Unknown top-level keys are errors."""

    version: str | int | float | None = None
    description: Text | None = None  # mokkafs: one line shown by `mokkafs profiles`
    system: System = System()
    device_defaults: DeviceConfig = DeviceConfig()
    devices: list[DeviceOverride] = Field(default=[], max_length=MAX_GPUS)
    nvlink: NvLink = NvLink()
    infiniband: InfiniBand = InfiniBand()
    pcie_topology: PcieTopology | None = None
    dynamic_metrics_defaults: dict[str, Any] | None = None  # nvml-mock Helm-only; ignored
    node: Node = Node()
    proc_devices: ProcDevices = ProcDevices()
    platform: Platform = Platform()  # mokkafs
    machine: Machine | None = None  # mokkafs
    faults: list[Fault] = Field(default=[], max_length=MAX_FAULTS)  # mokkafs
    # mokkafs: functions kept as a capture found them (mokkafs.profile.sections.raw_functions)
    pci_functions: list[RawFunction] = Field(default=[], max_length=MAX_RAW_FUNCTIONS)
