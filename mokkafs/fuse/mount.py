"""Mountpoint checks and stale-mount cleanup, before pyfuse3 mounts over it."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from pathlib import Path

from mokkafs.errors import MountError

log = logging.getLogger(__name__)


def lazy_unmount(mountpoint: Path) -> bool:
    """Detach whatever is mounted at ``mountpoint``; True when something was detached."""
    for cmd in (["fusermount3", "-u", "-z", str(mountpoint)], ["umount", "-l", str(mountpoint)]):
        if shutil.which(cmd[0]) is None:
            continue
        if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
            return True
    return False


def prepare_mountpoint(mountpoint: Path) -> None:
    """Make ``mountpoint`` ready to mount on, or raise ``MountError`` saying why it is not.

    A dead FUSE mount left by a killed daemon is detached first. It is found with statfs, which
    always reaches the FUSE server (ENOTCONN when it is gone), where a stat may be answered
    from the kernel's attribute cache and look alive.
    """
    try:
        os.statvfs(mountpoint)
    except FileNotFoundError:
        raise MountError(f"mountpoint {mountpoint} does not exist; create it first "
                         f"(mkdir -p {mountpoint})") from None
    except OSError as exc:
        if exc.errno != errno.ENOTCONN:
            raise MountError(f"mountpoint {mountpoint}: {exc.strerror}") from None
        log.warning("%s holds a dead FUSE mount (ENOTCONN); detaching it", mountpoint)
        if not lazy_unmount(mountpoint):
            raise MountError(f"{mountpoint} holds a dead FUSE mount that could not be "
                             f"detached; run: umount -l {mountpoint}") from None
    if not os.path.isdir(mountpoint):
        raise MountError(f"mountpoint {mountpoint} is not a directory")
    if os.path.ismount(mountpoint):
        raise MountError(f"{mountpoint} is already a mount point (busy); unmount it first "
                         f"or choose another directory")
