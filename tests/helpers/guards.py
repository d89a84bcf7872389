"""Checks around every test (a plugin, autouse): no mount left behind under this run's temp
directories, and no WARNING-or-worse log record the test did not expect."""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.host.mountinfo import mounts_of


def _test_mounts(base: Path) -> set[str]:
    return {m.point for m in mounts_of() if m.point.startswith(f"{base}/")}


@pytest.fixture(autouse=True)
def no_leaked_mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every mount a test makes under its temp directories is gone when it ends. Only this
    run's: another run on the machine (its own base directory) keeps its mounts."""
    base = tmp_path_factory.getbasetemp().resolve()
    before = _test_mounts(base)
    yield
    leaked = _test_mounts(base) - before
    for path in leaked:
        subprocess.run(["umount", "-l", path], capture_output=True, check=False)
    assert not leaked, f"mounts left behind: {sorted(leaked)}"


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
