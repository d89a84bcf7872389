"""A mountpoint the daemon makes itself, and removes again.

Only the last component of the path is made, mode 0755, and only in a parent that exists and
only root may change: owned by root, not writable by group or others, not a symbolic link
(there nobody else can put a link or a file at its name, before or after). It is removed at
stop only while it is still the directory made (the same device and inode, found without
following a link) and empty: the daemon touches only what it made.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mokkafs.errors import MountError
from mokkafs.host.nofollow import DIR_FLAGS

DirId = tuple[int, int]  # (st_dev, st_ino) of the directory made
MODE = 0o755


def _unsafe(st: os.stat_result) -> str | None:
    """Why a parent is no place to make a mountpoint in, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != 0:
        return f"belongs to uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"may be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make(path: Path) -> DirId:
    """Make the missing directory ``path``; its (device, inode). Raises ``MountError`` naming
    why not (a parent missing or unsafe), and then makes nothing."""
    parent, name = path.parent, path.name
    fix = f"create it first (mkdir -p {path})"
    if name in ("", ".", ".."):
        raise MountError(f"mountpoint {path} does not exist; {fix}")
    try:
        why = _unsafe(os.lstat(parent))
        fd = os.open(parent, DIR_FLAGS) if why is None else -1
    except OSError as exc:
        raise MountError(f"mountpoint {path} does not exist, nor can its parent be used "
                         f"({parent}: {exc.strerror}); {fix}") from None
    if why is not None:
        raise MountError(f"mountpoint {path} does not exist, and mokkafs makes one only in a "
                         f"directory only root may change: {parent} {why}; {fix}")
    try:
        why = _unsafe(os.fstat(fd))  # (what was opened, should the parent change meanwhile)
        if why is not None:
            raise MountError(f"mountpoint {path}: its parent {parent} changed while it was "
                             f"being made ({why}); {fix}")
        try:
            os.mkdir(name, 0o700, dir_fd=fd)  # 0755 once made: whatever the umask
            made = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise MountError(f"mountpoint {path} cannot be made: {exc.strerror}") from None
        try:
            os.fchmod(made, MODE)
            st = os.fstat(made)
        finally:
            os.close(made)
    finally:
        os.close(fd)
    return st.st_dev, st.st_ino


def remove(path: Path, made: DirId) -> str | None:
    """Remove the directory made at ``path`` while it still is that one: a line saying what
    was done or why it was left, None when nothing is there any more."""
    try:
        fd = os.open(path.parent, DIR_FLAGS)
    except OSError:
        return None
    try:
        try:
            st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if (st.st_dev, st.st_ino) != made:
            return f"left {path}: it is no longer the directory the daemon made"
        try:
            os.rmdir(path.name, dir_fd=fd)
        except OSError as exc:
            return f"left {path}, the mountpoint the daemon made: {exc.strerror}"
        return f"removed {path}, the mountpoint the daemon made"
    finally:
        os.close(fd)
