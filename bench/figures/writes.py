"""Sysfs writes: how long after ``echo N > sriov_numvfs`` a new reader sees the VFs (and, at
``echo 0``, sees them gone), on a ``--writable`` mount."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench.harness import REPO, daemon

SEEN_WITHIN_S = 10.0  # a write not seen by then is an error of the figure


def _until(pf: Path, shown: bool) -> None:
    """Until a listing of ``pf`` shows its VFs (``shown``) or not."""
    deadline = time.monotonic() + SEEN_WITHIN_S
    while ("virtfn3" in os.listdir(pf)) != shown:
        if time.monotonic() > deadline:
            raise RuntimeError("a write was not seen within 10 s")


def write_visibility(count: int, tmp: Path) -> dict[str, Any]:
    """``count`` times: 4 VFs made, then removed, each timed from just before the write until
    a listing of the PF's directory (a new open of it) shows the change. The write returns
    once the view is installed, so the figure holds the write's own time."""
    enable: list[float] = []
    disable: list[float] = []
    with daemon(REPO / "mokkafs/profiles/h100.yaml", tmp / "mnt-writes", "--writable") as d:
        pf = next(p.parent for p in sorted((d.mnt / "sys/bus/pci/devices").glob(
            "*/sriov_totalvfs")) if int(p.read_text()) >= 4)
        for _ in range(count):
            for value, times, shown in (("4", enable, True), ("0", disable, False)):
                start = time.monotonic()
                fd = os.open(pf / "sriov_numvfs", os.O_WRONLY)
                try:
                    os.write(fd, f"{value}\n".encode())
                finally:
                    os.close(fd)
                _until(pf, shown)
                times.append((time.monotonic() - start) * 1000)
    enable.sort()
    disable.sort()
    return {"writes": 2 * count, "enable_p50_ms": enable[len(enable) // 2],
            "enable_max_ms": enable[-1], "disable_p50_ms": disable[len(disable) // 2],
            "disable_max_ms": disable[-1]}
