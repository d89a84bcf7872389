"""The first swap after a quiet spell against a swap during edits, each seen by a new reader,
beside the node's memory at rest with every process counted: with the compiling process
ended when idle (the default) and kept (``--compile-idle never``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench.harness import Served, daemon, family, proc_kib, profile_with, spin_until

IDLE_S = 1.0  # --compile-idle of the default's daemon: its child ends this long after a swap


def cold_and_warm_swaps(count: int, tmp: Path) -> list[dict[str, Any]]:
    """``count`` swaps after a quiet spell (the default's child ended; the kept one idle as
    long) and ``count`` swaps each right after another, for each way; and, at rest after them,
    the RSS and PSS of the daemon and its children (the compiling process, the kmsg mount)."""
    return [_way(way, idle, count, tmp) for way, idle in (("ended when idle", f"{IDLE_S:g}"),
                                                          ("kept", "never"))]


def _way(way: str, idle: str, count: int, tmp: Path) -> dict[str, Any]:
    variants = [profile_with(8, tmp, fw).read_text() for fw in ("28.39.2048", "28.40.1000")]
    live = tmp / f"cold-{idle}" / "node.yaml"
    live.parent.mkdir()
    live.write_text(variants[0])
    cold: list[float] = []
    warm: list[float] = []
    with daemon(live, tmp / f"mnt-cold-{idle}", "--compile-idle", idle) as d:
        target = d.mnt / "sys/class/infiniband/mlx5_0/fw_ver"
        swaps = 0
        for _ in range(count):
            quiet = time.monotonic() + IDLE_S * 1.5
            while time.monotonic() < quiet or (idle != "never" and _compiling(d)):
                time.sleep(0.05)  # the default's child ends; the kept one waits as long
            swaps += 1
            cold.append(_swap(live, variants[swaps % 2], target, swaps))
            swaps += 1
            warm.append(_swap(live, variants[swaps % 2], target, swaps))
        time.sleep(IDLE_S * 1.5)
        pids = family(d.proc.pid)
        starts = d.metric("mokkafs_compile_processes_started_total")
        rss = sum(proc_kib(pid, "VmRSS") for pid in pids) / 1024
        pss = sum(proc_kib(pid, "Pss", "smaps_rollup") for pid in pids) / 1024
    return {"compiling_process": way, "swaps": count,
            "cold_p50_ms": _percentile(cold, 50), "cold_p99_ms": _percentile(cold, 99),
            "warm_p50_ms": _percentile(warm, 50), "warm_p99_ms": _percentile(warm, 99),
            "processes_started": starts, "processes_at_rest": len(pids),
            "rss_mib_at_rest": rss, "pss_mib_at_rest": pss}


def _compiling(d: Served) -> bool:
    return d.daemon.readyz()["compile_pid"] is not None


def _swap(live: Path, text: str, target: Path, swap: int) -> float:
    """Rename ``text`` over the profile; the ms until a new reader of ``target`` sees it."""
    want = "28.40.1000\n" if swap % 2 else "28.39.2048\n"
    staged = live.with_name(".node.yaml.new")
    staged.write_text(text)
    start = time.perf_counter()
    os.rename(staged, live)
    spin_until(target, want)
    return (time.perf_counter() - start) * 1000


def _percentile(values: list[float], pct: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, len(ordered) * pct // 100)]
