"""Kill the daemon with SIGKILL at random points, a hundred times, and check that each time a
new daemon recovers everything (the soak of issue 26; not part of CI: it takes a while).

Run as root from the repository, after the set-up: ``.venv/bin/python scripts/soak.py``
(``--rounds``, ``--seed``, ``--no-containers``; ``--record FILE`` writes the summary there).

One daemon serves h100 with a control socket, a state directory and a CDI spec. Before the
first round a long port-down (``soak-keep``) is applied over the control socket. Each round
starts one kind of activity, kills the daemon at a random moment of it, starts a new daemon
with the same arguments, and checks:

- the new daemon serves the view (a listing and an attribute read through the mount);
- a reader that ran through the kill reads the view again;
- nothing is left behind: one FUSE mount at the mountpoint and none elsewhere of this run,
  no temporary files in the state or CDI directory;
- run-time state is restored: every fault the control socket acknowledged before the kill
  (and not a clear it acknowledged) is in effect again, ``soak-keep`` among them, its time
  left no more than before the kill.

The activities: profile swaps (an edit loop), fault transitions (a flapping fault of the
profile), control-socket applies and clears, and container starts (podman with the spec).
The writable sysfs does not exist yet: no round writes to it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mokkafs.errors import MokkafsError
from mokkafs.host.mountinfo import mounts_of
from mokkafs.serve import READY
from mokkafs.serve.control import request
from mokkafs.testing import wait_for

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "mokkafs/profiles/h100.yaml"
CDI_DIR = Path("/var/run/cdi")  # podman 4.3 reads only /etc/cdi and /var/run/cdi
IMAGE = "localhost/mokkafs-soak-hosttools"
PODMAN = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
HOST_TOOLS = ["-v", "/usr:/usr:ro", "-v", "/etc/ld.so.cache:/etc/ld.so.cache:ro"]
KEPT_PORT = "sys/class/infiniband/mlx5_1/ports/1/state"  # soak-keep holds it down
READ_PORT = "sys/class/infiniband/mlx5_0/ports/1/state"  # what the reader reads
FLAP = ("faults:\n  - {name: soak-flap, kind: ib-port-flap, target: mlx5_2/1, every: 1,"
        " count: 5000}\n")


@dataclass
class Node:
    """The soak's node: its directories and the daemon serving it now."""

    base: Path
    kind: str = field(default_factory=lambda: f"mokkafs-soak-{secrets.token_hex(4)}.io/node")
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    containers: list[str] = field(default_factory=list)  # started by rounds, to check

    @property
    def mountpoint(self) -> Path:
        return self.base / "share" / "node"

    @property
    def profile(self) -> Path:
        return self.base / "config" / "node.yaml"

    @property
    def control(self) -> Path:
        return self.base / "ctl" / "sock"

    @property
    def spec(self) -> Path:
        return CDI_DIR / (self.kind.replace("/", "_") + ".json")

    @property
    def runtime(self) -> Path:
        return self.base / "runtime"

    @property
    def log(self) -> Path:
        return self.base / f"daemon-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        cmd = [sys.executable, "-m", "mokkafs", "mount", "--profile", str(self.profile),
               "--node-name", "soak", "--control", str(self.control),
               "--state-dir", str(self.control.parent), "--cdi-dir", str(CDI_DIR),
               "--cdi-kind", self.kind, "--runtime-dir", str(self.runtime),
               str(self.mountpoint)]
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        process = self.process
        wait_for(lambda: READY in self.log.read_text(errors="replace")
                 or process.poll() is not None, 60, "the daemon to serve")
        if process.poll() is not None:
            raise RuntimeError(f"the daemon exited {process.returncode}:\n"
                               + self.log.read_text(errors="replace"))

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def faults(self) -> dict[str, dict[str, str]]:
        answer = request(self.control, {"op": "list"}, timeout=30)
        return {f["name"]: f for f in answer["faults"]}


@dataclass
class Book:
    """What the control socket acknowledged: faults that must survive a kill."""

    applied: set[str] = field(default_factory=set)
    # names whose last request got no answer (the kill came during it): either outcome is right
    unsure: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def asking(self, name: str) -> None:
        with self.lock:
            self.unsure.add(name)

    def answered(self, name: str, applied: bool) -> None:
        with self.lock:
            self.unsure.discard(name)
            (self.applied.add if applied else self.applied.discard)(name)

    def settle(self, listed: set[str]) -> set[str]:
        """What must be listed after a restart; from then on, what is."""
        with self.lock:
            expected = self.applied - self.unsure
            self.applied = set(listed)
            self.unsure.clear()
        return expected


def apply(node: Node, book: Book, name: str, target: str, seconds: int) -> None:
    text = f"faults:\n  - {{name: {name}, kind: ib-port-down, target: {target}, for: {seconds}}}\n"
    book.asking(name)
    request(node.control, {"op": "apply", "file": f"{name}.yaml", "text": text}, timeout=30)
    book.answered(name, applied=True)


