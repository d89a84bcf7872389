"""What ``gpu-hot`` and ``ecc-errors`` do to a GPU's NVML values (``model.nvml.GpuNvml``).

- ``gpu-hot``: while it acts, the GPU reads ``temperature``; with ``clock_mhz`` its graphics
  and SM clocks run there, with a software thermal slowdown as the reason, and a hardware
  (thermal) slowdown too when they run at half their maximum or less (NVML's meaning of it).
- ``gpu-busy``: while it acts, its process runs on the GPU (after the profile's; 8 at most),
  holding its memory, and the GPU's utilization is the fault's where that is higher.
- ``ecc-errors``: every window of the fault, past and future, is a burst of the GPU's
  ``Ecc`` (as ``Traffic.windows`` of a port), so a read at any instant counts right;
  ``carry`` keeps the counts when the faults change, a cleared storm's errors counted still.
"""

from __future__ import annotations

from dataclasses import replace

from mokkafs.faults.schedule import windows
from mokkafs.model.ecc import Ecc, EccBurst, kept_over
from mokkafs.model.nvml import (
    HW_SLOWDOWN,
    HW_THERMAL,
    MAX_PROCESSES,
    SW_THERMAL,
    Clocks,
    GpuNvml,
    GpuProcess,
)
from mokkafs.state import FaultSpec, PciFunction, State


def bursts(faults: tuple[FaultSpec, ...], bdf: str) -> tuple[EccBurst, ...]:
    """Every window of the ``ecc-errors`` faults on ``bdf`` as a burst, in time order."""
    out = []
    for spec in faults:
        if spec.kind != "ecc-errors" or spec.bdf != bdf:
            continue
        rates = dict(spec.rates)
        out += [EccBurst(rates.get("corrected", 0.0), rates.get("uncorrected", 0.0), a, b)
                for a, b in windows(spec)]
    return tuple(sorted(out, key=lambda b: (b.start, b.end)))


def _throttled(clocks: Clocks, mhz: int) -> Clocks:
    return replace(clocks, current=min(mhz, clocks.current) if clocks.current else mhz)


def busy(nvml: GpuNvml, specs: list[FaultSpec]) -> GpuNvml:
    """``nvml`` with the processes of the ``gpu-busy`` faults ``specs`` running, each pid
    once, and the utilization they make (the GPU's: 100 % unless a fault says)."""
    if not specs:
        return nvml
    procs = list(nvml.processes)
    for s in specs:
        if s.pid is not None and all(p.pid != s.pid for p in procs):
            procs.append(GpuProcess(s.pid, s.process or "", (s.memory_mib or 0) << 20))
    gpu = max(100 if s.utilization_gpu is None else s.utilization_gpu for s in specs)
    mem = [s.utilization_memory for s in specs if s.utilization_memory is not None]
    if nvml.utilization_memory is not None:
        mem.append(nvml.utilization_memory)
    return replace(nvml, processes=tuple(procs[:MAX_PROCESSES]),
                   utilization_gpu=max(gpu, nvml.utilization_gpu or 0),
                   utilization_memory=max(mem) if mem else None)


def heated(fn: PciFunction, active: list[FaultSpec], faults: tuple[FaultSpec, ...]
           ) -> PciFunction:
    """``fn`` under the ``gpu-hot`` faults acting on it (the hottest, the slowest clock) and
    its ``gpu-busy`` ones, with the bursts of its ``ecc-errors`` faults."""
    if fn.gpu is None:
        return fn
    nvml = fn.gpu.nvml
    hot = [s for s in active if s.kind == "gpu-hot" and s.bdf == fn.bdf]
    temps = [s.temperature for s in hot if s.temperature is not None]
    if temps:
        nvml = replace(nvml, temperature_c=max(temps))
    clocks = [s.clock_mhz for s in hot if s.clock_mhz is not None]
    if clocks:
        mhz = min(clocks)
        top = nvml.sm.max or nvml.graphics.max
        slowdown = SW_THERMAL | (HW_SLOWDOWN | HW_THERMAL if top and 2 * mhz <= top else 0)
        nvml = replace(nvml, graphics=_throttled(nvml.graphics, mhz),
                       sm=_throttled(nvml.sm, mhz), slowdown=nvml.slowdown | slowdown)
    nvml = busy(nvml, [s for s in active if s.kind == "gpu-busy" and s.bdf == fn.bdf])
    ecc = bursts(faults, fn.bdf)
    if ecc:
        nvml = replace(nvml, ecc=replace(nvml.ecc, bursts=ecc))
    if nvml is fn.gpu.nvml:
        return fn
    return replace(fn, gpu=replace(fn.gpu, nvml=nvml))


def carried_ecc(old: State, new: State, now: float) -> State:
    """``new`` with each GPU's ECC counts going on at ``now`` from where ``old`` has them."""
    before = {fn.bdf: fn for fn in old.functions if fn.gpu is not None}

    def kept(fn: PciFunction) -> PciFunction:
        was = before.get(fn.bdf)
        if fn.gpu is None or was is None or was.gpu is None:
            return fn
        ecc = kept_over(was.gpu.nvml.ecc.kept, bursts(old.faults, fn.bdf),
                        bursts(new.faults, fn.bdf), now)
        if ecc == fn.gpu.nvml.ecc.kept:
            return fn
        nvml = replace(fn.gpu.nvml, ecc=Ecc(ecc))
        return replace(fn, gpu=replace(fn.gpu, nvml=nvml))

    return replace(new, functions=tuple(kept(fn) for fn in new.functions))
