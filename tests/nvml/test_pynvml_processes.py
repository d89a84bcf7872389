"""Running processes through NVIDIA's own Python bindings (nvidia-ml-py) and gpustat on
mokkafs's NVML: a profile's processes answer nvmlDeviceGetComputeRunningProcesses with their
pid and memory, and nvmlSystemGetProcessName with their name, and gpustat lists those its
/proc has; a gpu-busy fault applied over the control socket makes a process appear, memory
used and the utilization following (nvmlDeviceGetProcessUtilization's sample its own), and go
when cleared. Polled, never slept."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers.faults import fault_node
from tests.helpers.live import profile_text, rename_over
from tests.helpers.nvml import PynvmlProcess, nvml_env
from tests.nvml.test_monitors import run_tool

MIB = 1 << 20
IDLE = 0x1
# At each line "I": GPU I's processes (pid, memory, name), memory and utilization
PROCESSES = """
import json, sys, pynvml as n
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
for line in iter(sys.stdin.readline, ""):
    h = handles[int(line)]
    procs = n.nvmlDeviceGetComputeRunningProcesses(h)
    memory = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
    u = n.nvmlDeviceGetUtilizationRates(h)
    try:
        samples = [[s.pid, s.smUtil, s.memUtil, s.encUtil, s.decUtil]
                   for s in n.nvmlDeviceGetProcessUtilization(h, 0)]
    except n.NVMLError_NotFound:
        samples = "not found"
    print(json.dumps({
        "procs": [[p.pid, p.usedGpuMemory, n.nvmlSystemGetProcessName(p.pid)]
                  for p in procs],
        "graphics": len(n.nvmlDeviceGetGraphicsRunningProcesses(h)),
        "used": memory.used, "reserved": memory.reserved, "free": memory.free,
        "total": memory.total, "util": [u.gpu, u.memory],
        "reasons": n.nvmlDeviceGetCurrentClocksEventReasons(h), "samples": samples,
    }), flush=True)
"""



def test_a_profiles_processes_in_nvml_and_gpustat(tmp_path: Path) -> None:
    me = os.getpid()  # a pid this /proc has: gpustat lists only those
    with fault_node(tmp_path) as node_:
        rename_over(node_.live, profile_text("h100").replace(
            "device_defaults:\n", f"device_defaults:\n  processes: [{{pid: {me}, name: "
            "/usr/bin/python3, used_memory_mib: 2048}]\n", 1))
        node_.live.wait_generation(2)
        process = PynvmlProcess(PROCESSES, nvml_env(node_.live.mount.path))
        try:
            got = process.ask("0")
            assert got["procs"] == [[me, 2048 * MIB, "/usr/bin/python3"]]
            assert got["graphics"] == 0
            assert got["used"] == 2048 * MIB and got["reserved"] == 1 << 30
            assert got["free"] == got["total"] - got["reserved"] - got["used"]
            assert got["reasons"] & IDLE == 0  # something runs
        finally:
            out = process.close()
        assert process.process.returncode == 0, out
        report = json.loads(run_tool(["gpustat", "--json"], node_.live.mount.path))
        for gpu in report["gpus"]:
            assert [(p["pid"], p["gpu_memory_usage"]) for p in gpu["processes"]] == [
                (me, 2048)]
            assert gpu["memory.used"] == 2048


def test_a_busy_gpu_runs_a_process_until_cleared(tmp_path: Path) -> None:
    with fault_node(tmp_path) as node_:
        process = PynvmlProcess(PROCESSES, nvml_env(node_.live.mount.path))
        try:
            idle = process.ask("2")
            assert idle["procs"] == [] and idle["used"] == 0 and idle["util"] == [0, 0]
            assert idle["reasons"] & IDLE
            assert idle["samples"] == "not found"  # no process had any utilization
            faults = tmp_path / "busy.yaml"
            faults.write_text("faults:\n  - {name: busy, kind: gpu-busy, target: gpu2, "
                              "pid: 4242, process: python3, memory_mib: 30720, "
                              "utilization_gpu: 98, utilization_memory: 45}\n")
            assert node_.fault("apply", str(faults)).returncode == 0
            busy = process.ask_until("2", lambda g: g["procs"], "the process running")
            assert busy["procs"] == [[4242, 30720 * MIB, "python3"]]
            assert busy["used"] == 30720 * MIB and busy["reserved"] == idle["reserved"]
            assert busy["util"] == [98, 45] and busy["reasons"] & IDLE == 0
            assert busy["samples"] == [[4242, 98, 45, 0, 0]]  # the GPU's, its one process's
            assert process.ask("1")["procs"] == []  # the others
            assert node_.fault("clear", "busy").returncode == 0
            gone = process.ask_until("2", lambda g: not g["procs"], "the process gone")
            assert gone == idle
        finally:
            out = process.close()
        assert process.process.returncode == 0, out
