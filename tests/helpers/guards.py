"""Checks around every test (a plugin, autouse): no mount left behind under this worker's temp
directory, the host's own mounts as they were, and no WARNING-or-worse log record the test
did not expect.

Under pytest-xdist each worker has a temp directory of its own (``popen-gwN``), so a mount
another worker's test holds meanwhile is not this test's. The host's mounts are shared by
every worker: a change to one fails the test during which it happened."""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from mokkafs.host.mountinfo import MountEntry, mounts_of

# The host's own trees, whose mounts no test makes or changes: a test mounts in its temp
# directory or in a mount namespace of its own.
HOST_TREES = ("/proc", "/sys", "/dev")


def under(base: Path, entries: Iterable[MountEntry]) -> set[str]:
    """The mount points strictly below ``base``."""
    return {m.point for m in entries if m.point.startswith(f"{base}/")}


def is_host_mount(point: str) -> bool:
    return point == "/" or any(point == t or point.startswith(f"{t}/") for t in HOST_TREES)


def host_options(entries: Iterable[MountEntry]) -> dict[int, tuple[str, str, str]]:
    """Each host mount's point and options (per mount, and its file system's), by mount id."""
    return {m.mount_id: (m.point, m.options, m.super_options) for m in entries
            if is_host_mount(m.point)}


def changed_host_mounts(before: Iterable[MountEntry], after: Iterable[MountEntry]) -> list[str]:
    """What changed in the options of a host mount present before and after, one line each
    (a host's cgroup2 mount that gained ``nsdelegate``, say)."""
    old, new = host_options(before), host_options(after)
    return [f"{point}: {opts} {sb} -> {new[mid][1]} {new[mid][2]}"
            for mid, (point, opts, sb) in sorted(old.items())
            if mid in new and new[mid] != (point, opts, sb)]


@pytest.fixture(autouse=True)
def no_leaked_mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every mount a test makes under its temp directories is gone when it ends. Only this
    worker's: another worker or run on the machine (its own base directory) keeps its
    mounts. And the host's own mounts keep their options."""
    base = tmp_path_factory.getbasetemp().resolve()
    before = mounts_of()
    yield
    after = mounts_of()
    leaked = under(base, after) - under(base, before)
    for path in leaked:
        subprocess.run(["umount", "-l", path], capture_output=True, check=False)
    assert not leaked, f"mounts left behind: {sorted(leaked)}"
    changed = changed_host_mounts(before, after)
    assert not changed, f"the host's mounts changed: {changed}"


@pytest.fixture
def expected_logs() -> list[str]:
    """Patterns of WARNING-or-worse log records a test expects (it appends to the list)."""
    return []


@pytest.fixture(autouse=True)
def no_unexpected_log_records(caplog: pytest.LogCaptureFixture,
                              expected_logs: list[str]) -> Iterator[None]:
    """A test fails when code it ran in this process logged a WARNING or worse it did not
    expect (the daemons tests start are checked by ``mokkafs_mount`` the same way)."""
    yield
    unexpected = [r.getMessage() for r in caplog.get_records("call")
                  if r.levelno >= logging.WARNING
                  and not any(re.search(p, r.getMessage()) for p in expected_logs)]
    assert not unexpected, f"unexpected log records: {unexpected}"
