"""A fleet of daemons on one machine: memory, and CPU while nobody reads."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from bench.harness import family, mokkafs, proc_kib, proc_ticks, profile_with


def fleet(n: int, idle_s: int, tmp: Path, optimize: int = 0) -> dict[str, Any]:
    """``n`` daemons of 8 HCAs each: their memory, and their CPU while nobody reads, each with
    its processes (the compile child, the kmsg mount: ``processes_per_node``). With
    ``optimize`` 2, run as deploy/ runs them (PYTHONOPTIMIZE=2: no docstrings, no asserts),
    once their bytecode is compiled so (as the image ships it)."""
    profile = profile_with(8, tmp)
    env = {"PYTHONOPTIMIZE": str(optimize)} if optimize else None
    if optimize:  # one daemon first, which writes the bytecode the others then load
        with mokkafs(profile, tmp / f"fleet-{optimize}-warm", env=env):
            pass
    with contextlib.ExitStack() as stack:
        procs = [stack.enter_context(mokkafs(
            profile, tmp / f"fleet-{optimize}-{i}", "--node-name", f"node-{i}",
            "--node-index", str(i), env=env)).process for i in range(n)]
        time.sleep(1)
        pids = [pid for p in procs for pid in family(p.pid)]
        daemons = [p.pid for p in procs]

        def total(key: str, source: str = "status", of: list[int] = pids) -> int:
            return sum(proc_kib(pid, key, source) for pid in of)

        def ticks() -> int:
            return sum(proc_ticks(pid) for pid in pids)

        # PSS splits shared pages (libpython, pydantic-core, ...) among the daemons
        rss, shared, t0 = total("VmRSS"), total("Pss", "smaps_rollup"), ticks()
        alone = total("VmRSS", of=daemons)
        time.sleep(idle_s)
        return {"daemons": n, "pythonoptimize": optimize,
                "processes_per_node": len(pids) / n, "rss_mib_total": rss / 1024,
                "rss_mib_per_node": rss / 1024 / n,
                "daemon_rss_mib_per_node": alone / 1024 / n,
                "pss_mib_per_node": shared / 1024 / n,
                "idle_ticks_total": ticks() - t0, "idle_seconds": idle_s,
                "rss_gib_at_5000": rss / n * 5000 / 1024 / 1024}
