"""What every figure stands on: profiles of a given size, mokkafs daemons started through
``mokkafs.testing`` (the one way), the tree rendered to tmpfs beside them, and the CPU,
memory and requests of a process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mokkafs import testing

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PY = sys.executable
TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")
MODES = ("no-open", "keep-cache")  # mokkafs's cache modes (mokkafs/fuse/modes.py)
CONFIGS = (*MODES, "tmpfs", "sysfs")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


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


def settle(pid: int, limit: float = 30.0) -> float:
    """Wait until the daemon ``pid`` runs its main thread alone, as at rest: the worker threads
    the work before woke end once idle for 10 s (trio's thread cache), a one-time cost of that
    work that an idle figure should not count. The seconds it took (``limit`` if never)."""
    start = time.monotonic()
    while len(os.listdir(f"/proc/{pid}/task")) > 1 and time.monotonic() < start + limit:
        time.sleep(0.1)
    return round(time.monotonic() - start, 1)


def family(pid: int) -> list[int]:
    """A process and its children (a daemon's compile child and kmsg mount), each once."""
    children: list[str] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):  # a worker thread's children are its
        with contextlib.suppress(OSError):
            children += (task / "children").read_text().split()
    return [pid, *(p for c in dict.fromkeys(children) for p in family(int(c)))]


def proc_kib(pid: int, key: str, source: str = "status") -> int:
    """A "key: value" line of /proc/<pid>/<source> (status, smaps_rollup), 0 if absent or the
    process is gone (a short-lived child of a daemon)."""
    try:
        text = Path(f"/proc/{pid}/{source}").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return 0
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


@dataclass
class Served:
    """A running mokkafs daemon (``mokkafs.testing.Daemon``) as the figures measure it: its
    CPU, memory, requests and generation."""

    daemon: testing.Daemon

    @property
    def mnt(self) -> Path:
        return self.daemon.path

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.daemon.process

    def cpu_ticks(self) -> int:
        return proc_ticks(self.proc.pid)

    def status(self, key: str) -> int:
        return proc_kib(self.proc.pid, key)

    def metric(self, name: str) -> float:
        """A metric's value, summed over its labels."""
        return sum(value for series, value in self.daemon.metrics().items()
                   if series == name or series.startswith(name + "{"))

    def requests(self) -> float:
        return self.metric("mokkafs_fuse_requests_total")

    def generation(self) -> int:
        generation = self.daemon.readyz()["generation"]
        assert isinstance(generation, int)
        return generation


@contextmanager
def mokkafs(profile: Path, mnt: Path, *args: str, env: dict[str, str] | None = None,
            ) -> Iterator[testing.Daemon]:
    """``mokkafs mount --profile PROFILE --host-sysfs none ARGS MNT``, logging beside the
    mountpoint, until it serves; stopped by its PID."""
    with testing.daemon(mnt, ["--profile", str(profile), "--host-sysfs", "none", *args],
                        log=mnt.parent / f"{mnt.name}.log", env=env, cwd=REPO,
                        ready_timeout=300, stop_timeout=60) as running:
        yield running


@contextmanager
def daemon(profile: Path, mnt: Path, *extra: str) -> Iterator[Served]:
    """A daemon of node ``bench`` with its metrics on a loopback port."""
    args = ["--node-name", "bench", "--metrics", f"127.0.0.1:{testing.free_port()}", *extra]
    with mokkafs(profile, mnt, *args) as running:
        yield Served(running)


def first_fault(control: Path) -> None:
    """A daemon's first fault, untimed, set far off and cleared: it imports the schema (a
    daemon at rest holds none), as a reader's untimed first pass warms its caches."""
    from mokkafs.serve.control import request

    text = "faults: [{name: warm-up, kind: ib-port-down, target: mlx5_0/1, after: 3600}]\n"
    request(control, {"op": "apply", "file": "bench", "text": text})
    request(control, {"op": "clear", "names": ["warm-up"]})


def node_exporter(sysfs: Path) -> contextlib.AbstractContextManager[str]:
    """node_exporter's infiniband collector over ``sysfs``: its /metrics URL."""
    return testing.node_exporter("prometheus-node-exporter", sysfs, timeout=10)


def render(profile: Path, dest: Path) -> None:
    subprocess.run([PY, "-m", "mokkafs", "render", "--profile", str(profile), "--node-name",
                    "bench", str(dest)], cwd=REPO, check=True, stderr=subprocess.DEVNULL)


def render_in_process(profile: Path, dest: Path) -> None:
    """What a mock that re-renders does on a change, without a process start: compile the
    profile, build the view, write it over the served directory."""
    from mokkafs.delivery.render import render as write_tree
    from mokkafs.profile.options import Options
    from mokkafs.serve.pipeline import compiled, tree_of

    state = compiled(profile, Options(node_name="bench", started_at=time.monotonic()))
    write_tree(tree_of(state), dest, time.monotonic())


def spin_until(path: Path, text: str, seconds: float = 30.0) -> None:
    """Re-read ``path`` every 0.2 ms (how soon it changes is what is timed) until it holds
    ``text``; RuntimeError after ``seconds``, so a change that never comes fails the run. It
    reads as Go's ``os.ReadFile`` does (``read_file``): Python's ``open()`` would send the
    daemon an ioctl with every read, and a reader spinning without pause would hold one of
    two cores, both work no consumer asks of the node whose change is being timed."""
    deadline = time.monotonic() + seconds
    want = text.encode()
    while read_file(path) != want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not read {text!r} within {seconds:.0f} s")
        time.sleep(0.0002)


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
