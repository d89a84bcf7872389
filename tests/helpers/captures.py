"""Capture tests' two steps, one way each: run ``mokkafs capture``, and mount what it wrote.
Every capture a test makes is mounted, not only compiled: a profile the schema takes can
still be refused at mount (a node index beyond the LID space was)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.mounts import REPO, Mount, mokkafs_mount

# The view alone: the host's sysfs, which shows through beneath it by default, is not the
# profile's and changes under other tests (loop and zram devices come and go).
VIEW = ["--host-sysfs", "none"]


def run_capture(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``mokkafs capture ARGS``; the timeout is what fails a capture that hangs."""
    return subprocess.run([sys.executable, "-m", "mokkafs", "capture", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


@contextmanager
def mounted(profile: Path | str, where: Path, *args: str) -> Iterator[Mount]:
    """``mokkafs mount --profile PROFILE --host-sysfs none ARGS`` (a file, or a shipped
    profile's name) at ``where/served/mnt``, its log in ``where``, serving until the block
    ends (a capture that does not load fails here, with the daemon's log)."""
    args = ("--profile", str(profile), *VIEW, *args)
    with mokkafs_mount(where / "served" / "mnt", args) as mount:
        yield mount