def clear(node: Node, book: Book, name: str) -> None:
    book.asking(name)
    request(node.control, {"op": "clear", "names": [name]}, timeout=30)
    book.answered(name, applied=False)


# -- activities: each runs until ``stop`` is set, against a daemon that may die under it ---

def swaps(node: Node, book: Book, stop: threading.Event) -> None:
    """Edit the profile (its HCAs' firmware, to and fro) by rename-over, in a loop."""
    text = PROFILE.read_text()
    i = 0
    while not stop.is_set():
        i += 1
        version = "28.39.2048" if i % 2 else "28.40.1000"
        replace(node.profile, text.replace('fw_version: "28.39.2048"',
                                           f'fw_version: "{version}"', 1))
        stop.wait(0.05)


def replace(path: Path, text: str) -> None:
    """Write ``path`` as an editor does: a new file renamed over the old."""
    tmp = path.with_name(".node.yaml.tmp")
    tmp.write_text(text)
    tmp.rename(path)


def flaps(node: Node, book: Book, stop: threading.Event) -> None:
    replace(node.profile, PROFILE.read_text().rstrip("\n") + "\n" + FLAP)
    stop.wait()


def applies(node: Node, book: Book, stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        i += 1
        name = f"soak-{i % 4}"
        with contextlib.suppress(MokkafsError):  # the daemon died under it
            if name in book.applied:
                clear(node, book, name)
            else:
                apply(node, book, name, f"mlx5_{3 + i % 4}/1", 3600)


def containers(node: Node, book: Book, stop: threading.Event) -> None:
    name = f"mokkafs-soak-{secrets.token_hex(3)}"
    subprocess.run(["podman", "run", "-d", "--name", name, *PODMAN, "--device",
                    f"{node.kind}=all", *HOST_TOOLS, IMAGE, "sleep", "600"],
                   capture_output=True, timeout=120, check=False)
    stop.wait()
    node.containers.append(name)


ACTIVITIES: dict[str, Callable[[Node, Book, threading.Event], None]] = {
    "swaps": swaps, "flaps": flaps, "applies": applies, "containers": containers}


# -- the checks after each restart ---------------------------------------------------------

class Reader(threading.Thread):
    """Reads an attribute of the view in a loop, through every kill; counts reads."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.ok = 0
        self.failed = 0
        self.done = threading.Event()

    def wait_for_a_read(self, timeout: float) -> None:
        """Until the reader has read once more than it had now."""
        before = self.ok
        wait_for(lambda: self.ok > before, timeout, "the reader to read again")

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.path.read_bytes()
                self.ok += 1
            except OSError:
                self.failed += 1
            self.done.wait(0.01)


def leftovers(node: Node) -> list[str]:
    """What a killed daemon may leave and the new one must have undone: mounts of this run
    other than the view and its shared parent (sysfs instances in the runtime directory, a
    second FUSE mount), and temporary files in the state and CDI directories."""
    problems = []
    expected = {str(node.mountpoint), str(node.mountpoint.parent)}
    extra = sorted({m.point for m in mounts_of() if m.point.startswith(str(node.base))}
                   - expected)
    if extra:
        problems.append(f"mounts left: {extra}")
    if sum(m.point == str(node.mountpoint) for m in mounts_of()) != 1:
        problems.append("not exactly one mount at the mountpoint")
    for directory in (node.control.parent, CDI_DIR):
        for entry in directory.iterdir():
            if entry.name.startswith(".") or entry.name.endswith((".tmp", "~")):
                problems.append(f"left in {directory}: {entry.name}")
    return problems


def restored(node: Node, book: Book, left_before: float | None) -> list[str]:
    problems = []
    faults = node.faults()
    control = {n for n, f in faults.items() if f.get("source") != "profile"}
    expected = book.settle(control)
    if not expected <= control:
        problems.append(f"acknowledged faults lost: {sorted(expected - control)}")
    keep = faults.get("soak-keep")
    if keep is None or keep.get("state") != "active":
        problems.append(f"soak-keep not in effect: {keep}")
    left = remaining(keep)
    if left is not None and left_before is not None and left > left_before + 1:
        problems.append(f"soak-keep has more time left after the restart: {left} > {left_before}")
    state = (node.mountpoint / KEPT_PORT).read_text()
    if "DOWN" not in state:
        problems.append(f"soak-keep's port is not down in the view: {state!r}")
    return problems


def remaining(fault: dict[str, str] | None) -> float | None:
    """The seconds a fault's listing says it has left, where it says."""
    if fault is None:
        return None
    for key in ("remaining", "left", "seconds_left"):
        if key in fault:
            with contextlib.suppress(TypeError, ValueError):
                return float(fault[key])
    return None


def serves(node: Node) -> list[str]:
    devices = os.listdir(node.mountpoint / "sys/bus/pci/devices")
    vendor = (node.mountpoint / "sys/bus/pci/devices" / sorted(devices)[0] / "vendor").read_text()
    return [] if len(devices) > 10 and vendor.startswith("0x") else [
        f"the view does not serve: {len(devices)} devices, vendor {vendor!r}"]


def container_sees(node: Node, names: list[str]) -> list[str]:
    problems = []
    for name in names:
        state = subprocess.run(["podman", "inspect", "-f", "{{.State.Running}}", name],
                               capture_output=True, text=True, timeout=60, check=False)
        if state.stdout.strip() == "true":
            seen = subprocess.run(["podman", "exec", name, "cat", "/" + READ_PORT],
                                  capture_output=True, text=True, timeout=60, check=False)
            if "ACTIVE" not in seen.stdout and "DOWN" not in seen.stdout:
                problems.append(f"container {name} does not see the view: {seen.stderr.strip()}")
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], capture_output=True,
                       timeout=120, check=False)
    return problems


