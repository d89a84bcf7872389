"""Uncached requests beside pyfuse3 and trio alone (bench/floor_fs.py)."""

from __future__ import annotations

import contextlib
import random
import statistics
import subprocess
from pathlib import Path
from typing import Any

from bench.harness import PY, REPO, cpu_account, daemon, log, profile_with
from bench.readers import path_sets, run_readers, warm_up
from mokkafs import testing


def floor_fs(mnt: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """bench/floor_fs.py mounted at ``mnt``: pyfuse3 and trio answering from prepared objects."""
    return testing.bare_fs([PY, str(REPO / "bench/floor_fs.py")], mnt)


def request_floor(reader: Path, ms: int, rounds: int, tmp: Path) -> list[dict[str, Any]]:
    """Uncached requests a second from one reader, and the daemon's CPU per request (its own
    cgroup), for mokkafs in keep-cache mode (stat and readlink through uncached symlinks: one
    READLINK each) beside bench/floor_fs.py, which answers the same requests with nothing
    but pyfuse3 and trio: what no daemon on this stack can go below. Interleaved, medians."""
    profile = profile_with(8, tmp)
    with contextlib.ExitStack() as stack:
        d = stack.enter_context(daemon(profile, tmp / "mnt-floor-mokkafs", "--cache-mode",
                                       "keep-cache"))
        floor = stack.enter_context(floor_fs(tmp / "mnt-floor"))
        sets = path_sets(d.mnt)
        cells = {("mokkafs keep-cache", "stat"): (d.proc.pid, "stat", sets["stat"]),
                 ("mokkafs keep-cache", "readlink"): (d.proc.pid, "readlink", sets["readlink"]),
                 ("pyfuse3 + trio alone", "readlink"): (floor.pid, "readlink",
                                                        [str(tmp / "mnt-floor/l")]),
                 ("pyfuse3 + trio alone", "getattr"): (floor.pid, "stat",
                                                       [str(tmp / "mnt-floor/f")])}
        clocks = {pid: stack.enter_context(cpu_account(pid)) for pid in (d.proc.pid, floor.pid)}
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {c: [] for c in cells}
        for _ in range(rounds):
            for cell in random.sample(list(cells), len(cells)):
                pid, op, paths = cells[cell]
                warm_up(reader, op, paths, tmp)
                used = clocks[pid]
                req0 = d.requests() if pid == d.proc.pid else 0.0
                cpu0 = used() if used else 0.0
                r = run_readers(reader, op, paths, 1, ms, tmp)
                cpu = used() - cpu0 if used else float("nan")
                # floor_fs answers each operation with one request, by construction
                requests = d.requests() - req0 if pid == d.proc.pid else r["ops"]
                samples[cell].append((r["ops_s"], cpu / max(requests, 1) * 1e6))
    rows = []
    for (config, request), runs in samples.items():
        ops_s = statistics.median(run[0] for run in runs)
        rows.append({"config": config, "op": request, "requests_s": ops_s,
                     "cpu_us_request": statistics.median(run[1] for run in runs)})
        log(f"{config}, {request}: {ops_s:,.0f} requests/s")
    return rows
