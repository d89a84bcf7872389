"""NVML's own place: ``run/mokkafs-nvml/``, what mokkafs's NVML library (native/nvml/) answers
that no kernel file holds. Never under ``sys`` or ``proc``, which stay faithful to the kernel.

- ``gpus/<bdf>``: one file per GPU the driver lists, ``key=value`` lines in NVML's units and
  enum numbers (docs/nvml.md has the keys). A key the profile cannot state is left out, and the
  library answers NOT_SUPPORTED for it.
- MIG: each MIG-capable GPU's profile table and, in MIG mode, its instances
  (``mokkafs.surfaces.nvml_mig``), from the State the capability files come from.
- ``system``: what the node says through NVML alone (``cuda_driver_version`` where the profile
  states ``system.cuda_version``).

A GPU's file is a function of the State and the time of the read: its energy counter grows
at its power draw since the node started, in steps of the counter quantum (as the IB
counters, ``mokkafs.counters``), and its ECC errors at the rates of an ``ecc-errors`` storm
(``model.ecc``, put there by ``faults.effects``), with the remapped rows or retired pages.
Memory used is what the running processes hold (the profile's and a ``gpu-busy`` fault's,
``process.<i>.*``) beside the profile's ``used_bytes``; the driver's reserve is apart. A
process in a MIG instance runs while the GPU's layout holds its instance
(``model.nvml.running``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from mokkafs import counters
from mokkafs.model.ecc import Ecc, ecc_values
from mokkafs.model.nvml import ARCHITECTURES, BRANDS, GPU_IDLE, GpuNvml, running
from mokkafs.state import GpuInfo, PciFunction, State
from mokkafs.surfaces.nvml_links import fabric_values, link_values
from mokkafs.surfaces.nvml_mig import mig_values
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node
from mokkafs.tree.roots import own

ROOT = "run/mokkafs-nvml"


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def fixed_values(gpu: GpuInfo) -> list[tuple[str, object]]:
    """A GPU's keys whose values do not move with time, in the file's order; None: unknown."""
    n: GpuNvml = gpu.nvml
    cc = n.compute_capability
    m = n.memory
    return [
        ("architecture", ARCHITECTURES.get(gpu.architecture)),
        ("brand", BRANDS[n.brand] if n.brand else None),
        ("serial", gpu.serial),
        ("board_part_number", n.board_part_number),
        ("cuda_cc_major", cc[0] if cc else None),
        ("cuda_cc_minor", cc[1] if cc else None),
        ("memory_total", m.total if m else None),
        ("memory_reserved", m.reserved if m else None),
        ("memory_used", _used(n)),  # by processes, beside the reserve
        ("clock_graphics", n.graphics.current),
        ("clock_sm", n.sm.current),
        ("clock_memory", n.mem_clock.current),
        ("max_clock_graphics", n.graphics.max),
        ("max_clock_sm", n.sm.max),
        ("max_clock_memory", n.mem_clock.max),
        ("power_usage", n.power_usage_mw),
        ("power_limit", n.power_limit_mw),
        ("enforced_power_limit", n.power_enforced_mw),
        ("temperature_gpu", n.temperature_c),
        ("utilization_gpu", n.utilization_gpu),
        ("utilization_memory", n.utilization_memory),
        ("fan_speed", n.fan_percent),
        ("performance_state", n.performance_state),
        ("persistence_mode", _flag(n.persistence_mode)),
        ("compute_mode", n.compute_mode),
        ("ecc_current", _flag(n.ecc_current)),
        ("ecc_pending", _flag(n.ecc_pending)),
        ("clocks_event_reasons", _reasons(n)),
        *process_values(n),
    ]


def _used(n: GpuNvml) -> int | None:
    """What processes hold (the profile's ``used_bytes`` and each running one's), up to what
    the GPU has beside the driver's reserve."""
    m = n.memory
    if m is None:
        return None
    return min(m.used + sum(p.used_bytes for p in n.processes), m.total - m.reserved)


