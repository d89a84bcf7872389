"""A missing mountpoint (the README's ``mokkafs mount --profile h100 /run/mokkafs``, typed on a
fresh node): the daemon makes it, mode 0755 whatever the umask, where the parent exists and
only root may change it, and removes it at stop, or ``mokkafs cleanup`` does after a kill.
An existing mountpoint is left at stop; an unsafe or missing parent is refused (exit 3) and
nothing is made."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mokkafs.errors import EXIT_MOUNTPOINT
from mokkafs.testing import daemon
from tests.helpers.mounts import REPO, is_mounted, mokkafs_mount


def mokkafs(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mokkafs", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=timeout)


def beneath(mountpoint: Path) -> str:
    """The mode of the directory the mount covers, seen in a mount namespace without it."""
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f"umount -l {shlex.quote(str(mountpoint))} && stat -c %a {shlex.quote(str(mountpoint))}"],
        capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def test_a_missing_mountpoint_is_made_served_and_removed_at_stop(tmp_path: Path) -> None:
    parent = tmp_path / "run"
    parent.mkdir(mode=0o755)
    mnt = parent / "mokkafs"
    # a umask that would make it 0700, as a root shell's may: readers other than root need 0755
    command = ["sh", "-c", f"umask 077 && exec {shlex.quote(sys.executable)} -m mokkafs mount "
               f"--profile t4 {shlex.quote(str(mnt))}"]
    with mokkafs_mount(mnt, [], command=command, make_mountpoint=False) as mount:
        assert (mount.path / "proc/devices").read_text().startswith("Character devices")
        assert beneath(mnt) == "755"
    assert not mnt.exists()
    mnt.mkdir()  # one the daemon did not make stays
    with mokkafs_mount(mnt, ["--profile", "t4"]):
        pass
    assert mnt.is_dir()


def _group_writable(parent: Path) -> None:
    parent.mkdir()
    parent.chmod(0o775)


def _world_writable(parent: Path) -> None:
    parent.mkdir()
    parent.chmod(0o1777)


def _a_link(parent: Path) -> None:
    (parent.parent / "real").mkdir()
    parent.symlink_to("real")


def _nobodys(parent: Path) -> None:
    parent.mkdir()
    os.chown(parent, 65534, 65534)


@pytest.mark.parametrize(("unsafe", "said"), [
    (_group_writable, "may be written by others (mode 775)"),
    (_world_writable, "may be written by others (mode 1777)"),
    (_a_link, "is a symbolic link"),
    (_nobodys, "belongs to uid 65534, not root"),
    (lambda parent: None, "nor can its parent be used"),
], ids=["group-writable", "world-writable", "link", "not-roots", "missing"])
def test_a_mountpoint_is_made_only_in_a_parent_only_root_may_change(
        tmp_path: Path, unsafe: object, said: str) -> None:
    parent = tmp_path / "parent"
    unsafe(parent)  # type: ignore[operator]
    done = mokkafs("mount", "--profile", "t4", parent / "mnt")
    assert done.returncode == EXIT_MOUNTPOINT, done.stderr
    assert said in done.stderr and f"mkdir -p {parent / 'mnt'}" in done.stderr, done.stderr
    assert not os.path.lexists(parent / "mnt") and not (tmp_path / "real/mnt").exists()


def test_cleanup_removes_the_mountpoint_a_killed_daemon_made(tmp_path: Path) -> None:
    mnt = tmp_path / "run" / "mnt"
    mnt.parent.mkdir(mode=0o755)
    with daemon(mnt, ["--profile", "t4"], log=tmp_path / "daemon.log",
                make_mountpoint=False, cwd=REPO) as killed:
        killed.process.send_signal(signal.SIGKILL)
        killed.process.wait(timeout=30)
    assert mnt.exists()  # the dead mount still covers it
    done = mokkafs("cleanup", mnt)
    assert done.returncode == 0, done.stderr
    assert not is_mounted(mnt) and not mnt.exists(), done.stderr
