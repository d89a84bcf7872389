"""The view's dev/ through a real mount: every character device on the major the mount's own
/proc/devices names, the same nodes the CDI spec is made of, and none of them can be opened."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from mokkafs.delivery.mounts import served_device_nodes
from mokkafs.surfaces.dev import char_devices
from tests.helpers.mounts import mokkafs_mount
from tests.helpers.nvidia_dev import driver_of, proc_majors
from tests.helpers.profiles import state_of


def walk_char_devices(root: Path) -> dict[str, os.stat_result]:
    found = {}
    for top, _, files in os.walk(root / "dev"):
        for name in files:
            path = Path(top) / name
            st = path.lstat()
            if stat.S_ISCHR(st.st_mode):
                found[str(path.relative_to(root))] = st
    return found


@pytest.mark.parametrize("profile", ["a100", "gb200"])
def test_dev_nodes_through_the_mount(tmp_path: Path, profile: str) -> None:
    state = state_of(profile)
    with mokkafs_mount(tmp_path / "mnt", ["--profile", profile]) as mount:
        majors = proc_majors((mount.path / "proc/devices").read_text())
        majors.setdefault("misc", 10)
        nodes = walk_char_devices(mount.path)
        assert {f"/{p}": (os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode))
                for p, st in nodes.items()} == {
            path: (major, minor, mode) for path, major, minor, mode in char_devices(state)}
        for path, st in nodes.items():
            assert os.major(st.st_rdev) == majors[driver_of(path)], path
        assert sorted(served_device_nodes(mount.path)) == sorted(char_devices(state))
        assert "dev/nvidia0" in nodes and "dev/nvidiactl" in nodes
        # The mount is nodev: the kernel refuses to open a device node on it (may_open),
        # before any driver (or none) is asked.
        for path in ("dev/nvidia0", "dev/nvidiactl", "dev/nvidia-uvm"):
            with pytest.raises(OSError) as caught:
                os.close(os.open(mount.path / path, os.O_RDWR))
            assert caught.value.errno == errno.EACCES, path
