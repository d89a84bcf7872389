"""What a ``gpu-hot`` or an ``ecc-errors`` fault as written must hold, checked against its GPU
(the effects: ``mokkafs.faults.effects``; the counts: ``mokkafs.model.ecc``)."""

from __future__ import annotations

from collections.abc import Sequence

from mokkafs.model.ecc import EPSILON
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import Fault
from mokkafs.state import FaultSpec, PciFunction

ECC_RATES = ("corrected", "uncorrected")


def gpu_problems(fault: Fault, fn: PciFunction, where: YamlPath, problems: Problems) -> None:
    """What a ``gpu-hot`` or ``ecc-errors`` fault on ``fn`` gets wrong."""
    nvml = fn.gpu.nvml if fn.gpu else None
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


def ecc_xids(specs: Sequence[Fault | FaultSpec]) -> int:
    """The Xid 48s the ``ecc-errors`` faults log: one per uncorrectable error."""
    total = 0
    for spec in specs:
        rates = dict(spec.rates) if spec.kind == "ecc-errors" else {}
        rate = float(rates.get("uncorrected", 0))
        if rate > 0 and spec.duration is not None:
            total += int(rate * spec.duration + EPSILON)
    return total
