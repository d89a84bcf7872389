"""What a ``gpu-hot``, ``gpu-busy`` or ``ecc-errors`` fault as written must hold, checked against
its GPU (the effects: ``mokkafs.faults.effects``; the counts: ``mokkafs.model.ecc``)."""

from __future__ import annotations

from collections.abc import Sequence

from mokkafs.model.ecc import EPSILON
from mokkafs.model.nvml import GpuNvml
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import Fault
from mokkafs.state import FaultSpec, PciFunction

ECC_RATES = ("corrected", "uncorrected")


def gpu_problems(fault: Fault, fn: PciFunction, where: YamlPath, problems: Problems) -> None:
    """What a ``gpu-hot``, ``gpu-busy`` or ``ecc-errors`` fault on ``fn`` gets wrong."""
    nvml = fn.gpu.nvml if fn.gpu else None
    if fault.kind == "gpu-busy":
        busy_problems(fault, nvml, where, problems)
        return
    if fault.kind == "gpu-hot":
        if fault.temperature is None:
            problems.add((*where, "temperature"), "gpu-hot needs temperature: what the GPU "
                         "reads, in degrees C (e.g. 92)")
        top = nvml.sm.max if nvml else None
        if fault.clock_mhz is not None and top is not None and fault.clock_mhz > top:
            problems.add((*where, "clock_mhz"), f"{fault.target} clocks at {top} MHz at most; "
                         "a throttled clock is below it")
        return
    if nvml is not None and nvml.ecc_current is False:
        problems.add((*where, "target"), f"{fault.target} has ECC off (the profile's "
                     "ecc_current): nothing counts its errors")
    if not fault.rates:
        problems.add((*where, "rates"), "ecc-errors needs rates: {corrected: per second, "
                     "uncorrected: per second}, one or both")
    for name in fault.rates:
        if name not in ECC_RATES:
            problems.add((*where, "rates", name), "ecc-errors counts corrected and "
                         "uncorrected errors; use those names")
    if fault.rates.get("uncorrected", 0) > 0 and fault.duration is None:
        problems.add((*where, "rates", "uncorrected"), "uncorrectable errors need for: each "
                     "logs an Xid 48, and a node logs a bounded number; give the storm a "
                     "length (for: 60)")


def busy_problems(fault: Fault, nvml: GpuNvml | None, where: YamlPath,
                  problems: Problems) -> None:
    """A ``gpu-busy`` names its process, and the process fits in the GPU's free memory."""
    for name, example in (("pid", "4242"), ("process", "python3"), ("memory_mib", "20480")):
        if getattr(fault, name) is None:
            problems.add((*where, name), f"gpu-busy needs {name}: the process running on the "
                         f"GPU (e.g. {name}: {example})")
    procs = nvml.processes if nvml else ()
    if fault.pid is not None and any(p.pid == fault.pid for p in procs):
        problems.add((*where, "pid"), f"pid {fault.pid} is a process the profile runs on "
                     f"{fault.target}; give the fault's process a pid of its own")
    memory = nvml.memory if nvml else None
    if fault.memory_mib and memory is None:
        problems.add((*where, "memory_mib"), f"the profile states no memory for {fault.target} "
                     "(memory.total_bytes); use memory_mib: 0")
    elif fault.memory_mib and memory is not None:
        free = memory.total - memory.reserved - memory.used - sum(p.used_bytes for p in procs)
        if fault.memory_mib << 20 > free:
            problems.add((*where, "memory_mib"), f"{fault.target} has {max(free, 0) >> 20} MiB "
                         "free beside the driver's reserve and the profile's processes; use "
                         "less")


def ecc_xids(specs: Sequence[Fault | FaultSpec]) -> int:
    """The Xid 48s the ``ecc-errors`` faults log: one per uncorrectable error."""
    total = 0
    for spec in specs:
        rates = dict(spec.rates) if spec.kind == "ecc-errors" else {}
        rate = float(rates.get("uncorrected", 0))
        if rate > 0 and spec.duration is not None:
            total += int(rate * spec.duration + EPSILON)
    return total
