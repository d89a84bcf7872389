"""Side-by-side benchmarks: mokkafs against the same tree on tmpfs (what a rendered mock
serves from) and real sysfs, measured interleaved in one run. Prints markdown tables, ratios
first; writes results JSON and PNG plots to bench/results/. Timings are figures to read, not
assertions: nothing here fails on a number."""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mokkafs.fuse.refresh import HOT
from mokkafs.serve import READY
from mokkafs.testing import free_port, samples

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PY = sys.executable
TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_reader(tmp: Path) -> Path:
    out = tmp / "reader"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(REPO / "bench/reader.c")], check=True)
    return out


def profile_with(hcas: int, tmp: Path, fw: str = "28.39.2048", uptime: float = 0.0) -> Path:
    """The h100 profile with ``hcas`` HCAs placed beside the GPUs (its own twelve, and the
    switches that hold them, are left for mokkafs to derive); with ``uptime``, counters that
    start where that many seconds of traffic left them."""
    import yaml

    data = yaml.safe_load((REPO / "mokkafs/profiles/h100.yaml").read_text())
    ib = data["infiniband"]
    del ib["devices"]
    ib["hca_count"] = hcas
    ib["fw_version"] = fw
    if uptime:
        ib.setdefault("traffic", {})["uptime_seconds"] = uptime
    for root in data["pcie_topology"]["root_complexes"]:
        root.pop("switches", None)
    path = tmp / f"h100-{hcas}-{fw}-{uptime:g}.yaml"  # one file per variant
    path.write_text(yaml.safe_dump(data))
    return path


def proc_ticks(pid: int) -> int:
    """User and system CPU ticks of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def proc_kib(pid: int, key: str, source: str = "status") -> int:
    """A "key: value" line of /proc/<pid>/<source> (status, smaps_rollup), 0 if absent."""
    for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    mnt: Path
    url: str

    def cpu_ticks(self) -> int:
        return proc_ticks(self.proc.pid)

    def status(self, key: str) -> int:
        return proc_kib(self.proc.pid, key)

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return str(r.read().decode())

    def metric(self, name: str) -> float:
        """A metric's value, summed over its labels."""
        return sum(value for series, value in samples(self.metrics()).items()
                   if series == name or series.startswith(name + "{"))

    def requests(self) -> float:
        return self.metric("mokkafs_fuse_requests_total")

    def generation(self) -> int:
        with urllib.request.urlopen(self.url + "/readyz", timeout=10) as r:
            return int(json.loads(r.read())["generation"])


