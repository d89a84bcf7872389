"""Processes in MIG instances through NVIDIA's own Python bindings (nvidia-ml-py) on mokkafs's
NVML: a profile's process names its GPU and compute instance; a MIG device's handle lists the
processes of its compute instance alone, the GPU's handle lists them all with their
instances' IDs, and a MIG device's memory used is what its GPU instance's processes hold. A
compute instance destroyed at run time (``mokkafs mig -dci``) takes its process with it, seen
by a consumer that initialized before. Polled, never slept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.mounts import REPO, SHIPPED_PROFILES, mokkafs_mount
from tests.helpers.nvml import PynvmlProcess, nvml_env

MIB = 1 << 20
NO_INSTANCE = 0xFFFFFFFF
# GPU 0 of h100-mig: GI 2 (3g, one CI 0), GI 4 (2g, CIs 0 and 1), GIs 7 and 8 (1g)
PROCESSES = """\
    processes:
      - {pid: 4101, name: train-a, used_memory_mib: 1024, gpu_instance: 4, compute_instance: 0}
      - {pid: 4102, name: train-b, used_memory_mib: 512, gpu_instance: 4, compute_instance: 1}
      - {pid: 4103, name: serve, used_memory_mib: 2048, gpu_instance: 2, compute_instance: 0}
"""
# At each line: GPU 0's processes, then each of its MIG devices' (by GI and CI) with memory
SCRIPT = """
import json, sys, pynvml as n
n.nvmlInit()
gpu = n.nvmlDeviceGetHandleByIndex(0)
def procs(h):
    return sorted([p.pid, p.gpuInstanceId, p.computeInstanceId, p.usedGpuMemory]
                  for p in n.nvmlDeviceGetComputeRunningProcesses(h))
for line in iter(sys.stdin.readline, ""):
    devices = {}
    for i in range(n.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            h = n.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i)
        except n.NVMLError_NotFound:
            continue
        key = f"{n.nvmlDeviceGetGpuInstanceId(h)}/{n.nvmlDeviceGetComputeInstanceId(h)}"
        memory = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
        devices[key] = {"procs": procs(h), "used": memory.used}
    print(json.dumps({"gpu": procs(gpu), "devices": devices}), flush=True)
"""


def profile(tmp: Path) -> Path:
    text = (SHIPPED_PROFILES / "h100-mig.yaml").read_text()
    anchor = '    pci: {bus_id: "0000:1b:00.0"}\n'
    assert anchor in text
    path = tmp / "h100-mig-busy.yaml"
    path.write_text(text.replace(anchor, anchor + PROCESSES, 1))
    return path


def test_processes_in_mig_instances(tmp_path: Path) -> None:
    control = tmp_path / "ctl" / "socket"
    control.parent.mkdir(mode=0o700)
    with mokkafs_mount(tmp_path / "mnt", ["--profile", str(profile(tmp_path)),
                                          "--node-name", "node-a",
                                          "--control", str(control)]) as mount:
        process = PynvmlProcess(SCRIPT, nvml_env(mount.path))
        try:
            got = process.ask("0")
            assert got["gpu"] == [[4101, 4, 0, 1024 * MIB], [4102, 4, 1, 512 * MIB],
                                  [4103, 2, 0, 2048 * MIB]]
            devices = got["devices"]
            assert devices["4/0"]["procs"] == [[4101, 4, 0, 1024 * MIB]]
            assert devices["4/1"]["procs"] == [[4102, 4, 1, 512 * MIB]]
            assert devices["2/0"]["procs"] == [[4103, 2, 0, 2048 * MIB]]
            assert devices["7/0"]["procs"] == devices["8/0"]["procs"] == []
            # A MIG device's memory is its GPU instance's: both CIs of GI 4 hold 1.5 GiB
            assert devices["4/0"]["used"] == devices["4/1"]["used"] == 1536 * MIB
            assert devices["2/0"]["used"] == 2048 * MIB and devices["7/0"]["used"] == 0

            subprocess.run([sys.executable, "-m", "mokkafs", "mig", "--control", str(control),
                            "-i", "0", "-dci", "-gi", "2", "-ci", "0"], check=True, cwd=REPO,
                           capture_output=True, timeout=60)
            after = process.ask_until("0", lambda g: "2/0" not in g["devices"],
                                      "GI 2's compute instance gone")
            assert after["gpu"] == [[4101, 4, 0, 1024 * MIB], [4102, 4, 1, 512 * MIB]]
        finally:
            out = process.close()
        assert process.process.returncode == 0, out
