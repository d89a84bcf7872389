"""Fault transitions: how long after their scheduled time a reader sees them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.harness import REPO, daemon, first_fault, spin_until


def fault_onsets(count: int, tmp: Path) -> dict[str, Any]:
    """How long after its scheduled time a fault is seen: faults applied through the control
    socket to start 0.5 s later and last 0.3 s, a reader polling the port's state. Measured
    from just before the apply request left, so the figure errs long; after one untimed
    first fault (``first_fault``: the daemon's first imports the schema)."""
    from mokkafs.serve.control import request

    control = tmp / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    onset, end = [], []
    with daemon(REPO / "mokkafs/profiles/h100.yaml", tmp / "mnt-faults",
                "--control", str(control)) as d:
        state = d.mnt / "sys/class/infiniband/mlx5_0/ports/1/state"
        first_fault(control)
        for i in range(count):
            text = (f"faults: [{{name: f{i}, kind: ib-port-down, target: mlx5_0/1, "
                    f"after: 0.5, for: 0.3}}]\n")
            sent = time.monotonic()
            request(control, {"op": "apply", "file": "bench", "text": text})
            spin_until(state, "1: DOWN\n")
            onset.append((time.monotonic() - sent - 0.5) * 1000)
            spin_until(state, "4: ACTIVE\n")
            end.append((time.monotonic() - sent - 0.8) * 1000)
            request(control, {"op": "clear", "names": [f"f{i}"]})
    onset.sort()
    end.sort()
    return {"faults": count, "onset_p50_ms": onset[len(onset) // 2], "onset_max_ms": onset[-1],
            "end_p50_ms": end[len(end) // 2], "end_max_ms": end[-1]}
