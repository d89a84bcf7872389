"""Shared fixtures: States from profiles, real mounts, and a hard requirement on the tools the
tests run (a missing tool fails with its install hint; nothing is skipped)."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.host.mountinfo import mounts_of
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import load_state
from mokkafs.state import HostFacts, State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File, Symlink
from tests.helpers.mounts import (
    NVML_MOCK_PROFILES,
    SHIPPED_PROFILES,
    Mount,
    mokkafs_mount,
)

HOST_PROC_DEVICES = (
    "Character devices:\n  1 mem\n  4 tty\n  5 /dev/tty\n136 pts\n195 nvidia-old-name\n"
    "\nBlock devices:\n  7 loop\n259 blkext\n"
)


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/setup.sh (apt) to install the "
                    "test consumers", pytrace=False)
    return path


def state_of(profile: str | Path, node_name: str = "node-a", **kw: object) -> State:
    path = Path(profile) if isinstance(profile, Path) else SHIPPED_PROFILES / f"{profile}.yaml"
    kw.setdefault("host", HostFacts(HOST_PROC_DEVICES))
    opts = Options(node_name=node_name, started_at=0.0, loaded_at=1_700_000_000.0,
                   **kw)  # type: ignore[arg-type]
    return load_state(path, opts)


def tree_of(state: State) -> Tree:
    return Assembler(SURFACES).build(state)[0]


# A DGX H100's first GPU and its compute NIC (mlx5_0), one PCIe switch apart
# (docs/profiles.md, "h100").
H100_GPU0 = "0000:1b:00.0"
H100_NIC0 = "0000:18:00.0"


@functools.cache
def device_path(bdf: str, profile: str = "h100") -> str:
    """The sysfs directory of function ``bdf`` in a shipped profile's view, relative to the
    mount (as the State places it: below its root complex and bridges)."""
    return state_of(profile).function(bdf).path


ALL_PROFILES: list[Path] = sorted(SHIPPED_PROFILES.glob("*.yaml")) + sorted(
    NVML_MOCK_PROFILES.glob("*.yaml"))


def profile_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.fixture
def mount_h100(tmp_path: Path) -> Iterator[Mount]:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--node-name", "node-a"]) as m:
        yield m


@pytest.fixture
def deadline() -> float:
    return time.monotonic() + 30


def read_following_links(tree: Tree, rel: str, now: float = 0.0) -> bytes:
    """A file's content in ``tree`` at a mount-relative path, following symlinks the way the
    kernel resolves them through the mount."""
    current = ""
    for part in filter(None, rel.split("/")):
        current = f"{current}/{part}".lstrip("/")
        for _ in range(40):
            entry = tree.resolve(current)
            assert entry is not None, current
            if not isinstance(entry.node, Symlink):
                break
            current = os.path.normpath(os.path.join(os.path.dirname(current), entry.node.target))
    entry = tree.resolve(current)
    assert entry is not None and isinstance(entry.node, File), current
    return entry.node.read(now)


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
