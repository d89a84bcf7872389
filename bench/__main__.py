"""``python -m bench [--quick | --smoke] [--compile-storm]``: run every figure, print the
report, write the results; the full sweep also publishes its tables."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import bench
from bench.figures.cold_swaps import cold_and_warm_swaps
from bench.figures.faults import fault_onsets
from bench.figures.fleet import fleet
from bench.figures.floor import request_floor
from bench.figures.idle import idle_and_rss
from bench.figures.imports import import_costs
from bench.figures.kmsg import xid_lag
from bench.figures.monitoring import monitoring
from bench.figures.nvml import nvml
from bench.figures.reads import reads
from bench.figures.scrapes import UPTIME, scrapes
from bench.figures.shim import shim_cost
from bench.figures.storm import compile_storm
from bench.figures.swaps import swaps
from bench.figures.writes import write_visibility
from bench.harness import RESULTS, log
from bench.publish import publish
from bench.readers import build_reader
from bench.report import plots, summary, table
from bench.sizes import FULL, QUICK, SMOKE, Sizes


def run(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """Every figure at ``sizes``, in the order the report lists them."""
    reader = build_reader(tmp)
    log("attribute reads, stat, readdir, readlink")
    rows = reads(reader, sizes.hca_counts, sizes.reader_counts, sizes.cells_ms, sizes.rounds,
                 tmp)
    log("uncached requests, beside pyfuse3 and trio alone")
    floor = request_floor(reader, *sizes.floor, tmp)
    log("swaps")
    swap = swaps(sizes.swaps, tmp)
    log("the first swap after a quiet spell, with the compiling process ended and kept")
    cold = cold_and_warm_swaps(sizes.cold_swaps, tmp)
    log("the imports' memory")
    imports = import_costs()
    log("reads during a storm of compiles")
    storm = compile_storm(reader, *sizes.storm, tmp)
    log("idle and memory")
    idle = idle_and_rss(sizes.hca_counts, sizes.idle_s, tmp)
    log("node_exporter scrapes")
    ne = scrapes(*sizes.scrapes, tmp)
    log("a node under monitoring")
    hcas, seconds, lead = sizes.monitoring
    mon = [monitoring(hcas, seconds, tmp, uptime, lead) for uptime in (0.0, UPTIME)]
    for m in mon:
        log(f"monitoring, uptime {m['uptime_s']:g} s: {m['core_pct']:.3f} % of a core")
    log("fault onsets")
    faults = fault_onsets(sizes.faults, tmp)
    log("Xids read by a kmsg follower")
    kmsg = xid_lag(sizes.faults, tmp)
    log("NVML: enumeration beside tmpfs, Xids seen by a waiter, gpustat, a blocked waiter")
    nvml_figures = nvml(*sizes.nvml, tmp)
    log("sysfs writes seen by a new reader")
    writes = write_visibility(sizes.writes, tmp)
    log("a fleet on one machine, run plainly and as deploy/ runs it")
    fleets = [fleet(*sizes.fleet, tmp, optimize) for optimize in (0, 2)]
    log("the preload shim on paths outside its prefixes")
    shim = shim_cost(reader, *sizes.shim, tmp)
    return {"machine": {"cores": os.cpu_count(), "kernel": os.uname().release},
            "quick": sizes is QUICK, "reads": rows, "floor": floor, "swap": swap,
            "cold_swaps": cold, "imports": imports, "idle": idle,
            "compile_storm": storm, "node_exporter": ne, "monitoring": mon, "faults": faults,
            "kmsg": kmsg, "nvml": nvml_figures, "writes": writes, "fleet": fleets, "shim": shim}


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/run",
                                     description=(bench.__doc__ or "").split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a small sweep, about 6 minutes")
    size.add_argument("--smoke", action="store_true",
                      help="every figure at its smallest, to see that each still runs (its "
                           "numbers mean nothing; nothing is published)")
    parser.add_argument("--compile-storm", action="store_true",
                        help="only the readers' latency during a storm of compiles")
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else QUICK if args.quick else FULL
    if args.compile_storm:
        with tempfile.TemporaryDirectory(prefix="mokkafs-bench-") as t:
            edits, ms = (SMOKE if args.smoke else FULL).storm  # --quick: the full storm
            storm = compile_storm(build_reader(Path(t)), edits, ms, Path(t))
        print(table([storm], list(storm)))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mokkafs-bench-") as t:
        result = run(sizes, Path(t))
    (RESULTS / sizes.results).write_text(json.dumps(result, indent=1))
    report = summary(result, sizes, plots(result["reads"]))
    print(report)
    if sizes is FULL:
        publish(report)


if __name__ == "__main__":
    main()
