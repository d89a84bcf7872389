"""What the preload shim costs a path outside its prefixes."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.harness import log


def shim_cost(reader: Path, rounds: int, ms: int, tmp: Path) -> list[dict[str, Any]]:
    """What the preload shim costs a path outside its prefixes: the same stat and read loops
    over host files, with and without it, interleaved."""
    from mokkafs.delivery.preload import library

    paths = ["/etc/hostname", "/etc/passwd", "/usr/bin/env", "/proc/self/status"]
    listfile = tmp / "host-paths"
    listfile.write_text("\n".join(paths) + "\n")
    rows = []
    for op in ("stat", "read"):
        samples: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(rounds):
            for config in random.sample(list(samples), 2):
                env = dict(os.environ)
                if config == "with":
                    env.update(LD_PRELOAD=str(library()), MOKKAFS_ROOT="/nonexistent-view")
                start = time.monotonic_ns() + 20_000_000
                out = subprocess.run([str(reader), op, str(ms), str(start), str(listfile)],
                                     capture_output=True, text=True, env=env, check=True)
                samples[config].append(json.loads(out.stdout)["ops"] / (ms / 1000))
        without, with_ = (statistics.median(samples[k]) for k in ("without", "with"))
        rows.append({"op": op, "without_ops_s": without, "with_ops_s": with_,
                     "ns_added": (1 / with_ - 1 / without) * 1e9, "x": with_ / without})
        log(f"shim, {op} outside the prefixes: {without:,.0f}/s without, {with_:,.0f}/s with")
    return rows