# -- the run -----------------------------------------------------------------------------

@contextlib.contextmanager
def soak_node() -> Iterator[Node]:
    base = Path(tempfile.mkdtemp(prefix="mokkafs-soak-"))
    node = Node(base)
    for d in ("share", "config", "ctl", "runtime"):
        (base / d).mkdir(mode=0o700)
    node.mountpoint.mkdir()
    node.profile.write_text(PROFILE.read_text())
    try:
        yield node
    finally:
        node.stop()
        container_sees(node, node.containers)
        subprocess.run(["umount", "-l", str(base / "share")], capture_output=True, check=False)
        subprocess.run([sys.executable, "-m", "mokkafs", "cleanup", "--cdi-dir", str(CDI_DIR),
                        "--cdi-kind", node.kind, str(node.mountpoint)],
                       capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


def make_image() -> None:
    with tempfile.TemporaryDirectory() as root:
        base = Path(root)
        for d in ("usr", "sys", "proc", "dev", "tmp", "run", "etc"):
            (base / d).mkdir()
        for link in ("bin", "sbin", "lib", "lib64"):
            (base / link).symlink_to(f"usr/{link}")
        archive = subprocess.run(["tar", "-C", root, "-c", "."], capture_output=True,
                                 check=True).stdout
        subprocess.run(["podman", "import", "-q", "-", IMAGE], input=archive, check=True,
                       capture_output=True, timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-containers", action="store_true")
    parser.add_argument("--record", type=Path, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    kinds = [k for k in ACTIVITIES if not (args.no_containers and k == "containers")]
    if "containers" in kinds:
        make_image()
    results: list[tuple[int, str, float, list[str]]] = []
    started = time.monotonic()
    with soak_node() as node:
        node.start()
        book = Book()
        apply(node, book, "soak-keep", "mlx5_1/1", 24 * 3600)
        reader = Reader(node.mountpoint / READ_PORT)
        reader.start()
        for i in range(1, args.rounds + 1):
            kind = rng.choice(kinds)
            delay = rng.uniform(0.0, 1.5)
            left_before = remaining(node.faults().get("soak-keep"))
            stop = threading.Event()
            worker = threading.Thread(target=ACTIVITIES[kind], args=(node, book, stop),
                                      daemon=True)
            worker.start()
            time.sleep(delay)  # the random point of the kill, not a wait for anything
            node.kill()
            stop.set()
            worker.join(timeout=180)
            if kind in ("flaps", "swaps"):  # the next rounds start from the plain profile
                node.profile.write_text(PROFILE.read_text())
            problems: list[str] = []
            try:
                node.start()
                reader.wait_for_a_read(30)
                problems += serves(node) + leftovers(node) + restored(node, book, left_before)
                problems += container_sees(node, node.containers)
                node.containers.clear()
            except (OSError, RuntimeError, TimeoutError, MokkafsError) as exc:
                problems.append(f"{type(exc).__name__}: {exc}")
            results.append((i, kind, delay, problems))
            print(f"round {i}: {kind}, killed after {delay:.2f} s: "
                  + ("recovered" if not problems else "; ".join(problems)), flush=True)
            if problems and node.process is not None and node.process.poll() is not None:
                node.start()
        reader.done.set()
    good = sum(1 for *_, p in results if not p)
    minutes = (time.monotonic() - started) / 60
    summary = summarize(results, seed, minutes)
    print(summary)
    if args.record is not None:
        args.record.write_text(summary)
    return 0 if good == len(results) else 1


def summarize(results: list[tuple[int, str, float, list[str]]], seed: int,
              minutes: float) -> str:
    good = sum(1 for *_, p in results if not p)
    by_kind: dict[str, list[int]] = {}
    for _, kind, _, problems in results:
        counts = by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += not problems
    lines = [f"soak: {good}/{len(results)} recoveries (seed {seed}, {minutes:.1f} minutes)", ""]
    lines += ["| activity killed | rounds | recovered |", "|---|---|---|"]
    lines += [f"| {kind} | {n} | {ok} |" for kind, (n, ok) in sorted(by_kind.items())]
    failures = [f"- round {i} ({kind}): {'; '.join(p)}" for i, kind, _, p in results if p]
    if failures:
        lines += ["", *failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
