"""What no kernel file holds, through NVIDIA's own Python bindings (nvidia-ml-py) on
mokkafs's NVML: every value equals the GPU's file in NVML's own place (run/mokkafs-nvml) and
the profile, on h100, b200 and gb200; on h200, whose profile states none of them, each call
answers NOT_SUPPORTED. On a node whose clock the test drives, the energy counter grows by the
power draw times the time; a GPU removed by a fault answers GPU_IS_LOST through its handle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.faults import fault_node
from tests.helpers.mounts import mokkafs_mount, wait_for
from tests.helpers.nvml import PynvmlProcess, nvml_env, place_values, profile_defaults, view_gpus

# One JSON line: every GPU's values (an NVML error's code in place of a value)
SNAPSHOT = """
import json, sys, pynvml as n
n.nvmlInit()
def call(f, *a):
    try:
        v = f(*a)
    except n.NVMLError as e:
        return {"error": e.value}
    if isinstance(v, n.c_nvmlMemory_v2_t):
        return [v.total, v.reserved, v.free, v.used]
    if isinstance(v, n.c_nvmlMemory_t):
        return [v.total, v.free, v.used]
    if isinstance(v, n.c_nvmlUtilization_t):
        return [v.gpu, v.memory]
    return list(v) if isinstance(v, (list, tuple)) else v
def gpu(h):
    return {
        "architecture": call(n.nvmlDeviceGetArchitecture, h),
        "brand": call(n.nvmlDeviceGetBrand, h),
        "cc": call(n.nvmlDeviceGetCudaComputeCapability, h),
        "serial": call(n.nvmlDeviceGetSerial, h),
        "part": call(n.nvmlDeviceGetBoardPartNumber, h),
        "memory": call(n.nvmlDeviceGetMemoryInfo, h),
        "memory_v2": call(n.nvmlDeviceGetMemoryInfo, h, n.nvmlMemory_v2),
        "clocks": [call(n.nvmlDeviceGetClockInfo, h, c) for c in range(3)],
        "max_clocks": [call(n.nvmlDeviceGetMaxClockInfo, h, c) for c in range(3)],
        "power": [call(n.nvmlDeviceGetPowerUsage, h),
                  call(n.nvmlDeviceGetPowerManagementLimit, h),
                  call(n.nvmlDeviceGetEnforcedPowerLimit, h)],
        "energy": call(n.nvmlDeviceGetTotalEnergyConsumption, h),
        "temperature": call(n.nvmlDeviceGetTemperature, h, 0),
        "utilization": call(n.nvmlDeviceGetUtilizationRates, h),
        "modes": [call(n.nvmlDeviceGetPersistenceMode, h), call(n.nvmlDeviceGetComputeMode, h),
                  call(n.nvmlDeviceGetEccMode, h), call(n.nvmlDeviceGetPerformanceState, h)],
        "fan": call(n.nvmlDeviceGetFanSpeed, h),
        "processes": call(n.nvmlDeviceGetComputeRunningProcesses, h),
    }
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
for _ in iter(sys.stdin.readline, ""):
    print(json.dumps([gpu(h) for h in handles]), flush=True)
"""
NOT_SUPPORTED, GPU_IS_LOST = {"error": 3}, {"error": 15}


def snapshots(root: Path) -> PynvmlProcess:
    return PynvmlProcess(SNAPSHOT, nvml_env(root))


def expected(v: dict[str, str], energy: object) -> dict[str, object]:
    """What NVML answers for a GPU whose file holds ``v``."""
    def num(key: str) -> object:
        return int(v[key]) if key in v else NOT_SUPPORTED

    def nums(*keys: str) -> object:
        return [int(v[k]) for k in keys] if all(k in v for k in keys) else NOT_SUPPORTED

    total, reserved, used = (int(v.get(k, 0)) for k in
                             ("memory_total", "memory_reserved", "memory_used"))
    free = total - reserved - used
    has_memory = "memory_total" in v
    return {
        "architecture": num("architecture"), "brand": num("brand"),
        "cc": nums("cuda_cc_major", "cuda_cc_minor"),
        "serial": v.get("serial", NOT_SUPPORTED), "part": v.get("board_part_number", NOT_SUPPORTED),
        "memory": [total, free, reserved + used] if has_memory else NOT_SUPPORTED,
        "memory_v2": [total, reserved, free, used] if has_memory else NOT_SUPPORTED,
        "clocks": [num(f"clock_{d}") for d in ("graphics", "sm", "memory")],
        "max_clocks": [num(f"max_clock_{d}") for d in ("graphics", "sm", "memory")],
        "power": [num("power_usage"), num("power_limit"), num("enforced_power_limit")],
        "energy": energy, "temperature": num("temperature_gpu"),
        "utilization": nums("utilization_gpu", "utilization_memory"),
        "modes": [num("persistence_mode"), num("compute_mode"),
                  nums("ecc_current", "ecc_pending"), num("performance_state")],
        "fan": num("fan_speed"), "processes": [],
    }


@pytest.mark.parametrize("profile", ["h100", "b200", "gb200", "h200"])
def test_pynvml_values_are_the_places_and_the_profiles(tmp_path: Path, profile: str) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", profile, "--node-name", "node-a"]) as m:
        process = snapshots(m.path)
        try:
            got = process.read()
        finally:
            out = process.close()
        assert process.process.returncode == 0, out
        gpus = view_gpus(m.path)
        files = [place_values(m.path, gpu.bdf) for gpu in gpus]
    assert len(got) == len(gpus) > 0
    for snapshot, v in zip(got, files, strict=True):
        energy = snapshot["energy"]
        assert snapshot == expected(v, energy if "energy" in v else NOT_SUPPORTED)
        assert snapshot["fan"] == NOT_SUPPORTED  # every shipped board is fanless or passive
    defaults = profile_defaults(profile)
    memory, clocks = got[0]["memory"], got[0]["clocks"]
    assert isinstance(clocks, list)
    if "memory" not in defaults:  # h200: its profile states none of them
        assert memory == got[0]["brand"] == clocks[0] == NOT_SUPPORTED
        return
    assert isinstance(memory, list) and memory[0] == defaults["memory"]["total_bytes"]
    assert got[0]["cc"] == [defaults["compute_capability"]["major"],
                            defaults["compute_capability"]["minor"]]
    assert got[0]["part"] == defaults["board_part_number"]


def test_energy_follows_the_clock_and_a_removed_gpu_is_lost(tmp_path: Path) -> None:
    draw = profile_defaults("h100")["power"]["current_draw_mw"]
    with fault_node(tmp_path) as node:
        root = node.live.mount.path
        process = snapshots(root)
        try:
            node.at(10.0)
            first = process.read()
            node.at(30.0)
            second = process.read()
            faults = tmp_path / "faults.yaml"
            faults.write_text("faults:\n  - {name: gone, kind: gpu-removed, target: gpu7}\n")
            assert node.fault("apply", str(faults)).returncode == 0
            wait_for(lambda: len(os.listdir(root / "proc/driver/nvidia/gpus")) == 7, 60,
                     "the removed GPU gone from the view")
            after = process.read()
        finally:
            out = process.close()
        assert process.process.returncode == 0, out
    assert int(second[0]["energy"]) - int(first[0]["energy"]) == draw * 20
    assert after[7]["memory"] == after[7]["temperature"] == after[7]["processes"] == GPU_IS_LOST
    assert after[0]["memory"] == first[0]["memory"]
