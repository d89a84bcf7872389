"""node_exporter's infiniband collector over each configuration."""

from __future__ import annotations

import contextlib
import random
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness import MODES, Served, daemon, log, node_exporter, profile_with, render
from mokkafs.fuse.refresh import HOT


def scrape(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return time.perf_counter() - start


# A Prometheus server scrapes every 15-60 s, so every scrape of a node finds its counters a
# step or more old and no port kept hot (mokkafs/fuse/refresh.py): rounds of the scrape figure
# are this far apart, so each scrape of each configuration comes that long after its last.
COLD_GAP = HOT + 0.25
UPTIME = 86400.0  # seconds of traffic the counters of a node up a day start with
HELD = "no-open, counters held"  # counters that step hourly: what the kernel path alone costs


def scrapes(hca_counts: list[int], n: int, tmp: Path) -> list[dict[str, Any]]:
    """node_exporter's infiniband collector over each configuration, all served at once: one
    untimed scrape each, then ``n`` rounds in random order, ``COLD_GAP`` apart, medians.
    ``HELD`` is a no-open daemon whose counters step hourly, so after the untimed scrape its
    pages all stay in the kernel's cache: the floor a scrape through FUSE cannot go below.
    The node has been up a day (``UPTIME``), as a node scraped for real has: counters that
    start at 0 gain a digit every few seconds in a daemon's first minute, each costing the
    kernel a GETATTR (the monitoring figure shows that minute too)."""
    rows = []
    for hcas in hca_counts:
        profile = profile_with(hcas, tmp, uptime=UPTIME)
        shm = Path(tempfile.mkdtemp(prefix="mokkafs-bench-ne-", dir="/dev/shm"))
        render(profile, shm)
        with contextlib.ExitStack() as stack:
            roots = {"tmpfs": shm / "sys"}
            daemons: dict[str, Served] = {}
            for mode, extra in [*((m, ("--cache-mode", m)) for m in MODES),
                                (HELD, ("--counter-staleness-ms", "3600000"))]:
                d = stack.enter_context(daemon(profile, tmp / f"mnt-ne-{hcas}-{len(daemons)}",
                                               *extra))
                daemons[mode], roots[mode] = d, d.mnt / "sys"
            urls = {c: stack.enter_context(node_exporter(root)) for c, root in roots.items()}
            times: dict[str, list[float]] = {c: [] for c in urls}
            requests: dict[str, list[float]] = {c: [] for c in daemons}
            for url in urls.values():
                scrape(url)
            for _ in range(n):
                time.sleep(COLD_GAP)
                for config in random.sample(list(urls), len(urls)):
                    served = daemons.get(config)
                    before = served.requests() if served else 0.0
                    times[config].append(scrape(urls[config]))
                    if served:
                        requests[config].append(served.requests() - before)
        t = statistics.median(times["tmpfs"])
        for mode in daemons:
            m = statistics.median(times[mode])
            rows.append({"hcas": hcas, "config": mode, "mokkafs_s": m, "tmpfs_s": t,
                         "x_tmpfs": m / t, "requests": statistics.median(requests[mode])})
            log(f"node_exporter {hcas} HCAs, {mode}: {m * 1000:.1f} ms, tmpfs {t * 1000:.1f} ms")
        shutil.rmtree(shm)
    return rows
