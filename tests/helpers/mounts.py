"""Start a real mokkafs mount in a subprocess, wait until it serves, and stop it by its PID."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mokkafs.host.mountinfo import mounted_at

REPO = Path(__file__).resolve().parents[2]
NVML_MOCK_PROFILES = REPO / "tests" / "data" / "nvml-mock"
SHIPPED_PROFILES = REPO / "mokkafs" / "profiles"
READY = "mokkafs: serving"  # the daemon's readiness line, printed once the mount serves


@dataclass
class Mount:
    path: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def sys(self) -> Path:
        return self.path / "sys"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def is_mounted(path: Path) -> bool:
    return bool(mounted_at(path))


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_daemons = itertools.count(1)

# What the daemon logs when something is wrong: a test fails on any it did not expect.
COMPLAINT = re.compile(r"^mokkafs: (WARNING|ERROR|CRITICAL) |^Traceback ", re.M)


def unexpected_complaints(log: str, expect: Sequence[str] = ()) -> list[str]:
    """Log lines at WARNING or above (and tracebacks) that match none of ``expect``."""
    lines = [m.string[m.start():m.string.find("\n", m.start())] for m in COMPLAINT.finditer(log)]
    return [line for line in lines if not any(re.search(p, line) for p in expect)]


@contextmanager
def mokkafs_mount(mountpoint: Path, args: Sequence[str], *,
                  command: Sequence[str] | None = None,
                  env: dict[str, str] | None = None,
                  expect: Sequence[str] = ()) -> Iterator[Mount]:
    """Run ``mokkafs mount ARGS MOUNTPOINT`` (or ``command``) until the mount serves; on exit
    send SIGTERM, require a clean exit, an unmounted path, and no complaint in the log but
    those ``expect`` (regular expressions) allows (s3ql's checklogs)."""
    with contextlib.suppress(FileExistsError):  # also a dead mount (stat: ENOTCONN)
        mountpoint.mkdir(parents=True)
    # Not beside the mountpoint (with --cdi-dir its parent must hold nothing else), and one
    # per daemon: a test may start several at one mountpoint.
    log = mountpoint.parent.parent / (f"{mountpoint.parent.name}-{mountpoint.name}."
                                      f"{next(_daemons)}.log")
    cmd = list(command) if command else [sys.executable, "-m", "mokkafs", "mount", *args,
                                          str(mountpoint)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                env={**os.environ, **(env or {})})
    mount = Mount(mountpoint, proc, log)
    try:
        wait_for(lambda: READY in mount.log_text() or proc.poll() is not None, 20,
                 f"mount at {mountpoint}")
        if proc.poll() is not None:
            raise RuntimeError(f"mokkafs exited {proc.returncode}:\n{mount.log_text()}")
        yield mount
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if is_mounted(mountpoint):
            subprocess.run(["umount", "-l", str(mountpoint)], check=False)
            raise AssertionError(f"{mountpoint} still mounted after the daemon stopped")
    assert proc.returncode == 0, f"mokkafs exited {proc.returncode}:\n{mount.log_text()}"
    complaints = unexpected_complaints(mount.log_text(), expect)
    assert not complaints, f"unexpected complaints in the log: {complaints}\n{mount.log_text()}"


@contextmanager
def shared_parent(tmp_path: Path) -> Iterator[Path]:
    """A directory to put a ``--cdi-dir`` mount in. The daemon makes a mountpoint's parent a
    shared mount (for restart survival) and leaves it for containers that may outlive it;
    tests unmount it here."""
    share = tmp_path / "share"
    share.mkdir(exist_ok=True)
    try:
        yield share
    finally:
        subprocess.run(["umount", "-l", str(share)], capture_output=True, check=False)
