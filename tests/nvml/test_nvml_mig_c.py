"""mokkafs's NVML MIG calls from C under AddressSanitizer and UBSan (native/tests/nvmlmig.c)
on a mounted h100-mig view: every GPU instance (profile, placement, compute instances) and
every MIG device (UUID, IDs, slices, memory) equals what the capability files list and NVML's
own place says of them; bad input, 8 threads at once, and a stand-in daemon's answers (a
refusal, a hang-up, an answer too long, "ok" nested and escaped) answer as the API says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.mounts import Mount, mokkafs_mount
from tests.helpers.nvml import c_program, place_values, run_c_program, view_gpus
from tests.helpers.nvml_mig import capability_instances


@pytest.fixture(scope="module")
def nvmlmig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return c_program(tmp_path_factory, "nvmlmig")


@pytest.fixture(scope="module")
def h100_mig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    mnt = tmp_path_factory.mktemp("mig-c") / "mnt"
    with mokkafs_mount(mnt, ["--profile", "h100-mig", "--node-name", "node-a"]) as mount:
        yield mount


def expected(root: Path) -> tuple[set[tuple[str, ...]], list[list[str]]]:
    """The "gi" lines (as a set) and the "mig" lines the view's files call for."""
    gis: set[tuple[str, ...]] = set()
    devices: list[list[str]] = []
    for index, gpu in enumerate(view_gpus(root)):
        place = place_values(root, gpu.bdf)
        memory = {int(v.split()[0]): int(v.split()[4]) for k, v in place.items()
                  if k.startswith("mig_gip.")}
        reserved = int(place["memory_reserved"])
        n = 0
        for gi, cis in sorted(capability_instances(root, gpu.minor).items()):
            profile, start, size, slices = place[f"mig_gi.{gi}"].split()
            rows = [place[f"mig_ci.{gi}.{ci}"].split() for ci in cis]
            gis.add(("gi", str(index), str(gi), profile, start, size,
                     ",".join(f"{ci}:{row[1]}" for ci, row in zip(cis, rows, strict=True))))
            for ci, row in zip(cis, rows, strict=True):
                total, share = memory[int(profile)] << 20, reserved // 8 * int(size)
                devices.append(["mig", str(index), str(n), row[3], str(gi), str(ci), slices,
                                row[1], str(memory[int(profile)]),
                                f"{total},{share},{total - share},0"])
                n += 1
    return gis, devices


def test_mig_from_c_under_sanitizers(nvmlmig: Path, h100_mig: Mount, tmp_path: Path) -> None:
    result = run_c_program(nvmlmig, h100_mig.path, str(tmp_path / "control"))
    assert result.returncode == 0 and "0 failed" in result.stdout, result.stdout + result.stderr
    assert "Sanitizer" not in result.stderr, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    gis, devices = expected(h100_mig.path)
    assert {tuple(line) for line in lines if line[0] == "gi"} == gis
    assert len(gis) == 14 and len(devices) == 15  # h100-mig's GPUs 0-3
    assert [line for line in lines if line[0] == "mig"] == devices
