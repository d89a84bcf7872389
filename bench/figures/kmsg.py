"""The kernel log: how long after its scheduled time a follower of ``dev/kmsg`` reads an Xid."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench.harness import REPO, daemon, first_fault


def xid_lag(count: int, tmp: Path) -> dict[str, Any]:
    """``count`` Xid faults applied through the control socket to start 0.5 s later, each read
    by a follower blocked in ``read`` on ``dev/kmsg`` (seeked to the end first, as a log
    monitor does). Measured from just before the apply request left, so the figure errs long;
    after one untimed first fault (``first_fault``: the daemon's first imports the schema)."""
    from mokkafs.serve.control import request

    control = tmp / "ctl-kmsg" / "sock"
    control.parent.mkdir(mode=0o700)
    lags = []
    with daemon(REPO / "mokkafs/profiles/h100.yaml", tmp / "mnt-kmsg",
                "--control", str(control)) as d:
        first_fault(control)
        fd = os.open(d.mnt / "dev/kmsg", os.O_RDONLY)
        try:
            os.lseek(fd, 0, os.SEEK_END)
            for i in range(count):
                text = f"faults: [{{name: x{i}, kind: xid, target: gpu1, xid: 48, after: 0.5}}]\n"
                sent = time.monotonic()
                request(control, {"op": "apply", "file": "bench", "text": text})
                while b"Xid" not in os.read(fd, 8192):
                    pass
                lags.append((time.monotonic() - sent - 0.5) * 1000)
                request(control, {"op": "clear", "names": [f"x{i}"]})
        finally:
            os.close(fd)
    lags.sort()
    return {"xids": count, "seen_p50_ms": lags[len(lags) // 2], "seen_max_ms": lags[-1]}