def process_values(n: GpuNvml) -> list[tuple[str, object]]:
    """The compute processes running: how many, then each one's pid, name and memory (bytes),
    and the IDs of the GPU and compute instance of one in a MIG instance."""
    out: list[tuple[str, object]] = [("process_count", len(n.processes))]
    for i, p in enumerate(n.processes):
        out += [(f"process.{i}.pid", p.pid), (f"process.{i}.name", p.name),
                (f"process.{i}.memory", p.used_bytes)]
        if p.instance is not None:
            out += [(f"process.{i}.gpu_instance", p.instance[0]),
                    (f"process.{i}.compute_instance", p.instance[1])]
    return out


def _reasons(n: GpuNvml) -> int | None:
    """nvmlClocksEventReasons: idle where nothing runs, and a gpu-hot's slowdown."""
    if n.utilization_gpu is None:
        return None
    return (GPU_IDLE if n.utilization_gpu == 0 and not n.processes else 0) | n.slowdown


def lines(values: list[tuple[str, object]]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values if value is not None)


@dataclass(frozen=True, slots=True)
class GpuText:
    """A GPU's file at a given time: its fixed lines, then its energy in millijoules (what
    the profile says it consumed before the node started, and its draw since; none without a
    draw), then its ECC errors (where ECC is on: ``ecc`` not None)."""

    fixed: str
    energy_mj: int
    draw_mw: int | None
    started_at: float
    quantum: float
    ecc: Ecc | None = None
    architecture: int | None = None
    bdf: str = ""
    memory: int | None = None

    def __call__(self, now: float) -> bytes:
        t = counters.elapsed(now, self.started_at, self.quantum)
        text = self.fixed
        if self.draw_mw is not None:
            text += f"energy={self.energy_mj + int(self.draw_mw * t)}\n"  # mW x s = mJ
        if self.ecc is not None:
            counts = self.ecc.counts(self.started_at + t)
            text += lines(ecc_values(self.architecture, self.bdf, self.memory, counts))
        return text.encode()


def gpu_file(path: str, fn: PciFunction, state: State) -> File:
    assert fn.gpu is not None
    layout = next((m for m in state.mig if m.bdf == fn.bdf), None)
    gpu = replace(fn.gpu, nvml=replace(fn.gpu.nvml, processes=running(fn.gpu.nvml.processes,
                                                                      layout)))
    switches = tuple(sorted((f for f in state.functions if f.kind == "nvswitch"),
                            key=lambda f: f.bdf))  # in bus order
    fixed = lines(fixed_values(gpu) + link_values(gpu.nvml, switches)
                  + fabric_values(gpu.nvml, switches) + mig_values(fn, state.mig))
    n = gpu.nvml
    ecc = n.ecc if n.ecc_current else None  # with ECC off nothing counts (NOT_SUPPORTED)
    if n.power_usage_mw is None and ecc is None:  # nothing moves
        return File(path, fixed.encode())
    text = GpuText(fixed, n.energy_mj or 0, n.power_usage_mw, state.started_at,
                   state.counter_quantum, ecc, ARCHITECTURES.get(gpu.architecture), fn.bdf,
                   n.memory.total if n.memory else None)
    return File(path, text, quantum=state.counter_quantum)


def served(state: State) -> bool:
    """Whether the view has NVML's place: while the driver has a GPU (the CDI spec's ``nvml``
    device comes and goes with it)."""
    return bool(state.driven_gpus())


def nodes(state: State) -> Iterator[Node]:
    if not served(state):
        return
    gpus = state.driven_gpus()
    yield Dir("run")
    yield Dir(ROOT)
    cuda = state.driver.cuda_version
    yield File(f"{ROOT}/system", lines([("cuda_driver_version", cuda)]).encode())
    yield Dir(f"{ROOT}/gpus")
    for fn in gpus:
        yield gpu_file(f"{ROOT}/gpus/{fn.bdf}", fn, state)


SURFACE = stateless("nvml", nodes,
                    ("functions", "driver", "mig", "started_at", "counter_quantum"),
                    (own(ROOT),))
