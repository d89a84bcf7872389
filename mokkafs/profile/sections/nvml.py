"""nvml-mock's NVML keys of a device (``device_defaults`` and each ``devices`` entry): what the
GPU says through NVML and no kernel file holds. Every key is optional: what a profile leaves
out, the library answers NOT_SUPPORTED (``mokkafs.profile.nvml`` merges them)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from mokkafs.model.mig_tables import MAX_CIS, MAX_GIS
from mokkafs.model.nvml import BRANDS
from mokkafs.profile.values import ClosedSection, OpenSection, Text


def _word(value: Any) -> Any:
    """A mode as nvml-mock writes it ("Enabled", "P0", "N/A"), lowercased."""
    return value.strip().lower() if isinstance(value, str) else value


def _not_available(value: Any) -> Any:
    """nvml-mock writes "N/A" where the GPU has no such value."""
    return None if isinstance(value, str) and value.strip().upper() == "N/A" else value


Mode = Annotated[Literal["enabled", "disabled"], BeforeValidator(_word)]
Percent = Annotated[Annotated[int, Field(ge=0, le=100)] | None, BeforeValidator(_not_available)]
Mhz = Annotated[int, Field(ge=0, le=100_000)]
Milliwatts = Annotated[int, Field(ge=0, le=100_000_000)]
Celsius = Annotated[int, Field(ge=-100, le=300)]
Bytes = Annotated[int, Field(ge=0, le=1 << 50)]
PState = Annotated[str, BeforeValidator(_word), Field(pattern=r"^p([0-9]|1[0-5])$")]


def _brand(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() not in BRANDS:
        raise ValueError(f"unknown brand {value!r}: one of {', '.join(BRANDS)}")
    return _word(value)


Brand = Annotated[str, BeforeValidator(_brand)]
ComputeMode = Annotated[Literal["default", "exclusive_thread", "prohibited",
                                "exclusive_process"], BeforeValidator(_word)]


def _cuda_version(value: Any) -> Any:
    """nvml-mock's ``system.cuda_version``, "12.4", as (12, 4)."""
    if isinstance(value, str):
        major, dot, minor = value.strip().partition(".")
        if major.isdigit() and (minor.isdigit() or not dot):
            return (int(major), int(minor or 0))
    raise ValueError(f"expected a CUDA version such as \"12.4\" (quoted), got {value!r}")


CudaMajor = Annotated[int, Field(ge=1, le=99)]
CudaMinor = Annotated[int, Field(ge=0, le=9)]  # NVML spells it major * 1000 + minor * 10
CudaVersion = Annotated[tuple[CudaMajor, CudaMinor], BeforeValidator(_cuda_version)]


class ComputeCapability(OpenSection):
    major: int = Field(ge=1, le=99)
    minor: int = Field(ge=0, le=99)


class FbMemory(OpenSection):
    total_bytes: Bytes | None = None
    reserved_bytes: Bytes | None = None
    used_bytes: Bytes = 0


class Power(OpenSection):
    default_limit_mw: Milliwatts | None = None
    enforced_limit_mw: Milliwatts | None = None
    current_draw_mw: Milliwatts | None = None
    total_energy_consumption_mj: Annotated[int, Field(ge=0, le=1 << 62)] | None = None


class Thermal(OpenSection):
    temperature_gpu_c: Celsius | None = None


class Fan(OpenSection):
    count: int = Field(default=0, ge=0, le=16)
    speed_percent: Percent = None


class Clocks(OpenSection):
    graphics_current: Mhz | None = None
    graphics_max: Mhz | None = None
    sm_current: Mhz | None = None
    sm_max: Mhz | None = None
    memory_current: Mhz | None = None
    memory_max: Mhz | None = None


class Utilization(OpenSection):
    gpu: Percent = None
    memory: Percent = None


class Ecc(OpenSection):
    mode_current: Mode | None = None
    mode_pending: Mode | None = None


FabricState = Annotated[Literal["auto", "completed", "in_progress", "not_started",
                                "not_supported"], BeforeValidator(_word)]


class Fabric(OpenSection):
    """nvml-mock's ``fabric``: the NVLink fabric the GPU registered with (its cluster's UUID,
    dashed or 32 hex digits, and its clique), and how far the registration got."""

    cluster_uuid: uuid.UUID
    clique_id: int = Field(default=0, ge=0, le=0xFFFFFFFF)
    state: FabricState = "auto"


MAX_PROFILE_PROCESSES = 4  # per GPU: a few jobs sharing it, not a process table
PID_MAX = 4_194_304  # the kernel's PID_MAX_LIMIT on 64-bit: no pid is above it
# What nvidia-smi shows for a process: its name or path, printable, one line
ProcessName = Annotated[str, Field(min_length=1, max_length=64,
                                   pattern=r"^[!-~]([ -~]*[!-~])?$")]


class Process(ClosedSection):
    """mokkafs: a compute process running on the GPU (NVML's running processes). ``pid`` is
    simulated: no process of the node needs it, though monitors that read ``/proc/<pid>``
    (gpustat, nvitop) list only pids their ``/proc`` has. On a GPU in MIG mode, the GPU and
    compute instance it runs in (their IDs in the GPU's layout), both or neither."""

    pid: int = Field(ge=1, le=PID_MAX)
    name: ProcessName
    used_memory_mib: int = Field(ge=0, le=1 << 24)
    gpu_instance: int | None = Field(default=None, ge=0, lt=MAX_GIS)
    compute_instance: int | None = Field(default=None, ge=0, lt=MAX_CIS)


class NvmlKeys(OpenSection):
    """The keys DeviceConfig takes from nvml-mock for NVML alone."""

    brand: Brand | None = None
    board_part_number: Text | None = None
    compute_capability: ComputeCapability | None = None
    memory: FbMemory = FbMemory()
    power: Power = Power()
    thermal: Thermal = Thermal()
    fan: Fan = Fan()
    clocks: Clocks = Clocks()
    performance_state: PState | None = None
    utilization: Utilization = Utilization()
    persistence_mode: Mode | None = None
    compute_mode: ComputeMode | None = None
    ecc: Ecc = Ecc()
    fabric: Fabric | None = None
    processes: list[Process] = Field(default=[], max_length=MAX_PROFILE_PROCESSES)  # mokkafs


NVML_KEYS = tuple(NvmlKeys.model_fields)
