"""Swaps: a profile rename to a fresh reader seeing it, re-rendering a tmpfs tree instead,
and what kernel cache invalidation costs."""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import daemon, profile_with, render, render_in_process, spin_until


def swaps(count: int, tmp: Path) -> dict[str, Any]:
    """Profile file rename -> a fresh reader sees the new content; and re-rendering a tmpfs
    tree in place, with a reader counting failed reads and mixed pairs (two HCAs' firmware
    from different renders) meanwhile."""
    variants = [profile_with(8, tmp, fw).read_text() for fw in ("28.39.2048", "28.40.1000")]
    live = tmp / "swap" / "node.yaml"
    live.parent.mkdir()
    live.write_text(variants[0])
    latencies = []
    with daemon(live, tmp / "mnt-swap") as d:
        target = d.mnt / "sys/class/infiniband/mlx5_0/fw_ver"
        for i in range(1, count + 1):
            want = "28.40.1000\n" if i % 2 else "28.39.2048\n"
            staged = live.with_name(".node.yaml.new")
            staged.write_text(variants[i % 2])
            start = time.perf_counter()
            os.rename(staged, live)
            spin_until(target, want)
            latencies.append((time.perf_counter() - start) * 1000)
    latencies.sort()
    inval = invalidation(64, min(count, 20), tmp)
    # the same change by re-rendering into a served tmpfs directory
    shm = Path(tempfile.mkdtemp(prefix="mokkafs-bench-swap-", dir="/dev/shm"))
    profiles = [profile_with(8, tmp, fw) for fw in ("28.39.2048", "28.40.1000")]
    render(profiles[0], shm)
    stop = threading.Event()
    bad = {"failed": 0, "mixed": 0, "reads": 0}
    names = sorted(p.name for p in (shm / "sys/class/infiniband").iterdir())

    def hammer() -> None:
        """Two HCAs' firmware, read one after the other, as a consumer reads a node: a pair
        from two generations is a view no node ever had."""
        first, last = (shm / f"sys/class/infiniband/{n}/fw_ver" for n in (names[0], names[-1]))
        while not stop.is_set():
            bad["reads"] += 1
            try:
                if first.read_text() != last.read_text():
                    bad["mixed"] += 1
            except OSError:
                bad["failed"] += 1

    thread = threading.Thread(target=hammer)
    thread.start()
    renders = []
    for i in range(1, min(count, 20) + 1):
        start = time.perf_counter()
        render_in_process(profiles[i % 2], shm)
        renders.append((time.perf_counter() - start) * 1000)
    stop.set()
    thread.join()
    shutil.rmtree(shm)
    return {"swap_p50_ms": latencies[len(latencies) // 2],
            "swap_p99_ms": latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)],
            "swaps": count, "render_p50_ms": statistics.median(renders),
            "render_reads": bad["reads"], "render_failed": bad["failed"],
            "render_mixed": bad["mixed"], **inval}


def invalidation(hcas: int, count: int, tmp: Path) -> dict[str, float]:
    """Kernel cache invalidation per 1000 inodes the kernel knows: swaps that change the
    ports' traffic, so every counter that moves (``counters/`` and ``counters_ext/``; the rest
    are fixed files) is invalidated, each looked up first: some thousand inodes a swap at 64
    HCAs, as the target is stated."""
    base = profile_with(hcas, tmp).read_text()
    anchor = "  rate_gbps: 400\n"
    assert anchor in base and "traffic:" not in base
    live = tmp / "inval" / "node.yaml"
    live.parent.mkdir()
    live.write_text(base)
    with daemon(live, tmp / "mnt-inval") as d:
        counters = list((d.mnt / "sys/class/infiniband").glob("*/ports/*/counters*/*"))
        for i in range(1, count + 1):
            for c in counters:
                os.stat(c)
            staged = live.with_name(".node.yaml.new")
            rate = 2.0e9 if i % 2 else 3.0e9
            staged.write_text(base.replace(
                anchor, f"{anchor}  traffic: {{xmit_bytes_per_sec: {rate}}}\n"))
            os.rename(staged, live)
            while d.generation() < i + 1:
                time.sleep(0.01)
        sent = d.metric("mokkafs_invalidations_total")
        seconds = d.metric("mokkafs_invalidation_duration_seconds_sum")
    return {"inval_inodes_per_swap": sent / count,
            "inval_ms_per_1000": seconds / sent * 1e6 if sent else 0.0}
