"""Re-attach running containers to a restarted daemon.

The kernel cannot hand a dead FUSE connection to a new server, and a container's binds of
the old mount stay dead (ENOTCONN) forever. What can be done: the mountpoint's parent is a
shared mount that containers hold with slave propagation (``PROPAGATED``), so the new mount
appears there inside every container at once; then each container's dead binds of this
filesystem (found in /proc/<pid>/mountinfo by the fsname ``mokkafs@<mountpoint>``) are
replaced by binds of the same paths from that live copy, inside the container's mount
namespace. ``setns`` into a mount namespace needs a single-threaded process, hence the helper
``python -m mokkafs.repair`` per namespace.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mokkafs import linux

log = logging.getLogger(__name__)

PROPAGATED = "/run/mokkafs-host"  # where containers see the mountpoint's parent


def fsname(mountpoint: Path) -> str:
    return f"mokkafs@{os.path.abspath(mountpoint)}"


def share_parent(mountpoint: Path) -> Path:
    """Make the mountpoint's parent a shared mount (binding it onto itself if it is not a
    mount yet), so a new mount below it propagates into containers that hold it."""
    parent = Path(os.path.abspath(mountpoint)).parent
    # Not os.path.ismount: a directory bound onto itself keeps its device and inode, and only
    # the mount table knows it is a mount point.
    if not any(m.point == str(parent) for m in mounts_of(os.getpid())):
        linux.mount(str(parent), str(parent), None, linux.MS_BIND)
    linux.mount(None, str(parent), None, linux.MS_SHARED)
    return parent


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


@dataclass(frozen=True)
class MountEntry:
    dev: str
    root: str
    point: str
    fstype: str
    source: str


def mounts_of(pid: int) -> list[MountEntry]:
    entries = []
    try:
        lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 2:
            continue
        entries.append(MountEntry(fields[2], _unescape(fields[3]), _unescape(fields[4]),
                                  rest[0], _unescape(rest[1])))
    return entries


def plan(mountpoint: Path, live_dev: str) -> dict[int, list[tuple[str, str]]]:
    """{pid: [(source, target)]}: one process per mount namespace that holds dead binds of
    this filesystem, with the live path to bind over each dead one (paths as it sees them)."""
    name = fsname(mountpoint)
    own_ns = os.stat("/proc/self/ns/mnt").st_ino
    seen: set[int] = set()
    work: dict[int, list[tuple[str, str]]] = {}
    for entry in sorted(Path("/proc").iterdir(), key=lambda p: p.name):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            ns = os.stat(f"/proc/{pid}/ns/mnt").st_ino
        except OSError:
            continue
        if ns == own_ns or ns in seen:
            continue
        seen.add(ns)
        mounts = [m for m in mounts_of(pid) if m.fstype == "fuse.mokkafs" and m.source == name]
        live = [m for m in mounts if m.dev == live_dev and m.root == "/"
                and m.point.startswith(PROPAGATED + "/")]
        dead = [m for m in mounts if m.dev != live_dev]
        if live and dead:
            work[pid] = [(live[0].point.rstrip("/") + m.root.rstrip("/"), m.point) for m in dead]
    return work


def repair(mountpoint: Path) -> int:
    """Re-bind every running container's dead binds; returns how many namespaces it fixed."""
    st = os.stat(mountpoint)
    live_dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    fixed = 0
    for pid, binds in plan(mountpoint, live_dev).items():
        result = subprocess.run([sys.executable, "-m", "mokkafs.repair", str(pid),
                                 json.dumps(binds)], capture_output=True, text=True,
                                timeout=30, check=False)
        if result.returncode == 0:
            fixed += 1
            log.info("re-attached %d mount(s) in the mount namespace of pid %d", len(binds), pid)
        else:
            log.warning("could not re-attach pid %d: %s", pid, result.stderr.strip())
    return fixed


def _rebind(pid: int, binds: list[tuple[str, str]]) -> None:
    with open(f"/proc/{pid}/ns/mnt") as ns:
        linux.setns(ns.fileno(), linux.CLONE_NEWNS, f"the mount namespace of pid {pid}")
    for source, target in binds:
        linux.umount_lazily(target)
        linux.mount(source, target, None, linux.MS_BIND | linux.MS_REC)
        linux.mount(None, target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY
                    | linux.MS_NOSUID | linux.MS_NODEV)


if __name__ == "__main__":
    try:
        _rebind(int(sys.argv[1]), [(str(a), str(b)) for a, b in json.loads(sys.argv[2])])
    except OSError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
