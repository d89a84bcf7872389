"""No file descriptor or memory leak in mokkafs's NVML over a million calls (issue 39):
native/tests/nvmlleak.c against the library as built, on an h100 view ``mokkafs render``
wrote as plain files (the calls read the same files as from a mount, faster); then fewer
calls with the library's sources under AddressSanitizer, whose LeakSanitizer reports at exit
what was never freed. A leak put in by hand (an event set's descriptor not closed, the CPU
set's buffer not freed) makes the first fail; docs/nvml.md says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.mounts import REPO
from tests.helpers.nvml import c_program, run_c_program

ASAN_CALLS = 250_000  # a quarter: the sanitized run is slower, and its proof is at exit


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The h100 view as plain files, NVML's own place (run/mokkafs-nvml) among them."""
    dest = tmp_path_factory.mktemp("view")
    subprocess.run([sys.executable, "-m", "mokkafs", "render", "--profile", "h100",
                    "--node-name", "node-a", str(dest)], check=True, cwd=REPO, timeout=120,
                   capture_output=True)
    assert (dest / "run/mokkafs-nvml/system").is_file()
    return dest


def checked(result: subprocess.CompletedProcess[str], calls: int) -> list[list[str]]:
    """The program's checkpoints, once its run passed: every call answered as expected."""
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "0 failed" in result.stdout, out
    assert "Sanitizer" not in result.stderr, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert next(line for line in lines if line[0] == "gpus") == ["gpus", "8"]
    assert int(next(line for line in lines if line[0] == "calls")[1]) >= calls
    points = [line[1:] for line in lines if line[0] == "checkpoint"]
    assert len(points) >= 10, out  # the baseline after the warm-up, then at least ten more
    assert len({fds for _, fds, _, _ in points}) == 1, points
    return points


def test_a_million_calls_leave_no_descriptor_and_no_memory(tmp_path_factory:
                                                            pytest.TempPathFactory,
                                                            rendered: Path) -> None:
    program = c_program(tmp_path_factory, "nvmlleak")
    points = checked(run_c_program(program, rendered), 1_000_000)
    heap = [int(h) for _, _, h, _ in points]
    assert max(heap) - heap[0] <= 65536 and max(heap) > 0, points  # mallinfo2 answered


def test_under_leak_sanitizer(tmp_path_factory: pytest.TempPathFactory, rendered: Path) -> None:
    program = c_program(tmp_path_factory, "nvmlleak_asan")
    checked(run_c_program(program, rendered, str(ASAN_CALLS), "fds-only"), ASAN_CALLS)
