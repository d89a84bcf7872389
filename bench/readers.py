"""The C reader (bench/reader.c) and the files it reads: a cell is some reader processes
looping over a list of paths for a while, after one untimed pass."""

from __future__ import annotations

import array
import json
import random
import subprocess
import time
from pathlib import Path

from bench.harness import REPO


def build_reader(tmp: Path) -> Path:
    out = tmp / "reader"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(REPO / "bench/reader.c")], check=True)
    return out


def path_sets(root: Path) -> dict[str, list[str]]:
    """The files each figure reads, relative to a view root."""
    sysd = root / "sys"
    gpus = sorted((sysd / "bus/pci/devices").iterdir())
    pci = [str(g / a) for g in gpus for a in ("vendor", "device", "class", "subsystem_vendor",
                                                "subsystem_device", "numa_node", "local_cpulist")]
    hcas = sorted((sysd / "class/infiniband").iterdir())
    ib = [str(h / a) for h in hcas for a in ("node_guid", "fw_ver", "board_id", "hca_type",
                                               "ports/1/state", "ports/1/rate")]
    counters = [str(h / "ports/1/counters" / c) for h in hcas[:64]
                for c in ("port_xmit_data", "port_rcv_data", "port_xmit_packets",
                          "unicast_rcv_packets")]
    dirs = [str(h / "ports/1/counters") for h in hcas] + [str(g) + "/" for g in gpus]
    links = [str(g) for g in gpus] + [str(h) for h in hcas]
    return {"read:pci": pci, "read:ib": ib, "read:counter": counters, "stat": pci + ib,
            "listdir": dirs, "readlink": links}


def sysfs_sets() -> dict[str, list[str]]:
    devs = sorted(Path("/sys/bus/pci/devices").iterdir())
    pci = [str(d / a) for d in devs for a in ("vendor", "device", "class", "subsystem_vendor",
                                                "subsystem_device", "numa_node")]
    return {"read:pci": pci, "stat": pci, "listdir": [str(d) + "/" for d in devs],
            "readlink": [str(d) for d in devs]}


def warm_up(reader: Path, op: str, paths: list[str], tmp: Path) -> None:
    """One untimed pass, so a cell measures caches as they are in steady use."""
    listfile = tmp / f"warm-{random.random()}"
    listfile.write_text("\n".join(paths) + "\n")
    subprocess.run([str(reader), op, "0", "0", str(listfile)], check=True,
                   stdout=subprocess.DEVNULL)
    listfile.unlink()


def percentile(ordered: list[int], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), 0 for no samples."""
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def run_readers(reader: Path, op: str, paths: list[str], readers: int, ms: int,
                tmp: Path) -> dict[str, float]:
    listfile = tmp / f"paths-{random.random()}"
    listfile.write_text("\n".join(paths) + "\n")
    start = time.monotonic_ns() + 50_000_000
    latfiles = [tmp / f"lat-{i}-{random.random()}" for i in range(readers)]
    procs = [subprocess.Popen([str(reader), op, str(ms), str(start), str(listfile), str(lat)],
                              stdout=subprocess.PIPE, text=True) for lat in latfiles]
    results = [json.loads(p.communicate()[0]) for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a reader failed ({op}, {readers} readers)")
    listfile.unlink()
    samples = array.array("q")  # int64 nanoseconds, one per operation (reader.c LATFILE)
    for lat in latfiles:
        samples.frombytes(lat.read_bytes())
        lat.unlink()
    ordered = sorted(samples)
    p50, p99 = percentile(ordered, 50) / 1000, percentile(ordered, 99) / 1000
    return {"ops_s": sum(r["ops"] for r in results) / (ms / 1000),
            "p50_us": float(p50), "p99_us": float(p99),  # over every reader's samples
            "errors": sum(r["errors"] for r in results), "ops": sum(r["ops"] for r in results)}
