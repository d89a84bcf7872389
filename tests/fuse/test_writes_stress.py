"""Concurrent writers and readers never hang the mount (issue 37, docs/writes.md "Writes and
the kernel's caches"): twelve writer threads on one PF and one GPU, with two readers listing
their directories, in both cache modes. Before the fix a READDIRPLUS that brought a written
file's new mtime waited for that file's page, which its writer held until the WRITE was
answered, while holding the directory's lock; the WRITE's answer waited for the swap lock,
held by an install whose invalidation waited for that directory's lock. It hung within the
first few hundred writes, every run.

The run is bounded: a fixed number of writes per writer, and a hang is declared when no
operation completes for ``STALL`` seconds. Then the mount is forced off (``umount -f`` aborts
the FUSE connection, which frees every stuck thread) before the test fails, so a failing run
never hangs the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.live import Live, live_mount
from tests.helpers.mounts import REPO

ROUNDS = 12  # per writer thread: 2 writes each, 288 writes in all
STALL = 30.0  # seconds without one operation done: hung
DEADLINE = 300.0  # seconds for the whole run, whatever progress it makes


@pytest.fixture(params=["no-open", "keep-cache"])
def node(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Live]:
    with live_mount(tmp_path, "h100", extra=["--writable", "--cache-mode", request.param],
                    expect=["dropped"]) as live:
        yield live


def stuck_threads(pid: int) -> list[str]:
    """Where each thread of ``pid`` waits in the kernel (wchan), for the failure message."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.append(f"{pid}/{task.name} {(task / 'comm').read_text().strip()}: "
                         f"{(task / 'wchan').read_text()}")
        except OSError:
            continue
    return found


def force_unmount(mountpoint: Path) -> None:
    """Abort the FUSE connection (every request fails, every waiter wakes), then detach the
    mount and what is mounted below it."""
    subprocess.run(["umount", "-f", str(mountpoint)], capture_output=True, check=False)
    subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)


def test_concurrent_writers_and_readers_never_hang(node: Live, tmp_path: Path) -> None:
    progress = tmp_path / "progress"
    with open(progress, "wb") as out:
        stress = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.write_stress", str(node.mount.path),
             str(ROUNDS)], stdout=out, stderr=subprocess.PIPE, cwd=REPO)
    start = last_change = time.monotonic()
    done = 0
    while stress.poll() is None:
        time.sleep(0.2)
        now, size = time.monotonic(), progress.stat().st_size
        if size != done:
            done, last_change = size, now
        if now - last_change > STALL or now - start > DEADLINE:
            where = stuck_threads(stress.pid) + stuck_threads(node.mount.process.pid)
            force_unmount(node.mount.path)
            stress.kill()
            stress.wait()
            pytest.fail(f"no progress for {now - last_change:.0f} s after {done} operations "
                        "(writers and readers hung): " + "; ".join(where))
    assert stress.stderr is not None
    errors = stress.stderr.read().decode()
    stress.stderr.close()
    assert stress.returncode == 0, errors
    assert done >= 12 * ROUNDS * 2
    # Every write was answered and the view still answers: the last values each wrote hold.
    pf = node.mount.path / "sys/bus/pci/devices/0000:18:00.0"
    assert (pf / "sriov_numvfs").read_text() == "0\n"
    assert (pf / "sriov_drivers_autoprobe").read_text() == "1\n"
    assert os.listdir(pf)
