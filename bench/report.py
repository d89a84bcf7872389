"""The run's tables (markdown, ratios first) and plots."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench.figures.imports import columns as import_columns
from bench.harness import CONFIGS, MODES, REPO, RESULTS
from bench.sizes import Sizes


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"

    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.0f}"
        return str(v)

    return head + "".join("| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |\n"
                          for r in rows)


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (figure, HCAs, readers): each cache mode against tmpfs (and sysfs) measured
    in the same cells."""
    cells: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["figure"], r["hcas"], r["readers"]), {})[r["config"]] = r
    out = []
    for (figure, hcas, readers), by in sorted(cells.items()):
        row: dict[str, Any] = {"figure": figure, "hcas": hcas, "readers": readers}
        for mode in MODES:
            if mode in by:
                row[f"{mode} x_tmpfs"] = by[mode]["x_tmpfs"]
                row[f"{mode} req/op"] = by[mode].get("req_op", 0.0)
        if "sysfs" in by and "no-open" in by:
            row["no-open x_sysfs"] = by["no-open"]["ops_s"] / by["sysfs"]["ops_s"]
        out.append(row)
    return out


RATIO_COLS = ["figure", "hcas", "readers", "no-open x_tmpfs", "keep-cache x_tmpfs",
              "no-open x_sysfs", "no-open req/op", "keep-cache req/op"]


