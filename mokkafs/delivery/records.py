"""Containers' mount tables, recorded while their view is alive, for a restarted daemon.

While a daemon is dead, any path walk into a container's view (a libselinux constructor's
statfs of /sys/fs/selinux, in every ``exec``) fails the kernel's revalidation of the view's
dentries, and the kernel then detaches every mount on them (``d_invalidate``): the runtime's
``/sys/fs/cgroup`` and cgroup v1's hierarchies below it, a mask. What is gone from a mount
table cannot be read back from it, so the spec's poststart hook (``mokkafs-hook record``,
native/mokkafs_hook.c) copies each container's table, and its poststop hook removes it.

A record is ``RECORDS/<container id>``: a line ``mnt:<mount namespace inode>``, then the
container's ``/proc/<pid>/mountinfo`` (the hook writes it; ``rewrite`` writes the same after a
re-attach, whose new mounts the next re-attach must find).
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from mokkafs.host.mountinfo import MountEntry, parse

log = logging.getLogger(__name__)

RECORDS = Path("/run/mokkafs-containers")  # root's alone (0700), made by the hook


@dataclass(frozen=True)
class Record:
    path: Path
    ns: int  # the inode of the container's mount namespace
    mounts: list[MountEntry]


def _trusted(records: Path) -> bool:
    """Only a directory of root's that nobody else may write holds records to act on."""
    try:
        st = os.lstat(records)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        log.warning("ignoring the container records in %s: not a directory of root's that "
                    "only root may write", records)
        return False
    return True


def _read(path: Path) -> Record | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    head, _, table = text.partition("\n")
    if not head.startswith("mnt:") or not head[4:].isdigit():
        return None
    return Record(path, int(head[4:]), parse(table))


def records(where: Path = RECORDS) -> list[Record]:
    """Every record there (a temporary file of the hook's, named ``.<id>``, is none)."""
    if not _trusted(where):
        return []
    found = (_read(where / name) for name in sorted(os.listdir(where))
             if not name.startswith("."))
    return [r for r in found if r is not None]


def recorded(ns: int, where: Path = RECORDS) -> Record | None:
    """The record of the container whose mount namespace has inode ``ns``, if there is one."""
    return next((r for r in records(where) if r.ns == ns), None)


def rewrite(record: Record, table: str) -> None:
    """Replace ``record``'s mount table with ``table`` (whole or not at all)."""
    tmp = record.path.with_name("." + record.path.name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"mnt:{record.ns}\n{table}")
    os.replace(tmp, record.path)


def prune(alive: set[int], found: list[Record]) -> None:
    """Remove the records in ``found`` (listed before ``alive`` was taken, so a container
    recorded meanwhile is never among them) whose namespace is gone: a container that ended
    while no poststop hook ran (a crash of the runtime, a reboot of /run's contents aside)."""
    for record in found:
        if record.ns not in alive:
            record.path.unlink(missing_ok=True)
