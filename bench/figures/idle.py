"""A daemon's memory at each HCA count, and what it costs while nobody reads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.harness import daemon, profile_with, read_file, settle


def idle_and_rss(hca_counts: list[int], idle_s: int, tmp: Path) -> dict[str, Any]:
    """A daemon's RSS and inodes at each HCA count, and without the machine's CPUs and NUMA
    nodes (``--no-machine``: what they cost); at the largest, its CPU ticks and context
    switches over ``idle_s`` seconds once a reader that kept every port hot has stopped and
    the threads its reads woke have ended (``harness.settle``)."""
    out: dict[str, Any] = {"rss_kib": {}, "inodes": {}, "rss_kib_no_machine": {},
                           "inodes_no_machine": {}}
    for hcas in hca_counts:
        with daemon(profile_with(hcas, tmp), tmp / f"mnt-bare-{hcas}", "--no-machine") as d:
            time.sleep(1)
            out["rss_kib_no_machine"][hcas] = d.status("VmRSS")
            out["inodes_no_machine"][hcas] = int(d.metric("mokkafs_inodes"))
        with daemon(profile_with(hcas, tmp), tmp / f"mnt-idle-{hcas}") as d:
            time.sleep(1)
            out["rss_kib"][hcas] = d.status("VmRSS")
            out["inodes"][hcas] = int(d.metric("mokkafs_inodes"))
            if hcas == max(hca_counts):
                # A reader of every port in consecutive steps makes them all hot (pushed at
                # each step); once it stops, pushing must end within a second and then
                # nothing may run.
                counters = sorted((d.mnt / "sys/class/infiniband").glob("*/ports/*/counters"))
                for _ in range(3):
                    for c in counters:
                        read_file(c / "port_xmit_data")
                    time.sleep(0.1)
                settled = settle(d.proc.pid)  # the threads of the pushes end
                ticks, ctx = d.cpu_ticks(), (d.status("voluntary_ctxt_switches")
                                             + d.status("nonvoluntary_ctxt_switches"))
                time.sleep(idle_s)
                out["idle_hcas"] = hcas
                out["idle_seconds"] = idle_s
                out["idle_settle_seconds"] = settled
                out["idle_cpu_ticks"] = d.cpu_ticks() - ticks
                out["idle_ctx_switches"] = (d.status("voluntary_ctxt_switches")
                                            + d.status("nonvoluntary_ctxt_switches") - ctx)
    return out
