"""mokkafs's NVML from C under AddressSanitizer and UBSan (native/tests/nvmltest.c) on a
mounted h100 view: every GPU's identity, PCI ids, link, NUMA node and CPUs equal the view's
own files; what no kernel file holds (memory, clocks, power, modes, ...) equals NVML's own
place (run/mokkafs-nvml) and the profile; bad input, the lifecycle and 8 threads at once
answer as the API says; the running processes (none on h100; a profile's, rendered) with
their count-in/out protocol and their names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.mounts import SHIPPED_PROFILES, Mount
from tests.helpers.nvml import (
    c_program,
    nvml_bus_id,
    place_values,
    profile_defaults,
    run_c_program,
    view_gpus,
)


@pytest.fixture(scope="module")
def nvmltest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return c_program(tmp_path_factory, "nvmltest")


def run(nvmltest: Path, root: Path) -> subprocess.CompletedProcess[str]:
    return run_c_program(nvmltest, root)


def cpu_bits(words: str) -> frozenset[int]:
    """The program's four 64-bit words of the CPU set, as CPU numbers."""
    return frozenset(w * 64 + b for w, word in enumerate(words.split(","))
                     for b in range(64) if int(word, 16) >> b & 1)


def check_values(rows: list[list[str]], root: Path, energy_before: list[int]) -> None:
    """The "values" lines against the files of NVML's own place and the h100 profile."""
    defaults = profile_defaults("h100")
    memory, clocks, power = defaults["memory"], defaults["clocks"], defaults["power"]
    total, reserved = memory["total_bytes"], memory["reserved_bytes"]
    gpus = view_gpus(root)
    assert len(rows) == len(gpus) == 8
    for i, (line, gpu, before) in enumerate(zip(rows, gpus, energy_before, strict=True)):
        assert line[:2] == ["values", str(i)]
        row = line[1:]
        v = place_values(root, gpu.bdf)
        assert row[1:7] == [v["architecture"], v["brand"],
                            f"{v['cuda_cc_major']}.{v['cuda_cc_minor']}", v["serial"],
                            v["board_part_number"], ",".join(
                                [str(total), str(total - reserved), str(reserved)])]
        assert row[1:6] == ["9", "14", "9.0", v["serial"], defaults["board_part_number"]]
        assert row[7] == f"{total},{reserved},{total - reserved},0"  # v2: total reserved free used
        assert row[8] == ",".join(str(clocks[f"{d}_{k}"]) for k in ("current", "max")
                                  for d in ("graphics", "sm", "memory"))
        assert row[9] == ",".join(str(power[k]) for k in ("current_draw_mw", "default_limit_mw",
                                                           "enforced_limit_mw"))
        after = int(place_values(root, gpu.bdf)["energy"])
        assert power["total_energy_consumption_mj"] <= before <= int(row[10]) <= after
        assert row[11:] == [str(defaults["thermal"]["temperature_gpu_c"]), "0,0", "1", "0",
                            "1,1", "0"]  # utilization, persistence, compute, ECC, P0


def test_the_api_from_c_under_sanitizers(nvmltest: Path, mount_h100: Mount) -> None:
    energy = [int(place_values(mount_h100.path, g.bdf)["energy"])
              for g in view_gpus(mount_h100.path)]
    result = run(nvmltest, mount_h100.path)
    assert result.returncode == 0 and "0 failed" in result.stdout, result.stdout + result.stderr
    assert "Sanitizer" not in result.stderr, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    driver = next(line[1] for line in lines if line[0] == "driver")
    version = (mount_h100.path / "proc/driver/nvidia/version").read_text()
    assert f"  {driver}  " in version
    assert next(line[1:] for line in lines if line[0] == "versions") == [f"12.{driver}", "12040"]
    rows = [line[1:] for line in lines if line[0] == "gpu"]
    gpus = view_gpus(mount_h100.path)
    assert len(rows) == len(gpus) == 8
    for i, (row, gpu) in enumerate(zip(rows, gpus, strict=True)):
        assert row[:6] == [str(i), nvml_bus_id(gpu.bdf), nvml_bus_id(gpu.bdf)[4:], gpu.name,
                           gpu.uuid, str(gpu.minor)]
        assert (int(row[6], 16), int(row[7], 16)) == (gpu.device_id, gpu.subsystem_id)
        assert tuple(int(v) for v in row[8:12]) == gpu.link
        assert int(row[12]) == gpu.numa
        assert cpu_bits(row[13]) == {c for c in gpu.cpus if c < 256}
    check_values([line for line in lines if line[0] == "values"], mount_h100.path, energy)
    assert [line[1:] for line in lines if line[0] == "procs"] == [[str(i), "0"]
                                                                  for i in range(8)]
    assert [line[1:] for line in lines if line[0] == "samples"] == [[str(i)] for i in range(8)]


def test_a_profiles_processes_from_c(nvmltest: Path, tmp_path: Path) -> None:
    profile = tmp_path / "procs.yaml"
    profile.write_text((SHIPPED_PROFILES / "h100.yaml").read_text().replace(
        "device_defaults:\n", "device_defaults:\n  processes: [{pid: 1234, name: /usr/bin/"
        "python3, used_memory_mib: 1024}, {pid: 77, name: trainer, used_memory_mib: 512}]\n",
        1).replace("utilization: {gpu: 0, memory: 0}", "utilization: {gpu: 7, memory: 1}", 1))
    view = tmp_path / "view"
    subprocess.run([sys.executable, "-m", "mokkafs", "render", "--profile", str(profile),
                    str(view)], check=True, capture_output=True, timeout=120)
    result = run(nvmltest, view)
    assert result.returncode == 0 and "0 failed" in result.stdout, result.stdout + result.stderr
    assert "Sanitizer" not in result.stderr, result.stderr
    procs = [line.split("\t")[2:] for line in result.stdout.splitlines()
             if line.startswith("procs\t")]
    assert procs == [["2", f"1234:{1 << 30}:/usr/bin/python3,77:{512 << 20}:trainer"]] * 8
    # the GPU's utilization shared among them, the remainder to the first; none for a process
    # whose share is nothing
    samples = [line.split("\t")[2:] for line in result.stdout.splitlines()
               if line.startswith("samples\t")]
    assert samples == [["1234:4:1,77:3:0"]] * 8


def test_no_view_is_driver_not_loaded(nvmltest: Path, tmp_path: Path) -> None:
    result = run(nvmltest, tmp_path)  # an empty directory: no proc/driver/nvidia/version
    assert result.returncode == 1
    assert "FAIL init: 9 (Driver Not Loaded), expected 0" in result.stdout, result.stdout
    assert "Sanitizer" not in result.stderr, result.stderr
