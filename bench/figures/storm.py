"""Readers' latency during a storm of compiles."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import daemon, profile_with
from bench.readers import run_readers, warm_up


def compile_storm(reader: Path, edits: int, ms: int, tmp: Path) -> dict[str, Any]:
    """Readers' latency during a storm of edits of the largest allowed profile (256 HCAs;
    the variants differ in the driver's version, so every compile is whole), beside the
    same readers with no edit: a compile must not hold up reads (issue 26, finding 8). In
    keep-cache mode, where every open reaches the daemon."""
    import yaml

    base = yaml.safe_load(profile_with(256, tmp).read_text())
    variants = []
    for version in ("550.163.01", "550.163.02"):
        base["system"]["driver_version"] = version
        variants.append(yaml.safe_dump(base))
    live = tmp / "storm" / "node.yaml"
    live.parent.mkdir()
    live.write_text(variants[0])
    with daemon(live, tmp / "mnt-storm", "--cache-mode", "keep-cache") as d:  # reads reach it
        paths = [str(p / "vendor") for p in sorted((d.mnt / "sys/bus/pci/devices").iterdir())]
        warm_up(reader, "read", paths, tmp)
        quiet = run_readers(reader, "read", paths, 1, ms, tmp)
        stop = threading.Event()
        made = {"edits": 0}

        def storm() -> None:
            """Back-to-back: each edit once the last is served, so a compile (and a build)
            is always running."""
            while not stop.is_set() and made["edits"] < edits:
                served = d.generation()
                staged = live.with_name(".node.yaml.new")
                staged.write_text(variants[(made["edits"] + 1) % 2])
                os.rename(staged, live)
                made["edits"] += 1
                while d.generation() == served and not stop.is_set():
                    time.sleep(0.01)

        thread = threading.Thread(target=storm)
        thread.start()
        stormy = run_readers(reader, "read", paths, 1, ms, tmp)
        stop.set()
        thread.join()
        generation = d.generation()
    return {"profile_hcas": 256, "edits": made["edits"], "generations": generation,
            "quiet_p50_us": quiet["p50_us"], "quiet_p99_us": quiet["p99_us"],
            "storm_p50_us": stormy["p50_us"], "storm_p99_us": stormy["p99_us"],
            "storm_ops": stormy["ops"], "storm_errors": stormy["errors"]}
