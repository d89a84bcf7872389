"""What NVML says of a GPU that no kernel file holds: its brand, part number and compute
capability, its memory, clocks, power, temperature, utilization and modes, as the profile
states them (nvml-mock's ``device_defaults`` keys; ``mokkafs.profile.nvml``). ``None``: the
profile does not say, and the library answers ``NVML_ERROR_NOT_SUPPORTED``. Served by
``mokkafs.surfaces.nvml``; units as NVML's (bytes, MHz, milliwatts, degrees C, percent)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mokkafs.model.ecc import Ecc
from mokkafs.model.mig import MigGpu
from mokkafs.model.nvlink import Fabric, NvLinks

# NVML's nvmlBrandType_t, by the names nvml-mock's ``brand`` takes
BRANDS = {"unknown": 0, "quadro": 1, "tesla": 2, "nvs": 3, "grid": 4, "geforce": 5, "titan": 6,
          "nvidia_vapps": 7, "nvidia_vpc": 8, "nvidia_vcs": 9, "nvidia_vws": 10,
          "nvidia_cloud_gaming": 11, "quadro_rtx": 12, "nvidia_rtx": 13, "nvidia": 14,
          "geforce_rtx": 15, "titan_rtx": 16}
# NVML's NVML_DEVICE_ARCH_*, by the profile's ``architecture``
# nvmlClocksEventReasons bits: the GPU idles; a hardware slowdown; thermal ones (software,
# hardware)
GPU_IDLE, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL = 0x1, 0x8, 0x20, 0x40
ARCHITECTURES = {"kepler": 2, "maxwell": 3, "pascal": 4, "volta": 5, "turing": 6, "ampere": 7,
                 "ada": 8, "ada_lovelace": 8, "hopper": 9, "blackwell": 10}


@dataclass(frozen=True, slots=True)
class Clocks:
    """One clock domain's current and maximum frequency (MHz)."""

    current: int | None = None
    max: int | None = None


@dataclass(frozen=True, slots=True)
class FbMemory:
    """The framebuffer: its size, what the driver keeps for itself, what processes use."""

    total: int
    reserved: int
    used: int


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A compute process running on the GPU: its pid, its name (as nvidia-smi shows it) and
    the framebuffer it allocated (bytes). Simulated: no process of the node has to have it.
    On a GPU in MIG mode, the GPU and compute instance it runs in (``instance``: their IDs),
    for as long as the GPU's layout holds it (``running``)."""

    pid: int
    name: str
    used_bytes: int
    instance: tuple[int, int] | None = None


def running(processes: tuple[GpuProcess, ...], layout: MigGpu | None,
            ) -> tuple[GpuProcess, ...]:
    """The processes that run on a GPU whose MIG layout is ``layout`` now (None: not in MIG
    mode): those in no instance, and those in an instance it holds. One whose instance was
    destroyed at run time ended with it."""
    if not any(p.instance for p in processes):
        return processes
    held = {(g.id, c.id) for g in layout.instances for c in g.compute} if layout else set()
    return tuple(p for p in processes if p.instance is None or p.instance in held)


MAX_PROCESSES = 8  # on one GPU: the profile's (4 at most) and the gpu-busy faults' together


@dataclass(frozen=True, slots=True)
class GpuNvml:
    brand: str | None = None  # nvml-mock's name: "nvidia", "tesla", "quadro", ...
    board_part_number: str | None = None
    compute_capability: tuple[int, int] | None = None
    memory: FbMemory | None = None
    graphics: Clocks = Clocks()
    sm: Clocks = Clocks()
    mem_clock: Clocks = Clocks()
    power_usage_mw: int | None = None
    power_limit_mw: int | None = None  # the management limit (the default until set)
    power_enforced_mw: int | None = None
    energy_mj: int | None = None  # consumed before the node started; grows at power_usage_mw
    temperature_c: int | None = None
    utilization_gpu: int | None = None
    utilization_memory: int | None = None
    fan_percent: int | None = None  # None on fanless boards (nvml-mock's fan.count: 0)
    performance_state: int | None = None  # 0 for P0
    persistence_mode: bool | None = None
    compute_mode: int | None = None  # NVML's nvmlComputeMode_t
    ecc_current: bool | None = None
    ecc_pending: bool | None = None
    nvlink: NvLinks | None = None  # None: no NVLink (the profile states no nvlink.version)
    fabric: Fabric | None = None  # None: in no NVLink fabric (NVML: NOT_SUPPORTED)
    processes: tuple[GpuProcess, ...] = ()  # the profile's, and a gpu-busy fault's
    # What faults add (mokkafs.faults.effects): the clocks event reasons a gpu-hot sets, and
    # the ECC errors an ecc-errors storm makes, computed at each read
    slowdown: int = 0
    ecc: Ecc = field(default_factory=Ecc)
