"""The directory containers are given for restart survival: a read-only tmpfs of the
daemon's own, mounted over the mountpoint's parent, holding nothing but the mountpoint.

Containers hold the mountpoint's parent at ``PROPAGATED`` with slave propagation, so a
restarted daemon's new mount reaches them (mokkafs.delivery.reattach). What they are given is
not the parent directory itself (where root could write a file later, and every running
container would see it) but this tmpfs (``ParentShare``): the daemon makes it, makes the
mountpoint in it, remounts it read-only (nothing can be created in it any more, by anyone)
and marks it shared before mounting the view there. It is removed when the daemon stops,
unless running containers still hold it: they need it to be re-attached by the next
daemon, which adopts it (its mount id is on the daemon's record), and removes it in turn
once none does.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import TracebackType

from mokkafs.delivery.reattach import holders
from mokkafs.errors import CdiError
from mokkafs.host import linux
from mokkafs.host.mountinfo import MountEntry, mounted_at

FSTYPE = "tmpfs"
log = logging.getLogger(__name__)

_FLAGS = linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC


def source(mountpoint: Path) -> str:
    """The tmpfs's source field, naming what it holds."""
    return f"mokkafs-share@{os.path.abspath(mountpoint)}"


def _share(mountpoint: Path, mount_id: int) -> MountEntry | None:
    """The share of that mount id, if it is the top mount at the parent."""
    stack = mounted_at(Path(os.path.abspath(mountpoint)).parent)
    if stack and stack[-1].mount_id == mount_id and stack[-1].fstype == FSTYPE \
            and stack[-1].source == source(mountpoint):
        return stack[-1]
    return None


def require_share(mountpoint: Path) -> None:
    """Raise ``CdiError`` unless the mountpoint's parent is a daemon's share: a spec handing
    containers the bare directory would show them whatever is written there later."""
    stack = mounted_at(Path(os.path.abspath(mountpoint)).parent)
    if not stack or stack[-1].fstype != FSTYPE or stack[-1].source != source(mountpoint):
        raise CdiError(f"{Path(mountpoint).parent} is not the read-only share a daemon "
                       "started with --cdi-dir makes there, and a container given it would "
                       "see whatever is written there later; start the daemon with --cdi-dir")


class ParentShare:
    """Enter before mounting: the view must be mounted in it. ``adopt``: the mount id of the
    share a dead predecessor left (from its record)."""

    def __init__(self, mountpoint: Path, adopt: int | None = None) -> None:
        self.mountpoint = Path(os.path.abspath(mountpoint))
        self.parent = self.mountpoint.parent
        self.adopt = adopt
        self.mount_id: int | None = None  # the share we made or adopted, ours to remove
        self.released = False

    def __enter__(self) -> ParentShare:
        if self.adopt is not None and _share(self.mountpoint, self.adopt) is not None:
            self.mount_id = self.adopt
            return self
        parent = str(self.parent)
        mode = os.stat(parent).st_mode & 0o777
        node = os.stat(self.mountpoint).st_mode & 0o777
        linux.mount(source(self.mountpoint), parent, FSTYPE, _FLAGS,
                    f"mode={mode:o},size=4k,nr_inodes=4")
        self.mount_id = mounted_at(parent)[-1].mount_id
        try:
            os.mkdir(self.mountpoint, node)
            linux.mount(None, parent, None, linux.MS_REMOUNT | linux.MS_RDONLY | _FLAGS)
            linux.mount(None, parent, None, linux.MS_SHARED)
        except OSError:
            linux.umount_lazily(parent)
            self.mount_id = None
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.mount_id is not None:
            self.released = release_parent(self.mountpoint, self.mount_id)


def release_parent(mountpoint: Path, mount_id: int) -> bool:
    """Remove the share of that mount id unless running containers hold it; True when it was
    removed."""
    if _share(mountpoint, mount_id) is None:
        return False
    held = holders(mountpoint)
    if held:
        log.info("keeping %s shared: running containers hold it (pids %s) and will be "
                 "re-attached by the next daemon", Path(mountpoint).parent, held[:5])
        return False
    return linux.umount_lazily(str(Path(os.path.abspath(mountpoint)).parent))
