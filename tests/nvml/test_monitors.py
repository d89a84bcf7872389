"""The monitoring tools on mokkafs's NVML, given nothing but what ``mokkafs nvml-env`` prints,
on a mounted h100 view: gpustat names every GPU by the view's UUID with the profile's memory
total, and ``nvitop -1`` by the view's bus ID with the same total."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.mounts import REPO, Mount
from tests.helpers.nvml import nvml_bus_id, nvml_env, profile_defaults, view_gpus

TOOLS = Path(sys.executable).parent  # the [test] extra installs them beside the interpreter
MIB = 1 << 20


def run_tool(args: list[str], root: Path) -> str:
    env = {**os.environ, **nvml_env(root), "COLUMNS": "200", "LINES": "60"}
    result = subprocess.run([str(TOOLS / args[0]), *args[1:]], capture_output=True, text=True,
                            timeout=120, env=env, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_gpustat_names_each_gpu_by_the_views_uuid(mount_h100: Mount) -> None:
    report = json.loads(run_tool(["gpustat", "--json"], mount_h100.path))
    total = profile_defaults("h100")["memory"]["total_bytes"]
    gpus = view_gpus(mount_h100.path)
    assert [(g["index"], g["uuid"], g["name"]) for g in report["gpus"]] == [
        (i, gpu.uuid, gpu.name) for i, gpu in enumerate(gpus)]
    for g in report["gpus"]:
        assert (g["memory.total"], g["memory.used"]) == (total // MIB, 0)
        assert (g["power.draw"], g["enforced.power.limit"], g["temperature.gpu"]) == (95, 700, 34)
        assert g["fan.speed"] is None  # fanless: NOT_SUPPORTED
        assert g["processes"] == []


def test_nvitop_names_each_gpu_by_the_views_bus_id(mount_h100: Mount) -> None:
    screen = run_tool(["nvitop", "-1"], mount_h100.path)
    gib = profile_defaults("h100")["memory"]["total_bytes"] / (1 << 30)
    rows = [line for line in screen.splitlines() if "HBM3" in line]
    gpus = view_gpus(mount_h100.path)
    assert len(rows) == len(gpus) == 8, screen
    for i, (row, gpu) in enumerate(zip(rows, gpus, strict=True)):
        assert row.split("│")[1].split()[0] == str(i), screen
        assert nvml_bus_id(gpu.bdf) in row, screen
    assert screen.count(f"0B / {gib:.2f}GiB") == 8, screen
    assert "CUDA Driver Version: 12.4" in screen, screen