def plots(rows: list[dict[str, Any]]) -> list[Path]:
    """Per figure: throughput and p50 latency against HCA count (1 reader), and throughput
    against readers (at the largest HCA count), one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for figure in sorted({str(r["figure"]) for r in rows}):
        mine = [r for r in rows if r["figure"] == figure]
        most = max(int(r["hcas"]) for r in mine)
        fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4))
        for config in CONFIGS:
            by_hcas = sorted((int(r["hcas"]), float(r["ops_s"]), float(r["p50_us"]))
                             for r in mine if r["config"] == config and r["readers"] == 1)
            by_readers = sorted((int(r["readers"]), float(r["ops_s"])) for r in mine
                                if r["config"] == config and r["hcas"] == most)
            if by_hcas:
                ax1.plot([p[0] for p in by_hcas], [p[1] for p in by_hcas], "o-", label=config)
                ax2.plot([p[0] for p in by_hcas], [p[2] for p in by_hcas], "o-", label=config)
            if by_readers:
                ax3.plot([p[0] for p in by_readers], [p[1] for p in by_readers], "o-",
                         label=config)
        ax1.set(xscale="log", yscale="log", xlabel="HCAs", ylabel="ops/s (1 reader)",
                title=f"{figure}: throughput")
        ax2.set(xscale="log", yscale="log", xlabel="HCAs", ylabel="p50 µs (1 reader)",
                title=f"{figure}: latency")
        ax3.set(yscale="log", xlabel="reader processes", ylabel=f"ops/s ({most} HCAs)",
                title=f"{figure}: readers")
        ax1.legend()
        path = RESULTS / f"{figure.replace(':', '-')}.png"
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        made.append(path)
    return made


def summary(result: dict[str, Any], sizes: Sizes, pngs: list[Path]) -> str:
    """The run's tables, as printed and (for the full sweep) published."""
    rows, floor, swap, storm = (result[k] for k in ("reads", "floor", "swap", "compile_storm"))
    idle, ne, mon, faults = (result[k] for k in ("idle", "node_exporter", "monitoring",
                                                 "faults"))
    fleets, shim, nvml = result["fleet"], result["shim"], result["nvml"]
    cells_ms, rounds = sizes.cells_ms, sizes.rounds
    return "\n".join([
        f"{sizes.name}, {time.strftime('%Y-%m-%d')}: "
        f"{os.cpu_count()} cores, kernel {os.uname().release}, {cells_ms} ms cells, "
        f"{rounds} round(s), medians.\n",
        "### Ratios (same cells, same run)\n",
        table(ratios(rows), RATIO_COLS),
        "### Every cell (C reader; ops/s and latency; x_tmpfs = ratio to the tmpfs tree)\n",
        table(rows, ["hcas", "figure", "readers", "config", "ops_s", "x_tmpfs", "p50_us",
                     "p99_us", "cpu_us_op", "req_op", "errors"]),
        "(p50_us, p99_us: percentiles of every operation of every reader in the cell)\n",
        "### Uncached requests from one reader, beside pyfuse3 and trio answering from "
        "prepared objects (bench/floor_fs.py: the floor of this stack); cpu_us_request: the "
        "daemon's CPU per request, every thread, from its cgroup\n",
        table(floor, ["config", "op", "requests_s", "cpu_us_request"]),
        "### Swap: profile rename to a fresh reader seeing it (no-open), re-rendering "
        "instead, and invalidation cost\n",
        table([swap], list(swap)),
        "### The first swap after a quiet spell (cold) and one right after another (warm), "
        "seen by a new reader, with the compiling process ended when idle and kept "
        "(`--compile-idle never`); the node's memory at rest, every process counted\n",
        table(result["cold_swaps"], list(result["cold_swaps"][0])),
        "### The imports' memory: a fresh interpreter's PSS in MiB once each layer is "
        "imported, left to right: the compiler's alone (a compiling process), the daemon's "
        "alone, and both in one process, before it holds any profile\n",
        table(result["imports"], import_columns()),
        "### Reads during a storm of compiles of the largest allowed profile (one reader; "
        "quiet: the same reads with no edit)\n",
        table([storm], list(storm)),
        "### Idle cost and memory\n",
        table([{k: v for k, v in idle.items() if not isinstance(v, dict)}],
              [k for k, v in idle.items() if not isinstance(v, dict)]),
        "(rss: the daemon process alone, the fleet below counts its children too; "
        "no_machine: the same profile with `--no-machine`, without the CPUs and NUMA nodes)\n",
        table([{"hcas": h, "inodes": idle["inodes"][h], "rss_mib": v / 1024,
                "inodes_no_machine": idle["inodes_no_machine"][h],
                "rss_mib_no_machine": idle["rss_kib_no_machine"][h] / 1024}
               for h, v in idle["rss_kib"].items()],
              ["hcas", "inodes", "rss_mib", "inodes_no_machine", "rss_mib_no_machine"]),
        "### node_exporter infiniband scrape of a node up a day, each a step or more after "
        "the last as Prometheus scrapes (requests: FUSE requests per scrape; counters held: "
        "the kernel's floor, every page cached)\n",
        table(ne, ["hcas", "config", "mokkafs_s", "tmpfs_s", "x_tmpfs", "requests"]),
        "### A node under monitoring (node_exporter every 15 s, GFD- and NFD-like walks "
        "every 60 s; uptime_s: the traffic the counters start with; requests_per_scrape: "
        "FUSE requests in the 60 s per scrape)\n",
        table(mon, list(mon[0])),
        "### Fault transitions: how long after their scheduled time a reader sees them\n",
        table([faults], list(faults)),
        "### The kernel log: how long after its scheduled time a follower blocked in a read "
        "of `dev/kmsg` gets an Xid\n",
        table([result["kmsg"]], list(result["kmsg"])),
        "### NVML (`libnvidia-ml.so.1` dlopen'ed by a C consumer): a round of nvmlInit, every "
        "GPU's name, UUID, PCI and memory info and its MIG devices, and nvmlShutdown, p50 in "
        "µs, on the mount and on the same view rendered to tmpfs (x_tmpfs: the mount's time "
        "over tmpfs's); the consumer's memory added by the dlopen, nvmlInit and one "
        "enumeration (rss_kib, pss_kib: its whole)\n",
        table(nvml["enumeration"], list(nvml["enumeration"][0])),
        "### NVML events: a consumer blocked in nvmlEventSetWait_v2, the daemon's CPU ticks "
        "(its children counted) while no event comes; an Xid fault seen by it, after the "
        "fault's time\n",
        table([nvml["events"]], list(nvml["events"])),
        "### gpustat -i 1 (a query a second) on the mount: the daemon's CPU, its children "
        "counted (10 ms ticks), and per hour\n",
        table([nvml["gpustat"]], list(nvml["gpustat"])),
        "### Sysfs writes: `echo 4`, then `echo 0`, to a PF's `sriov_numvfs` until a new "
        "listing of the PF shows its VFs made or gone (from before the write)\n",
        table([result["writes"]], list(result["writes"])),
        "### Fleet on one machine (pythonoptimize 2: as deploy/ runs the daemon; each node's "
        "processes counted: the daemon, its compile child, its kmsg mount)\n",
        table(fleets, list(fleets[0])),
        "### The preload shim on paths outside its prefixes\n",
        table(shim, ["op", "without_ops_s", "with_ops_s", "ns_added", "x"]),
        f"plots: {', '.join(str(p.relative_to(REPO)) for p in pngs)}\n",
    ])
