"""A mountpoint that holds files: the mount would hide them (libfuse 3 says nothing), so it is
refused, with status 3 and the way out; ``--nonempty`` mounts over them on purpose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.mounts import REPO, is_mounted, mokkafs_mount


def test_a_mountpoint_with_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "notes.txt").write_text("mine\n")
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                             str(mnt)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 3, result.stderr
    assert result.stderr.strip() == (
        f"mokkafs: mountpoint {mnt} is not empty (it holds notes.txt): the mount would hide "
        "its files; choose an empty directory, or pass --nonempty to mount over them")
    assert not is_mounted(mnt)
    assert (mnt / "notes.txt").read_text() == "mine\n"


def test_nonempty_mounts_over_the_files_and_they_come_back(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    (mnt / "old").mkdir(parents=True)
    with mokkafs_mount(mnt, ["--profile", "t4", "--nonempty"]) as mount:
        assert sorted(os.listdir(mount.path)) == ["dev", "proc", "run", "sys"]  # the view, not old
    assert os.listdir(mnt) == ["old"]
