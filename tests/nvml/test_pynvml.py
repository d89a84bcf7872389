"""NVIDIA's own Python bindings (nvidia-ml-py) on mokkafs's NVML, given nothing but what
``mokkafs nvml-env`` prints: the count, names, UUIDs, minors, bus IDs, PCI ids, links and
NUMA nodes equal the view's sysfs and /proc/driver/nvidia/gpus/*/information, on h100, b200
and gb200; a fault applied after nvmlInit shows at the next call, through the same handles;
without a view, nvmlInit fails as the real library does without a driver."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mokkafs.delivery.nvml import library_dir
from tests.helpers.faults import fault_node
from tests.helpers.mounts import REPO, mokkafs_mount, wait_for
from tests.helpers.nvml import PynvmlProcess, ViewGpu, nvml_bus_id, nvml_env, view_gpus

# Prints one JSON line of every GPU at each line it reads on stdin (handles made once).
READER = """
import json, sys, pynvml as n
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
def gpu(h):
    try:
        p = n.nvmlDeviceGetPciInfo(h)
        return {"name": n.nvmlDeviceGetName(h), "uuid": n.nvmlDeviceGetUUID(h),
                "minor": n.nvmlDeviceGetMinorNumber(h), "bus_id": p.busId,
                "legacy": p.busIdLegacy, "device_id": p.pciDeviceId,
                "subsystem_id": p.pciSubSystemId, "index": n.nvmlDeviceGetIndex(h),
                "link": [n.nvmlDeviceGetCurrPcieLinkGeneration(h),
                         n.nvmlDeviceGetCurrPcieLinkWidth(h),
                         n.nvmlDeviceGetMaxPcieLinkGeneration(h),
                         n.nvmlDeviceGetMaxPcieLinkWidth(h)],
                "numa": n.nvmlDeviceGetNumaNodeId(h),
                "by_uuid": n.nvmlDeviceGetIndex(
                    n.nvmlDeviceGetHandleByUUID(n.nvmlDeviceGetUUID(h))),
                "by_bus_id": n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByPciBusId(p.busId))}
    except n.NVMLError as e:
        return {"error": e.value}
for _ in iter(sys.stdin.readline, ""):
    print(json.dumps({"driver": n.nvmlSystemGetDriverVersion(),
                      "cuda": n.nvmlSystemGetCudaDriverVersion_v2(),
                      "count": n.nvmlDeviceGetCount(), "gpus": [gpu(h) for h in handles]}),
          flush=True)
n.nvmlShutdown()
"""


def expected(gpu: ViewGpu, index: int) -> dict[str, object]:
    bus_id = nvml_bus_id(gpu.bdf)
    return {"name": gpu.name, "uuid": gpu.uuid, "minor": gpu.minor, "bus_id": bus_id,
            "legacy": bus_id[4:], "device_id": gpu.device_id, "subsystem_id": gpu.subsystem_id,
            "index": index, "link": list(gpu.link), "numa": gpu.numa, "by_uuid": index,
            "by_bus_id": index}


def check_against_view(snapshot: dict[str, object], root: Path) -> None:
    gpus = view_gpus(root)
    assert snapshot["count"] == len(gpus) > 0
    assert snapshot["gpus"] == [expected(g, i) for i, g in enumerate(gpus)]
    version = (root / "proc/driver/nvidia/version").read_text()
    assert f"  {snapshot['driver']}  " in version


@pytest.mark.parametrize("profile", ["h100", "b200", "gb200"])
def test_pynvml_sees_the_view(tmp_path: Path, profile: str) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", profile, "--node-name", "node-a"]) as m:
        reader = PynvmlProcess(READER, nvml_env(m.path))
        try:
            check_against_view(reader.read(), m.path)
        finally:
            out = reader.close()
        assert reader.process.returncode == 0, out


def test_a_fault_after_init_shows_at_the_next_call(tmp_path: Path) -> None:
    with fault_node(tmp_path) as node:
        root = node.live.mount.path
        reader = PynvmlProcess(READER, nvml_env(root))
        try:
            before = reader.read()
            check_against_view(before, root)
            faults = tmp_path / "faults.yaml"
            faults.write_text("faults:\n"
                              "  - {name: slow, kind: pcie-degraded, target: gpu1, gen: 3, "
                              "width: 8}\n"
                              "  - {name: gone, kind: gpu-removed, target: gpu7}\n")
            assert node.fault("apply", str(faults)).returncode == 0
            wait_for(lambda: len(os.listdir(root / "proc/driver/nvidia/gpus")) == 7, 60,
                     "the removed GPU gone from the view")
            after = reader.read()
        finally:
            out = reader.close()
        assert reader.process.returncode == 0, out
    gpus = after["gpus"]
    assert isinstance(gpus, list) and after["count"] == 7
    assert gpus[1]["link"] == [3, 8, 5, 16]  # the degraded link, as current_link_* say
    assert gpus[7] == {"error": 15}  # the removed GPU's handle: NVML_ERROR_GPU_IS_LOST
    assert gpus[0] == before["gpus"][0]


def test_without_a_view_init_is_driver_not_loaded(tmp_path: Path) -> None:
    env = {"LD_LIBRARY_PATH": str(library_dir()), "MOKKAFS_ROOT": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", "import pynvml; pynvml.nvmlInit()"],
                            capture_output=True, text=True, timeout=60, cwd=REPO,
                            env={**os.environ, **env})
    assert result.returncode == 1
    assert "NVMLError_DriverNotLoaded: Driver Not Loaded" in result.stderr, result.stderr


def test_nvml_env_refuses_what_is_not_a_mount(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mokkafs", "nvml-env", "--mountpoint",
                             str(tmp_path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 3 and "export" not in result.stdout, result
