"""A node under real monitoring: node_exporter scrapes and GFD- and NFD-like walks."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.figures.scrapes import scrape
from bench.harness import (
    TICK_US,
    cpu_account,
    daemon,
    node_exporter,
    profile_with,
    read_file,
    render,
)


def gfd_walk(sysfs: Path) -> None:
    """What GPU Feature Discovery and the device plugin read of every PCI function."""
    for dev in (sysfs / "bus/pci/devices").iterdir():
        for name in ("vendor", "class", "device", "numa_node"):
            read_file(dev / name)
        os.readlink(dev / "driver")


def nfd_walk(sysfs: Path) -> None:
    """What node-feature-discovery's pci source reads."""
    for dev in (sysfs / "bus/pci/devices").iterdir():
        for name in ("class", "vendor", "device", "subsystem_vendor", "subsystem_device"):
            read_file(dev / name)
        for optional in ("sriov_totalvfs", "iommu_group/type"):
            with contextlib.suppress(OSError):
                read_file(dev / optional)


LEAD = 20.0  # seconds from the warm-up to the first scrape measured: more than a scrape interval


def monitoring(hcas: int, seconds: int, tmp: Path, uptime: float = 0.0,
               lead: float = LEAD) -> dict[str, Any]:
    """A node under real monitoring for ``seconds``: a node_exporter scrape every 15 s, a
    GFD-like and an NFD-like walk every 60 s (both at the start), against mokkafs (default
    mode) and the tmpfs tree, alternating which goes first; the daemon's CPU over the whole
    time, idle gaps included. One untimed scrape and walk first, ``lead`` seconds before the
    minute: the steady state, not the daemon's cold start, is what an hour of monitoring
    costs, and the attributes that last a minute (``STEPPED_DIR_TIMEOUT``: one GETATTR per
    directory of counters) expire in the minute measured, as in every minute or so of the
    steady state. Not in it: the counter files' own attributes, which last ten minutes
    (``PUSHED_TIMEOUT``: one GETATTR per file). ``uptime``: counters that start where that
    much traffic left them (a node up a while), not at 0, whose every counter gains a digit
    every few seconds, each costing the kernel a GETATTR."""
    profile = profile_with(hcas, tmp, uptime=uptime)
    shm = Path(tempfile.mkdtemp(prefix="mokkafs-bench-mon-", dir="/dev/shm"))
    render(profile, shm)
    latency: dict[str, list[float]] = {"mokkafs": [], "tmpfs": []}
    walks: dict[str, list[float]] = {"mokkafs": [], "tmpfs": []}
    with daemon(profile, tmp / "mnt-mon") as d, cpu_account(d.proc.pid) as used, \
            node_exporter(d.mnt / "sys") as mine, node_exporter(shm / "sys") as theirs:
        roots = {"mokkafs": (d.mnt / "sys", mine), "tmpfs": (shm / "sys", theirs)}
        for sysfs, url in roots.values():  # steady state: a daemon's first walk is once a life
            scrape(url)
            gfd_walk(sysfs)
            nfd_walk(sysfs)
        time.sleep(lead)
        requests0 = d.requests()
        ticks0, used0, start = d.cpu_ticks(), used() if used else 0.0, time.monotonic()
        for tick in range(0, seconds, 15):
            while time.monotonic() < start + tick:
                time.sleep(0.05)
            for config in random.sample(list(roots), 2):
                sysfs, url = roots[config]
                latency[config].append(scrape(url))
                if tick % 60 == 0:
                    t0 = time.perf_counter()
                    gfd_walk(sysfs)
                    nfd_walk(sysfs)
                    walks[config].append(time.perf_counter() - t0)
        while time.monotonic() < start + seconds:
            time.sleep(0.05)
        cpu_s = used() - used0 if used else (d.cpu_ticks() - ticks0) * TICK_US / 1e6
        requests = d.requests() - requests0
    shutil.rmtree(shm)
    core_pct = cpu_s / seconds * 100
    return {"hcas": hcas, "uptime_s": uptime, "seconds": seconds,
            "cpu_clock": "cgroup" if used else "ticks", "scrapes": len(latency["mokkafs"]),
            "requests_per_scrape": requests / len(latency["mokkafs"]),
            "daemon_cpu_s": cpu_s, "cpu_s_per_hour": cpu_s * 3600 / seconds,
            "core_pct": core_pct, "cores_at_5000_nodes": core_pct * 5000 / 100,
            "scrape_ms": statistics.median(latency["mokkafs"]) * 1000,
            "scrape_ms_tmpfs": statistics.median(latency["tmpfs"]) * 1000,
            "walks_ms": statistics.median(walks["mokkafs"]) * 1000,
            "walks_ms_tmpfs": statistics.median(walks["tmpfs"]) * 1000}
