"""mokkafs's NVML library as consumers use it: enumeration beside the same tree on tmpfs, an
Xid seen by ``nvmlEventSetWait``, what a gpustat loop and a blocked waiter cost the daemon, and
the library's memory in a consumer. The consumer is ``bench/nvml_bench.c`` (it dlopens the
library, linked against libdl alone)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from bench.harness import (
    PY,
    REPO,
    TICK_US,
    Served,
    daemon,
    family,
    first_fault,
    log,
    proc_ticks,
    render,
    settle,
)

LIBRARY = REPO / "mokkafs/lib/libnvidia-ml.so.1"
PROFILES = ("h100", "h100-mig")
REPEATS = 3  # enumeration runs of each config, interleaved in random order


def build_nvml_bench(tmp: Path) -> Path:
    out = tmp / "nvml_bench"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow",
                    "-Wstrict-prototypes", "-o", str(out), str(REPO / "bench/nvml_bench.c"),
                    "-ldl"], check=True)
    return out


def nvml_env(mnt: Path) -> dict[str, str]:
    """What ``mokkafs nvml-env --mountpoint MNT`` exports."""
    out = subprocess.run([PY, "-m", "mokkafs", "nvml-env", "--mountpoint", str(mnt)],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    return dict(re.findall(r"^export (\w+)=(\S+)$", out, re.M))


def family_ticks(pid: int) -> int:
    """CPU ticks of a daemon and its children (the compile child, the kmsg mount)."""
    total = 0
    for p in family(pid):
        with contextlib.suppress(OSError):  # a child that ended in between
            total += proc_ticks(p)
    return total


@contextmanager
def tmpfs(tmp: Path) -> Iterator[Path]:
    """A tmpfs of its own below ``tmp`` (/dev/shm where this process may not mount)."""
    point = tmp / "nvml-tmpfs"
    point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(point)],
                             stderr=subprocess.DEVNULL).returncode == 0
    if not mounted:
        point.rmdir()
        point = Path("/dev/shm") / f"mokkafs-bench-nvml-{os.getpid()}"
        point.mkdir()
    try:
        yield point
    finally:
        if mounted:
            subprocess.run(["umount", str(point)], check=True)
        else:
            subprocess.run(["rm", "-rf", str(point)], check=True)


def enumerate_once(program: Path, root: Path, rounds: int) -> dict[str, Any]:
    """``rounds`` timed rounds of nvmlInit_v2, every GPU's identity, PCI, memory and MIG
    devices, and nvmlShutdown, on the view at ``root``."""
    out = subprocess.run([str(program), str(LIBRARY), "enum", str(rounds)],
                         env={**os.environ, "MOKKAFS_ROOT": str(root)}, capture_output=True,
                         text=True)
    if out.returncode:
        raise RuntimeError(f"nvml_bench enum on {root}: {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def enumeration(program: Path, profile: str, mnt: Path, view: Path,
                rounds: int) -> dict[str, Any]:
    """Enumeration on the mount and on the same view rendered to tmpfs, ``REPEATS`` runs of
    each interleaved in random order after one untimed round each; the median of their p50s.
    The consumer's memory: before the dlopen, and after nvmlInit and one enumeration."""
    roots = {"mokkafs": mnt, "tmpfs": view}
    for root in roots.values():
        enumerate_once(program, root, 1)
    runs: dict[str, list[dict[str, Any]]] = {"mokkafs": [], "tmpfs": []}
    for _ in range(REPEATS):
        for config in random.sample(list(roots), 2):
            runs[config].append(enumerate_once(program, roots[config], rounds))
    mine, theirs = (statistics.median(r["p50_us"] for r in runs[c]) for c in roots)
    first = runs["mokkafs"][0]
    return {"profile": profile, "gpus": first["gpus"], "mig_devices": first["mig_devices"],
            "rounds": rounds, "mokkafs_us": mine, "tmpfs_us": theirs, "x_tmpfs": mine / theirs,
            "rss_kib_added": first["rss_kib_after"] - first["rss_kib_before"],
            "pss_kib_added": first["pss_kib_after"] - first["pss_kib_before"],
            "rss_kib": first["rss_kib_after"], "pss_kib": first["pss_kib_after"]}


