"""Attribute reads, stat, readdir and readlink: mokkafs in both cache modes beside the tmpfs
tree and real sysfs, per HCA count and reader count."""

from __future__ import annotations

import contextlib
import random
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import MODES, TICK_US, daemon, log, profile_with, render
from bench.readers import path_sets, run_readers, sysfs_sets, warm_up


def reads(reader: Path, hca_counts: list[int], reader_counts: list[int], ms: int,
          rounds: int, tmp: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for hcas in hca_counts:
        profile = profile_with(hcas, tmp)
        shm = Path(tempfile.mkdtemp(prefix="mokkafs-bench-", dir="/dev/shm"))
        render(profile, shm)
        with contextlib.ExitStack() as stack:
            daemons = {mode: stack.enter_context(daemon(profile, tmp / f"mnt-{hcas}-{mode}",
                                                        "--cache-mode", mode))
                       for mode in MODES}
            sets = {mode: path_sets(d.mnt) for mode, d in daemons.items()}
            sets["tmpfs"] = path_sets(shm)
            if hcas == hca_counts[0]:
                sets["sysfs"] = sysfs_sets()
            for op_key in sets["tmpfs"]:
                op = op_key.split(":")[0]
                for readers in reader_counts:
                    samples: dict[str, list[dict[str, float]]] = {}
                    for _ in range(rounds):
                        order = [c for c in sets if op_key in sets[c]]
                        random.shuffle(order)
                        for config in order:
                            d = daemons.get(config)
                            warm_up(reader, op, sets[config][op_key], tmp)
                            cpu0 = d.cpu_ticks() if d else 0
                            req0 = d.requests() if d else 0.0
                            r = run_readers(reader, op, sets[config][op_key], readers, ms, tmp)
                            if d:
                                r["cpu_us_op"] = (d.cpu_ticks() - cpu0) * TICK_US / max(r["ops"], 1)
                                r["req_op"] = (d.requests() - req0) / max(r["ops"], 1)
                            samples.setdefault(config, []).append(r)
                    base = statistics.median(s["ops_s"] for s in samples["tmpfs"])
                    for config, runs in samples.items():
                        row: dict[str, Any] = {
                            "hcas": hcas, "figure": op_key, "readers": readers,
                            "config": config}
                        for key in runs[0]:
                            row[key] = statistics.median(s[key] for s in runs)
                        row["x_tmpfs"] = float(row["ops_s"]) / base if base else 0.0
                        rows.append(row)
                    log(f"{hcas} HCAs {op_key} x{readers}: " + ", ".join(
                        f"{c} {statistics.median(s['ops_s'] for s in runs):,.0f}/s"
                        for c, runs in samples.items()))
        shutil.rmtree(shm)
    return rows
