"""Real mounts for tests: ``mokkafs.testing.daemon`` plus what a test requires of every daemon
it starts (a clean exit, nothing left mounted, no complaint in the log it did not expect).
A plugin: the ``mount_h100`` fixture."""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from mokkafs.host.mountinfo import mounted_at
from mokkafs.testing import Daemon, daemon, free_port, wait_for

__all__ = ["NVML_MOCK_PROFILES", "REPO", "SHIPPED_PROFILES", "STOCK_PYFUSE3", "Mount", "free_port",
           "is_mounted", "mokkafs_mount", "shared_parent", "unexpected_complaints", "wait_for"]

REPO = Path(__file__).resolve().parents[2]
NVML_MOCK_PROFILES = REPO / "tests" / "data" / "nvml-mock"
SHIPPED_PROFILES = REPO / "mokkafs" / "profiles"
STOCK_PYFUSE3 = REPO / ".venv" / "pyfuse3-stock"  # scripts/setup.sh installs it there
# A host attribute the view passes through below a merged directory (sysfs-relative)
HOST_ATTRIBUTE = "devices/system/clocksource/clocksource0/current_clocksource"

Mount = Daemon  # a running daemon, as the tests see it

_daemons = itertools.count(1)

# What the daemon logs when something is wrong: a test fails on any it did not expect.
COMPLAINT = re.compile(r"^mokkafs: (WARNING|ERROR|CRITICAL) |^Traceback ", re.M)


def is_mounted(path: Path) -> bool:
    return bool(mounted_at(path))


def unexpected_complaints(log: str, expect: Sequence[str] = ()) -> list[str]:
    """Log lines at WARNING or above (and tracebacks) that match none of ``expect``."""
    lines = [m.string[m.start():m.string.find("\n", m.start())] for m in COMPLAINT.finditer(log)]
    return [line for line in lines if not any(re.search(p, line) for p in expect)]


@contextmanager
def mokkafs_mount(mountpoint: Path, args: Sequence[str], *,
                  command: Sequence[str] | None = None,
                  env: dict[str, str] | None = None,
                  expect: Sequence[str] = (), make_mountpoint: bool = True) -> Iterator[Mount]:
    """Run ``mokkafs mount ARGS MOUNTPOINT`` (or ``command``) until the mount serves; on exit
    send SIGTERM, require a clean exit, an unmounted path, and no complaint in the log but
    those ``expect`` (regular expressions) allows (s3ql's checklogs)."""
    # Not beside the mountpoint (with --cdi-dir its parent must hold nothing else), and one
    # per daemon: a test may start several at one mountpoint.
    log = mountpoint.parent.parent / (f"{mountpoint.parent.name}-{mountpoint.name}."
                                      f"{next(_daemons)}.log")
    try:
        with daemon(mountpoint, args, log=log, command=command, env=env, cwd=REPO,
                    make_mountpoint=make_mountpoint) as mount:
            yield mount
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["umount", "-l", str(mountpoint)], check=False)
            raise AssertionError(f"{mountpoint} still mounted after the daemon stopped")
    returncode = mount.process.returncode
    assert returncode == 0, f"mokkafs exited {returncode}:\n{mount.log_text()}"
    complaints = unexpected_complaints(mount.log_text(), expect)
    assert not complaints, f"unexpected complaints in the log: {complaints}\n{mount.log_text()}"


@contextmanager
def shared_parent(tmp_path: Path) -> Iterator[Path]:
    """A directory to put a ``--cdi-dir`` mount in. The daemon shares it while it runs and
    un-shares it when it stops, unless containers still hold it (a test's restarted daemon
    then leaves it for them); tests unmount what is left here."""
    share = tmp_path / "share"
    share.mkdir(exist_ok=True)
    try:
        yield share
    finally:
        subprocess.run(["umount", "-l", str(share)], capture_output=True, check=False)


@pytest.fixture
def mount_h100(tmp_path: Path) -> Iterator[Mount]:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--node-name", "node-a"]) as m:
        yield m
