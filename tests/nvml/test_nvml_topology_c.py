"""mokkafs's topology, NVLink and fabric calls from C under AddressSanitizer and UBSan
(native/tests/nvmltopo.c): on a mounted gb200 view, every pair's level equals what lspci
says, the NVLinks and the fabric struct equal NVML's own place, a v2 fabric struct is filled
without a byte past its end; on a tree with switches below switches, which no shipped
profile builds, the levels are SINGLE and MULTIPLE as PCIe's nesting says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.lspci_topology import lspci_of
from tests.helpers.mounts import mokkafs_mount
from tests.helpers.nvml import c_program, place_values, run_c_program, view_gpus


@pytest.fixture(scope="module")
def nvmltopo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return c_program(tmp_path_factory, "nvmltopo")


def run(program: Path, root: Path) -> list[list[str]]:
    result = run_c_program(program, root)
    assert result.returncode == 0 and "0 failed" in result.stdout, result.stdout + result.stderr
    assert "Sanitizer" not in result.stderr, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def rows(lines: list[list[str]], kind: str) -> list[list[str]]:
    return [line[2:] for line in lines if line[0] == kind]


def test_gb200_from_c_under_sanitizers(nvmltopo: Path, tmp_path: Path) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "gb200", "--node-name", "node-a"]) as m:
        lines = run(nvmltopo, m.path)
        lspci = lspci_of(m.path)
        gpus = view_gpus(m.path)
        assert rows(lines, "levels") == [[str(lspci.level(a.bdf, b.bdf)) for b in gpus]
                                         for a in gpus]
        for gpu, links, fabric in zip(gpus, rows(lines, "links"), rows(lines, "fabric"),
                                      strict=True):
            v = place_values(m.path, gpu.bdf)
            assert links == [v["nvlink_links"], "0", v["nvlink.0.state"], v["nvlink.0.version"],
                             v["nvlink.0.remote_type"]] == ["18", "0", "1", "7", "2"]
            assert fabric == ["0", v["fabric_cluster_uuid"], v["fabric_clique_id"],
                              v["fabric_state"], v["fabric_status"], v["fabric_health_mask"],
                              v["fabric_health_summary"]]


def gpu_at(root: Path, bridges: list[str], bdf: str, numa: int) -> None:
    """A GPU below ``bridges`` of host bridge pci0000:00, as the driver and the sysfs list it."""
    path = root / "sys/devices/pci0000:00" / "/".join([*bridges, bdf])
    path.mkdir(parents=True)
    (path / "numa_node").write_text(f"{numa}\n")
    (path / "local_cpulist").write_text("0-3\n")
    (path / "config").write_bytes(bytes.fromhex("de10 3023"))  # NVIDIA's: on the bus, not lost
    link = root / "sys/bus/pci/devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(f"../../../devices/pci0000:00/{'/'.join([*bridges, bdf])}")
    info = root / "proc/driver/nvidia/gpus" / bdf / "information"
    info.parent.mkdir(parents=True)
    info.write_text(f"Model: \t\t NVIDIA H100\nGPU UUID: \t GPU-{bdf}\nBus Location: \t {bdf}\n"
                    "GPU Excluded: \t No\n")


def test_switches_below_switches_are_multiple(nvmltopo: Path, tmp_path: Path) -> None:
    """Root port 00:01.0, switch 01 (downstream ports 02:00.0 and 02:01.0); below the first,
    switch 03 with GPUs A and B on two ports; below the second, switch 07 with GPU C. A and B
    cross one switch (SINGLE); A and C three (MULTIPLE). No NVLink, no fabric: the place of
    NVML's own is not there."""
    root = tmp_path / "view"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text("NVRM version: 550.163.01\n")
    upper = ["0000:00:01.0", "0000:01:00.0"]
    gpu_at(root, [*upper, "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"], "0000:05:00.0", 0)
    gpu_at(root, [*upper, "0000:02:00.0", "0000:03:00.0", "0000:04:01.0"], "0000:06:00.0", 0)
    gpu_at(root, [*upper, "0000:02:01.0", "0000:07:00.0", "0000:08:00.0"], "0000:09:00.0", 0)
    lines = run(nvmltopo, root)
    assert rows(lines, "levels") == [["0", "10", "20"], ["10", "0", "20"], ["20", "20", "0"]]
    assert rows(lines, "links") == [["0", "3", "9", "9", "9"]] * 3  # NOT_SUPPORTED
    assert rows(lines, "fabric") == [["3"]] * 3
