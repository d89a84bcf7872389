"""A GPU's NVML facts (``mokkafs.model.nvml.GpuNvml``) from nvml-mock's keys: each section a
``devices`` entry gives replaces ``device_defaults``' (as ``pcie`` does). Nothing is made up:
a value the profile leaves out stays ``None``, except the driver's memory reserve."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mokkafs.model.mig import MigGpu
from mokkafs.model.nvlink import NvLinks
from mokkafs.model.nvml import Clocks, FbMemory, GpuNvml, GpuProcess
from mokkafs.model.pci import PciFunction
from mokkafs.profile.nvlink import fabric
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import DeviceConfig, DeviceOverride, Profile
from mokkafs.profile.sections.nvml import NVML_KEYS, NvmlKeys, Process

# What an idle driver keeps of the framebuffer when a profile gives the total but no
# memory.reserved_bytes: nvml-mock's profiles state 300 MiB (T4) to 1.5 GiB (GB300).
DEFAULT_RESERVED = 512 << 20
MIB = 1 << 20
COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}


def merged(defaults: DeviceConfig, override: DeviceOverride | None) -> NvmlKeys:
    """The NVML keys of one GPU: its entry's sections over the defaults'."""
    values: dict[str, Any] = {}
    for key in NVML_KEYS:
        given = override is not None and key in override.model_fields_set
        values[key] = getattr(override if given else defaults, key)
    return NvmlKeys.model_validate(values)


def _enabled(mode: str | None) -> bool | None:
    return None if mode is None else mode == "enabled"


def check_processes(keys: NvmlKeys, where: YamlPath, problems: Problems) -> None:
    """A GPU's processes have pids of their own, name both a GPU and a compute instance or
    neither, and fit in the memory it has free."""
    pids = [p.pid for p in keys.processes]
    for i, pid in enumerate(pids):
        if pid in pids[:i]:
            problems.add((*where, "processes", i, "pid"), f"pid {pid} is listed twice on "
                         "this GPU; give each process a pid of its own")
    for i, p in enumerate(keys.processes):
        if (p.gpu_instance is None) != (p.compute_instance is None):
            missing = "compute_instance" if p.compute_instance is None else "gpu_instance"
            problems.add((*where, "processes", i, missing), "a process in a MIG instance "
                         "names its GPU instance and its compute instance: give both (their "
                         "IDs in the GPU's mig layout), or neither")
    used = sum(p.used_memory_mib for p in keys.processes) * MIB
    m = keys.memory
    if used and m.total_bytes is None:
        problems.add((*where, "processes"), "processes use GPU memory: state "
                     "memory.total_bytes, or give used_memory_mib: 0")
    elif used and m.total_bytes is not None:
        free = m.total_bytes - (DEFAULT_RESERVED if m.reserved_bytes is None
                                else m.reserved_bytes) - m.used_bytes
        if used > free:
            problems.add((*where, "processes"), f"the processes use {used // MIB} MiB, and "
                         f"the GPU has {max(free, 0) // MIB} MiB free; lower used_memory_mib")


def gpu_nvml(keys: NvmlKeys, nvlink: NvLinks | None = None) -> GpuNvml:
    memory = None
    if keys.memory.total_bytes is not None:
        total = keys.memory.total_bytes
        reserved = min(total, DEFAULT_RESERVED if keys.memory.reserved_bytes is None
                       else keys.memory.reserved_bytes)
        memory = FbMemory(total, reserved, min(keys.memory.used_bytes, total - reserved))
    c, p, cc = keys.clocks, keys.power, keys.compute_capability
    return GpuNvml(
        brand=keys.brand,
        board_part_number=keys.board_part_number,
        compute_capability=(cc.major, cc.minor) if cc else None,
        memory=memory,
        graphics=Clocks(c.graphics_current, c.graphics_max),
        sm=Clocks(c.sm_current, c.sm_max),
        mem_clock=Clocks(c.memory_current, c.memory_max),
        power_usage_mw=p.current_draw_mw,
        power_limit_mw=p.default_limit_mw,
        power_enforced_mw=p.enforced_limit_mw,
        energy_mj=p.total_energy_consumption_mj,
        temperature_c=keys.thermal.temperature_gpu_c,
        utilization_gpu=keys.utilization.gpu,
        utilization_memory=keys.utilization.memory,
        fan_percent=keys.fan.speed_percent if keys.fan.count > 0 else None,
        performance_state=(int(keys.performance_state[1:])
                           if keys.performance_state is not None else None),
        persistence_mode=_enabled(keys.persistence_mode),
        compute_mode=(COMPUTE_MODES[keys.compute_mode]
                      if keys.compute_mode is not None else None),
        ecc_current=_enabled(keys.ecc.mode_current),
        ecc_pending=_enabled(keys.ecc.mode_pending),
        nvlink=nvlink,
        fabric=fabric(keys.fabric),
        processes=tuple(GpuProcess(p.pid, p.name, p.used_memory_mib * MIB, _instance(p))
                        for p in keys.processes),
    )


def _instance(p: Process) -> tuple[int, int] | None:
    if p.gpu_instance is None or p.compute_instance is None:
        return None
    return p.gpu_instance, p.compute_instance


def check_instances(profile: Profile, gpus: Iterable[PciFunction], mig: tuple[MigGpu, ...],
                    problems: Problems) -> None:
    """Each process that runs in a MIG instance names one its GPU's layout holds (``mig``:
    the layouts of the GPUs in MIG mode)."""
    given = {d.index: pos for pos, d in enumerate(profile.devices)
             if "processes" in d.model_fields_set}
    layouts = {m.bdf: m for m in mig}
    for fn in gpus:
        if fn.gpu is None:
            continue
        index, processes = fn.gpu.index, fn.gpu.nvml.processes
        pos = given.get(index)
        where: YamlPath = ("devices", pos, "processes") if pos is not None else \
            ("device_defaults", "processes")
        layout = layouts.get(fn.bdf)
        instances = {g.id: g for g in layout.instances} if layout else {}
        for i, p in enumerate(processes):
            if p.instance is None:
                continue
            gi, ci = p.instance
            if layout is None:
                problems.add((*where, i, "gpu_instance"), f"GPU {index} is not in MIG mode: "
                             "remove gpu_instance and compute_instance, or turn MIG on")
            elif gi not in instances:
                held = ", ".join(str(g) for g in sorted(instances)) or "none"
                problems.add((*where, i, "gpu_instance"), f"GPU {index} has no GPU instance "
                             f"{gi} (its layout holds {held})")
            elif ci not in {c.id for c in instances[gi].compute}:
                held = ", ".join(str(c.id) for c in instances[gi].compute) or "none"
                problems.add((*where, i, "compute_instance"), f"GPU instance {gi} of GPU "
                             f"{index} has no compute instance {ci} (it holds {held})")