@contextmanager
def waiter(program: Path, mnt: Path, events: int, timeout_ms: int,
           ) -> Iterator[IO[str]]:
    """A consumer blocked in nvmlEventSetWait_v2, registered for Xids of every GPU; its
    output's lines (``event XID NS``, ``timeout NS``) once it printed ``ready``."""
    proc = subprocess.Popen([str(program), str(LIBRARY), "wait", str(events), str(timeout_ms)],
                            env={**os.environ, "MOKKAFS_ROOT": str(mnt)},
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        if proc.stdout.readline() != "ready\n":
            raise RuntimeError("nvml_bench wait did not register")
        yield proc.stdout
    finally:
        proc.kill()
        proc.wait()


def xid_waits(program: Path, d: Served, control: Path, count: int) -> dict[str, Any]:
    """``count`` Xid faults applied through the control socket to start 0.5 s later, each
    seen by a consumer blocked in nvmlEventSetWait_v2: the time it returned after the fault's
    time. Measured from just before the apply request left, so the figure errs long."""
    from mokkafs.serve.control import request

    lags = []
    with waiter(program, d.mnt, count, 10_000) as lines:
        for i in range(count):
            text = f"faults: [{{name: n{i}, kind: xid, target: gpu1, xid: 48, after: 0.5}}]\n"
            sent = time.monotonic()
            request(control, {"op": "apply", "file": "bench", "text": text})
            word, *rest = lines.readline().split()
            if word != "event" or rest[0] != "48":
                raise RuntimeError(f"nvml_bench wait: {word} {rest} for an Xid 48 fault")
            lags.append((int(rest[1]) / 1e9 - sent - 0.5) * 1000)
            request(control, {"op": "clear", "names": [f"n{i}"]})
    lags.sort()
    return {"xids": count, "seen_p50_ms": lags[len(lags) // 2], "seen_max_ms": lags[-1]}


def idle_wait(program: Path, d: Served, seconds: int) -> dict[str, Any]:
    """The daemon's CPU ticks (its children counted) over ``seconds`` while a consumer is
    blocked in nvmlEventSetWait_v2 and no event comes: counted once the worker threads the
    consumer's start woke have ended (``harness.settle``: a one-time cost of the start's
    reads, not of the wait; ``settle_seconds``)."""
    with waiter(program, d.mnt, 1, (seconds + 60) * 1000):
        settled = settle(d.proc.pid)
        ticks = family_ticks(d.proc.pid)
        time.sleep(seconds)
        ticks = family_ticks(d.proc.pid) - ticks
    return {"wait_seconds": seconds, "settle_seconds": settled, "wait_daemon_ticks": ticks}


def gpustat_loop(d: Served, seconds: int, tmp: Path) -> dict[str, Any]:
    """``gpustat -i 1`` (its watch mode: one query a second, NVML initialized at each) in
    ``mokkafs nvml-env``'s environment: the daemon's CPU (its children counted) over
    ``seconds`` from its first query on, and per hour."""
    env = {**os.environ, **nvml_env(d.mnt), "PYTHONUNBUFFERED": "1"}
    out = tmp / "gpustat.out"

    def queries() -> int:  # a query prints a header line, then a "[i] ..." line a GPU
        return sum(1 for line in out.read_text().splitlines()
                   if line and not line.startswith("["))

    with out.open("w") as sink:
        proc = subprocess.Popen([str(Path(PY).parent / "gpustat"), "-i", "1"], env=env,
                                stdout=sink, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not queries():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("gpustat -i 1 printed no query")
                time.sleep(0.05)
            time.sleep(0.5)  # between two queries
            ticks, done = family_ticks(d.proc.pid), queries()
            time.sleep(seconds)
            ticks, done = family_ticks(d.proc.pid) - ticks, queries() - done
        finally:
            proc.send_signal(signal.SIGINT)  # its loop's own way out
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    cpu_s = ticks * TICK_US / 1e6
    return {"seconds": seconds, "queries": done, "daemon_ticks": ticks,
            "daemon_cpu_s": cpu_s, "cpu_ms_per_query": cpu_s * 1000 / max(done, 1),
            "cpu_s_per_hour": cpu_s * 3600 / seconds}


def nvml(rounds: int, xids: int, gpustat_s: int, idle_s: int, tmp: Path) -> dict[str, Any]:
    """Every NVML figure: enumeration on h100 and h100-mig (``rounds`` a run), ``xids`` Xid
    faults seen by a waiter, a gpustat loop of ``gpustat_s`` seconds, a blocked waiter for
    ``idle_s`` seconds."""
    program = build_nvml_bench(tmp)
    control = tmp / "ctl-nvml" / "sock"
    control.parent.mkdir(mode=0o700)
    out: dict[str, Any] = {"enumeration": []}
    with tmpfs(tmp) as shm:
        for name in PROFILES:
            profile = REPO / f"mokkafs/profiles/{name}.yaml"
            render(profile, shm / name)
            extra = ("--control", str(control)) if name == "h100" else ()
            with daemon(profile, tmp / f"mnt-nvml-{name}", *extra) as d:
                log(f"NVML enumeration, {name}")
                out["enumeration"].append(enumeration(program, name, d.mnt, shm / name,
                                                      rounds))
                if name != "h100":
                    continue
                log("NVML: a blocked waiter's cost, Xids seen by it, a gpustat loop")
                out["events"] = idle_wait(program, d, idle_s)
                first_fault(control)
                out["events"] |= xid_waits(program, d, control, xids)
                out["gpustat"] = gpustat_loop(d, gpustat_s, tmp)
    return out
