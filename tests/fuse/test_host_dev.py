"""``--host-dev``: the NVIDIA nodes in a directory standing for the node's /dev (never the
real one), made at start, removed at stop or by cleanup after a crash, and only those the
daemon made: a node that was there before, or took a made node's name since, is left."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mokkafs.surfaces.nvidia_dev import device_numbers
from mokkafs.testing import daemon
from tests.helpers.live import live_mount, profile_text, rename_over
from tests.helpers.mounts import REPO, is_mounted, mokkafs_mount, wait_for
from tests.helpers.profiles import state_of


def numbers(root: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for top, _, files in os.walk(root):
        for name in files:
            st = (Path(top) / name).lstat()
            if stat.S_ISCHR(st.st_mode):
                found["/dev/" + str((Path(top) / name).relative_to(root))] = (
                    os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode))
    return found


def test_nodes_are_made_at_start_and_removed_at_stop(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    os.mknod(dev / "nvidia0", stat.S_IFCHR | 0o600, os.makedev(195, 0))  # not the daemon's
    foreign = (dev / "nvidia0").stat().st_ino
    want = {p: (ma, mi, mode) for p, ma, mi, mode in device_numbers(state_of("a100"))}
    args = ["--profile", "a100", "--host-dev", "--host-dev-root", str(dev),
            "--runtime-dir", str(tmp_path / "rt")]
    with mokkafs_mount(tmp_path / "mnt", args, expect=[r"left .*/nvidia0 as it is"]) as mount:
        got = numbers(dev)
        assert got == {**want, "/dev/nvidia0": (195, 0, 0o600)}
        assert "left " + str(dev / "nvidia0") + " as it is" in mount.log_text()
        # No driver registered these majors on this host: an open fails as on a node whose
        # driver is gone.
        for name in ("nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap2"):
            with pytest.raises(OSError) as caught:
                os.close(os.open(dev / name, os.O_RDONLY))
            assert caught.value.errno == errno.ENXIO, name
    assert sorted(os.listdir(dev)) == ["nvidia0"]  # nvidia-caps/ too was the daemon's
    assert (dev / "nvidia0").stat().st_ino == foreign


def test_cleanup_after_a_crash_removes_only_what_the_daemon_made(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    runtime = tmp_path / "rt"
    mnt = tmp_path / "mnt"
    args = ["--profile", "t4", "--host-dev", "--host-dev-root", str(dev),
            "--runtime-dir", str(runtime)]
    try:
        with daemon(mnt, args, log=tmp_path / "daemon.log", cwd=REPO) as running:
            assert (dev / "nvidia3").exists()
            running.process.kill()
            running.process.wait(timeout=10)
        # Something else takes one name after the crash: the same numbers, another inode.
        os.unlink(dev / "nvidia1")
        os.mknod(dev / "nvidia1", stat.S_IFCHR | 0o666, os.makedev(195, 1))
        result = subprocess.run([sys.executable, "-m", "mokkafs", "cleanup", "--runtime-dir",
                                 str(runtime), str(mnt)], capture_output=True, text=True,
                                cwd=REPO, timeout=60)
        assert result.returncode == 0, result.stderr
        assert sorted(os.listdir(dev)) == ["nvidia1"]
        assert "left " + str(dev / "nvidia1") + ": it is no longer what this daemon made" \
            in result.stderr
    finally:
        if is_mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_the_nodes_follow_the_view_across_swaps(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    extra = ["--host-dev", "--host-dev-root", str(dev), "--runtime-dir", str(tmp_path / "rt")]
    with live_mount(tmp_path, "t4", extra=extra) as live:
        assert (dev / "nvidia1").exists()
        rename_over(live, profile_text("t4")
                    + "faults:\n  - {name: r, kind: gpu-removed, target: gpu1}\n")
        wait_for(lambda: not (dev / "nvidia1").exists(), 20, "nvidia1 removed")
        assert (dev / "nvidia0").exists() and (dev / "nvidiactl").exists()
        rename_over(live, profile_text("t4"))
        wait_for(lambda: (dev / "nvidia1").exists(), 20, "nvidia1 made again")
        assert numbers(dev)["/dev/nvidia1"] == (195, 1, 0o666)
    assert os.listdir(dev) == []


UNREACHED = r"is no directory this daemon reaches"


def test_no_node_is_made_through_a_link(tmp_path: Path) -> None:
    """``nvidia-caps`` is a link to elsewhere: its nodes are not made (there, or anywhere),
    the others are."""
    dev, elsewhere = tmp_path / "dev", tmp_path / "elsewhere"
    dev.mkdir()
    elsewhere.mkdir()
    (dev / "nvidia-caps").symlink_to(elsewhere)
    args = ["--profile", "t4", "--host-dev", "--host-dev-root", str(dev),
            "--runtime-dir", str(tmp_path / "rt")]
    with mokkafs_mount(tmp_path / "mnt", args, expect=[UNREACHED]) as mount:
        assert "/dev/nvidia3" in numbers(dev) and os.listdir(elsewhere) == []
        assert f"not making {dev}/nvidia-caps/nvidia-cap1: {dev}/nvidia-caps {UNREACHED}" \
            in mount.log_text()
    assert os.listdir(dev) == ["nvidia-caps"] and os.listdir(elsewhere) == []


def test_a_directory_turned_into_a_file_stops_neither_stop_nor_start(tmp_path: Path) -> None:
    """While serving, ``nvidia-caps`` is moved away and a file takes its name: the stop
    removes every other node and exits 0, its nodes stay on the record (never followed),
    the next daemon starts, and once the directory is back ``cleanup`` removes them."""
    dev, runtime, mnt = tmp_path / "dev", tmp_path / "rt", tmp_path / "mnt"
    dev.mkdir()
    args = ["--profile", "t4", "--host-dev", "--host-dev-root", str(dev),
            "--runtime-dir", str(runtime)]
    with mokkafs_mount(mnt, args, expect=[UNREACHED]) as first:
        assert (dev / "nvidia-caps/nvidia-cap1").exists()
        (dev / "nvidia-caps").rename(tmp_path / "moved")
        (dev / "nvidia-caps").write_text("not a directory\n")
    assert sorted(os.listdir(dev)) == ["nvidia-caps"]
    assert f"left {dev}/nvidia-caps/nvidia-cap1 on the record: {dev}/nvidia-caps {UNREACHED}" \
        in first.log_text()
    with mokkafs_mount(mnt, args, expect=[UNREACHED]):
        assert "/dev/nvidia3" in numbers(dev)
    assert sorted(os.listdir(dev)) == ["nvidia-caps"]
    (dev / "nvidia-caps").unlink()
    (tmp_path / "moved").rename(dev / "nvidia-caps")
    result = subprocess.run([sys.executable, "-m", "mokkafs", "cleanup", "--runtime-dir",
                             str(runtime), str(mnt)], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"removed {dev}/nvidia-caps/nvidia-cap2" in result.stderr
    assert os.listdir(dev) == [] and os.listdir(runtime) == []