@contextmanager
def daemon(profile: Path, mnt: Path, *extra: str) -> Iterator[Daemon]:
    mnt.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen([PY, "-m", "mokkafs", "mount", "--profile", str(profile),
                             "--node-name", "bench", "--host-sysfs", "none",
                             "--metrics", f"127.0.0.1:{port}", *extra, str(mnt)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    d = Daemon(proc, mnt, f"http://127.0.0.1:{port}")
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if READY.encode() in line:
                break
        else:
            raise RuntimeError("mokkafs did not start")
        threading.Thread(target=lambda: proc.stderr.read() if proc.stderr else b"",
                         daemon=True).start()
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def render(profile: Path, dest: Path) -> None:
    subprocess.run([PY, "-m", "mokkafs", "render", "--profile", str(profile), "--node-name",
                    "bench", str(dest)], cwd=REPO, check=True, stderr=subprocess.DEVNULL)


def render_in_process(profile: Path, dest: Path) -> None:
    """What a mock that re-renders does on a change, without a process start: compile the
    profile, build the view, write it over the served directory."""
    from mokkafs.delivery.render import render as write_tree
    from mokkafs.profile.compile import Options
    from mokkafs.profile.resolve import load_state
    from mokkafs.surfaces import SURFACES
    from mokkafs.tree.assemble import Assembler

    state = load_state(profile, Options(node_name="bench", started_at=time.monotonic()))
    write_tree(Assembler(SURFACES).build(state)[0], dest, time.monotonic())


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


MODES = ("no-open", "keep-cache")  # mokkafs's cache modes (mokkafs/fuse/policies.py)
CONFIGS = (*MODES, "tmpfs", "sysfs")


def reads(reader: Path, hca_counts: list[int], reader_counts: list[int], ms: int,
          rounds: int, tmp: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for hcas in hca_counts:
        profile = profile_with(hcas, tmp)
        shm = Path(tempfile.mkdtemp(prefix="mokkafs-bench-", dir="/dev/shm"))
        render(profile, shm)
        with contextlib.ExitStack() as stack:
            daemons = {mode: stack.enter_context(daemon(profile, tmp / f"mnt-{hcas}-{mode}",
                                                        "--cache-mode", mode))
                       for mode in MODES}
            sets = {mode: path_sets(d.mnt) for mode, d in daemons.items()}
            sets["tmpfs"] = path_sets(shm)
            if hcas == hca_counts[0]:
                sets["sysfs"] = sysfs_sets()
            for op_key in sets["tmpfs"]:
                op = op_key.split(":")[0]
                for readers in reader_counts:
                    samples: dict[str, list[dict[str, float]]] = {}
                    for _ in range(rounds):
                        order = [c for c in sets if op_key in sets[c]]
                        random.shuffle(order)
                        for config in order:
                            d = daemons.get(config)
                            warm_up(reader, op, sets[config][op_key], tmp)
                            cpu0 = d.cpu_ticks() if d else 0
                            req0 = d.requests() if d else 0.0
                            r = run_readers(reader, op, sets[config][op_key], readers, ms, tmp)
                            if d:
                                r["cpu_us_op"] = (d.cpu_ticks() - cpu0) * TICK_US / max(r["ops"], 1)
                                r["req_op"] = (d.requests() - req0) / max(r["ops"], 1)
                            samples.setdefault(config, []).append(r)
                    base = statistics.median(s["ops_s"] for s in samples["tmpfs"])
                    for config, runs in samples.items():
                        row: dict[str, Any] = {
                            "hcas": hcas, "figure": op_key, "readers": readers,
                            "config": config}
                        for key in runs[0]:
                            row[key] = statistics.median(s[key] for s in runs)
                        row["x_tmpfs"] = float(row["ops_s"]) / base if base else 0.0
                        rows.append(row)
                    log(f"{hcas} HCAs {op_key} x{readers}: " + ", ".join(
                        f"{c} {statistics.median(s['ops_s'] for s in runs):,.0f}/s"
                        for c, runs in samples.items()))
        shutil.rmtree(shm)
    return rows


def spin_until(path: Path, text: str, seconds: float = 30.0) -> None:
    """Re-read ``path`` in a tight loop (how soon it changes is what is timed) until it holds
    ``text``; RuntimeError after ``seconds``, so a change that never comes fails the run."""
    deadline = time.monotonic() + seconds
    while path.read_text() != text:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not read {text!r} within {seconds:.0f} s")


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


def idle_and_rss(hca_counts: list[int], idle_s: int, tmp: Path) -> dict[str, Any]:
    """A daemon's RSS at each HCA count; at the largest, its CPU ticks and context switches
    over ``idle_s`` seconds once a reader that kept every port hot has stopped."""
    out: dict[str, Any] = {"rss_kib": {}}
    for hcas in hca_counts:
        with daemon(profile_with(hcas, tmp), tmp / f"mnt-idle-{hcas}") as d:
            time.sleep(1)
            out["rss_kib"][hcas] = d.status("VmRSS")
            if hcas == max(hca_counts):
                # A reader of every port in consecutive steps makes them all hot (pushed at
                # each step); once it stops, pushing must end within a second and then
                # nothing may run.
                counters = sorted((d.mnt / "sys/class/infiniband").glob("*/ports/*/counters"))
                for _ in range(3):
                    for c in counters:
                        read_file(c / "port_xmit_data")
                    time.sleep(0.1)
                time.sleep(2)
                ticks, ctx = d.cpu_ticks(), (d.status("voluntary_ctxt_switches")
                                             + d.status("nonvoluntary_ctxt_switches"))
                time.sleep(idle_s)
                out["idle_hcas"] = hcas
                out["idle_seconds"] = idle_s
                out["idle_cpu_ticks"] = d.cpu_ticks() - ticks
                out["idle_ctx_switches"] = (d.status("voluntary_ctxt_switches")
                                            + d.status("nonvoluntary_ctxt_switches") - ctx)
    return out


@contextmanager
def node_exporter(sysfs: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
                             f"--path.sysfs={sysfs}", "--collector.disable-defaults",
                             "--collector.infiniband"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("node_exporter did not start")
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        proc.terminate()
        proc.wait()


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
            daemons: dict[str, Daemon] = {}
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


def read_file(path: Path) -> bytes:
    """As Go's os.ReadFile reads (open, read to the end, close): Python's own open() asks
    isatty(), an ioctl that a FUSE file sends to the daemon and no Go consumer makes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


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


@contextmanager
def cpu_account(pid: int) -> Iterator[Callable[[], float] | None]:
    """A clock of the CPU seconds ``pid`` and all its threads use from here on, exited ones
    included, to the nanosecond: a cgroup of its own (cgroup v2's ``cpu.stat``, else v1's
    cpuacct). /proc's ticks are 10 ms, a sixth of the monitoring target's budget for a
    minute. None where no cgroup can be made."""
    for base, usage, scale in (("/sys/fs/cgroup", "cpu.stat", 1e-6),
                               ("/sys/fs/cgroup/unified", "cpu.stat", 1e-6),
                               ("/sys/fs/cgroup/cpuacct", "cpuacct.usage", 1e-9)):
        root = Path(base)
        if not (root / "cgroup.procs").exists() or not (root / usage).exists():
            continue
        group = root / f"mokkafs-bench-{pid}"
        try:
            group.mkdir()
            (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            with contextlib.suppress(OSError):
                group.rmdir()
            continue

        def used(group: Path = group, usage: str = usage, scale: float = scale) -> float:
            text = (group / usage).read_text()
            if usage == "cpu.stat":  # "usage_usec N" first
                text = text.split("usage_usec", 1)[1].split()[0]
            return int(text) * scale

        try:
            yield used
        finally:
            with contextlib.suppress(OSError):  # (it may have exited)
                (root / "cgroup.procs").write_text(str(pid))
            with contextlib.suppress(OSError):
                group.rmdir()
        return
    yield None


LEAD = 20.0  # seconds from the warm-up to the first scrape measured: more than a scrape interval


def monitoring(hcas: int, seconds: int, tmp: Path, uptime: float = 0.0) -> dict[str, Any]:
    """A node under real monitoring for ``seconds``: a node_exporter scrape every 15 s, a
    GFD-like and an NFD-like walk every 60 s (both at the start), against mokkafs (default
    mode) and the tmpfs tree, alternating which goes first; the daemon's CPU over the whole
    time, idle gaps included. One untimed scrape and walk first, ``LEAD`` seconds before the
    minute: the steady state, not the daemon's cold start, is what an hour of monitoring
    costs, and the attributes that last a minute (``STEPPED_DIR_TIMEOUT``: one GETATTR per
    directory of counters) expire in the minute measured, as in every minute or so of the
    steady state. Not in it: the counter files' own attributes, which last ten minutes
    (``FRESH_FILE_TIMEOUT``: one GETATTR per file). ``uptime``: counters that start where that
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
        time.sleep(LEAD)
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


@contextmanager
def floor_fs(mnt: Path) -> Iterator[subprocess.Popen[bytes]]:
    """bench/floor_fs.py mounted at ``mnt``: pyfuse3 and trio answering from prepared objects."""
    mnt.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([PY, str(REPO / "bench/floor_fs.py"), str(mnt)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"serving":
            raise RuntimeError("floor_fs did not start")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def request_floor(reader: Path, ms: int, rounds: int, tmp: Path) -> list[dict[str, Any]]:
    """Uncached requests a second from one reader, and the daemon's CPU per request (its own
    cgroup), for mokkafs in keep-cache mode (stat and readlink through uncached symlinks: one
    READLINK each) beside bench/floor_fs.py, which answers the same requests with nothing
    but pyfuse3 and trio: what no daemon on this stack can go below. Interleaved, medians."""
    profile = profile_with(8, tmp)
    with contextlib.ExitStack() as stack:
        d = stack.enter_context(daemon(profile, tmp / "mnt-floor-mokkafs", "--cache-mode",
                                       "keep-cache"))
        floor = stack.enter_context(floor_fs(tmp / "mnt-floor"))
        sets = path_sets(d.mnt)
        cells = {("mokkafs keep-cache", "stat"): (d.proc.pid, "stat", sets["stat"]),
                 ("mokkafs keep-cache", "readlink"): (d.proc.pid, "readlink", sets["readlink"]),
                 ("pyfuse3 + trio alone", "readlink"): (floor.pid, "readlink",
                                                        [str(tmp / "mnt-floor/l")]),
                 ("pyfuse3 + trio alone", "getattr"): (floor.pid, "stat",
                                                       [str(tmp / "mnt-floor/f")])}
        clocks = {pid: stack.enter_context(cpu_account(pid)) for pid in (d.proc.pid, floor.pid)}
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {c: [] for c in cells}
        for _ in range(rounds):
            for cell in random.sample(list(cells), len(cells)):
                pid, op, paths = cells[cell]
                warm_up(reader, op, paths, tmp)
                used = clocks[pid]
                req0 = d.requests() if pid == d.proc.pid else 0.0
                cpu0 = used() if used else 0.0
                r = run_readers(reader, op, paths, 1, ms, tmp)
                cpu = used() - cpu0 if used else float("nan")
                # floor_fs answers each operation with one request, by construction
                requests = d.requests() - req0 if pid == d.proc.pid else r["ops"]
                samples[cell].append((r["ops_s"], cpu / max(requests, 1) * 1e6))
    rows = []
    for (config, request), runs in samples.items():
        ops_s = statistics.median(run[0] for run in runs)
        rows.append({"config": config, "op": request, "requests_s": ops_s,
                     "cpu_us_request": statistics.median(run[1] for run in runs)})
        log(f"{config}, {request}: {ops_s:,.0f} requests/s")
    return rows


def fault_onsets(count: int, tmp: Path) -> dict[str, Any]:
    """How long after its scheduled time a fault is seen: faults applied through the control
    socket to start 0.5 s later and last 0.3 s, a reader polling the port's state. Measured
    from just before the apply request left, so the figure errs long."""
    from mokkafs.serve.control import request

    control = tmp / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    onset, end = [], []
    with daemon(REPO / "mokkafs/profiles/h100.yaml", tmp / "mnt-faults",
                "--control", str(control)) as d:
        state = d.mnt / "sys/class/infiniband/mlx5_0/ports/1/state"
        for i in range(count):
            text = (f"faults: [{{name: f{i}, kind: ib-port-down, target: mlx5_0/1, "
                    f"after: 0.5, for: 0.3}}]\n")
            sent = time.monotonic()
            request(control, {"op": "apply", "file": "bench", "text": text})
            spin_until(state, "1: DOWN\n")
            onset.append((time.monotonic() - sent - 0.5) * 1000)
            spin_until(state, "4: ACTIVE\n")
            end.append((time.monotonic() - sent - 0.8) * 1000)
            request(control, {"op": "clear", "names": [f"f{i}"]})
    onset.sort()
    end.sort()
    return {"faults": count, "onset_p50_ms": onset[len(onset) // 2], "onset_max_ms": onset[-1],
            "end_p50_ms": end[len(end) // 2], "end_max_ms": end[-1]}


def fleet(n: int, idle_s: int, tmp: Path, optimize: int = 0) -> dict[str, Any]:
    """``n`` daemons of 8 HCAs each: their memory, and their CPU while nobody reads. With
    ``optimize`` 2, run as deploy/ runs them (PYTHONOPTIMIZE=2: no docstrings, no asserts),
    once their bytecode is compiled so (as the image ships it)."""
    profile = profile_with(8, tmp)
    env = {**os.environ, "PYTHONOPTIMIZE": str(optimize)} if optimize else None
    procs = []
    if optimize:  # one daemon first, which writes the bytecode the others then load
        warm = tmp / f"fleet-{optimize}-warm"
        warm.mkdir()
        first = subprocess.Popen([PY, "-m", "mokkafs", "mount", "--profile", str(profile),
                                  "--host-sysfs", "none", str(warm)], cwd=REPO, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert first.stderr is not None
        if not any(READY.encode() in line for line in first.stderr):
            raise RuntimeError("fleet: the first daemon did not start")
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    for i in range(n):
        mnt = tmp / f"fleet-{optimize}-{i}"
        mnt.mkdir()
        procs.append(subprocess.Popen([PY, "-m", "mokkafs", "mount", "--profile", str(profile),
                                       "--node-name", f"node-{i}", "--node-index", str(i),
                                       "--host-sysfs", "none", str(mnt)], cwd=REPO, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(
                os.path.ismount(tmp / f"fleet-{optimize}-{i}") for i in range(n)):
            time.sleep(0.2)
        down = [i for i in range(n) if not os.path.ismount(tmp / f"fleet-{optimize}-{i}")]
        if down:
            raise RuntimeError(f"fleet: daemons {down} did not mount within 120 s")
        time.sleep(1)

        def total(key: str, source: str = "status") -> int:
            return sum(proc_kib(p.pid, key, source) for p in procs)

        def ticks() -> int:
            return sum(proc_ticks(p.pid) for p in procs)

        # PSS splits shared pages (libpython, pydantic-core, ...) among the daemons
        rss, shared, t0 = total("VmRSS"), total("Pss", "smaps_rollup"), ticks()
        time.sleep(idle_s)
        return {"daemons": n, "pythonoptimize": optimize,
                "rss_mib_total": rss / 1024, "rss_mib_per_node": rss / 1024 / n,
                "pss_mib_per_node": shared / 1024 / n,
                "idle_ticks_total": ticks() - t0, "idle_seconds": idle_s,
                "rss_gib_at_5000": rss / n * 5000 / 1024 / 1024}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)


def shim_cost(reader: Path, rounds: int, ms: int, tmp: Path) -> list[dict[str, Any]]:
    """What the preload shim costs a path outside its prefixes: the same stat and read loops
    over host files, with and without it, interleaved."""
    from mokkafs.delivery.preload import library

    paths = ["/etc/hostname", "/etc/passwd", "/usr/bin/env", "/proc/self/status"]
    listfile = tmp / "host-paths"
    listfile.write_text("\n".join(paths) + "\n")
    rows = []
    for op in ("stat", "read"):
        samples: dict[str, list[float]] = {"without": [], "with": []}
        for _ in range(rounds):
            for config in random.sample(list(samples), 2):
                env = dict(os.environ)
                if config == "with":
                    env.update(LD_PRELOAD=str(library()), MOKKAFS_ROOT="/nonexistent-view")
                start = time.monotonic_ns() + 20_000_000
                out = subprocess.run([str(reader), op, str(ms), str(start), str(listfile)],
                                     capture_output=True, text=True, env=env, check=True)
                samples[config].append(json.loads(out.stdout)["ops"] / (ms / 1000))
        without, with_ = (statistics.median(samples[k]) for k in ("without", "with"))
        rows.append({"op": op, "without_ops_s": without, "with_ops_s": with_,
                     "ns_added": (1 / with_ - 1 / without) * 1e9, "x": with_ / without})
        log(f"shim, {op} outside the prefixes: {without:,.0f}/s without, {with_:,.0f}/s with")
    return rows


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small sweep, about 5 minutes")
    parser.add_argument("--compile-storm", action="store_true",
                        help="only the readers' latency during a storm of compiles")
    args = parser.parse_args()
    if args.compile_storm:
        with tempfile.TemporaryDirectory(prefix="mokkafs-bench-") as t:
            storm = compile_storm(build_reader(Path(t)), 300, 3000, Path(t))
        print(table([storm], list(storm)))
        return
    quick = args.quick
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mokkafs-bench-") as t:
        tmp = Path(t)
        reader = build_reader(tmp)
        hca_counts = [8, 64] if quick else [1, 8, 64, 256]
        reader_counts = [1, 2] if quick else [1, 2, 4]
        log("attribute reads, stat, readdir, readlink")
        cells_ms, rounds = (300, 1) if quick else (1000, 3)
        rows = reads(reader, hca_counts, reader_counts, cells_ms, rounds, tmp)
        log("uncached requests, beside pyfuse3 and trio alone")
        floor = request_floor(reader, 300 if quick else 1000, 1 if quick else 3, tmp)
        log("swaps")
        swap = swaps(20 if quick else 100, tmp)
        log("reads during a storm of compiles")
        storm = compile_storm(reader, 100 if quick else 300, 1000 if quick else 3000, tmp)
        log("idle and memory")
        idle = idle_and_rss(hca_counts, 10 if quick else 60, tmp)
        log("node_exporter scrapes")
        ne = scrapes([8, 64], 3 if quick else 10, tmp)
        log("a node under monitoring")
        mon = [monitoring(8, 60, tmp, uptime) for uptime in (0.0, UPTIME)]
        for m in mon:
            log(f"monitoring, uptime {m['uptime_s']:g} s: {m['core_pct']:.3f} % of a core")
        log("fault onsets")
        faults = fault_onsets(10 if quick else 30, tmp)
        log("a fleet on one machine, run plainly and as deploy/ runs it")
        fleets = [fleet(10 if quick else 50, 5 if quick else 30, tmp, optimize)
                  for optimize in (0, 2)]
        log("the preload shim on paths outside its prefixes")
        shim = shim_cost(reader, 3 if quick else 7, 300 if quick else 1000, tmp)
    result = {"machine": {"cores": os.cpu_count(), "kernel": os.uname().release},
              "quick": quick, "reads": rows, "floor": floor, "swap": swap, "idle": idle,
              "compile_storm": storm, "node_exporter": ne, "monitoring": mon, "faults": faults,
              "fleet": fleets, "shim": shim}
    (RESULTS / ("quick.json" if quick else "full.json")).write_text(json.dumps(result, indent=1))
    pngs = plots(rows)
    report = "\n".join([
        f"{'Quick run' if quick else 'Full sweep'}, {time.strftime('%Y-%m-%d')}: "
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
        "### Reads during a storm of compiles of the largest allowed profile (one reader; "
        "quiet: the same reads with no edit)\n",
        table([storm], list(storm)),
        "### Idle cost and memory\n",
        table([{k: v for k, v in idle.items() if k != "rss_kib"}],
              [k for k in idle if k != "rss_kib"]),
        table([{"hcas": h, "rss_mib": v / 1024} for h, v in idle["rss_kib"].items()],
              ["hcas", "rss_mib"]),
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
        "### Fleet on one machine (pythonoptimize 2: as deploy/ runs the daemon)\n",
        table(fleets, list(fleets[0])),
        "### The preload shim on paths outside its prefixes\n",
        table(shim, ["op", "without_ops_s", "with_ops_s", "ns_added", "x"]),
        f"plots: {', '.join(str(p.relative_to(REPO)) for p in pngs)}\n",
    ])
    print(report)
    if not quick:
        publish(report)


def publish(report: str) -> None:
    """Put the full sweep's tables into bench/README.md between its markers."""
    readme = REPO / "bench" / "README.md"
    text = readme.read_text()
    begin, end = "<!-- full-sweep:begin -->\n", "<!-- full-sweep:end -->"
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f"{readme}: markers {begin.strip()} / {end} not found")
    readme.write_text(head + begin + report + "\n" + end + rest.partition(end)[2])
    (RESULTS / "full.md").write_text(report)
    log(f"wrote the summary into {readme.relative_to(REPO)}")

if __name__ == "__main__":
    main()
