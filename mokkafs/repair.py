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

import ctypes
import ctypes.util
import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PROPAGATED = "/run/mokkafs-host"  # where containers see the mountpoint's parent
CLONE_NEWNS = 0x0002_0000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
MS_SHARED = 1 << 20
MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def fsname(mountpoint: Path) -> str:
    return f"mokkafs@{os.path.abspath(mountpoint)}"


def share_parent(mountpoint: Path) -> Path:
    """Make the mountpoint's parent a shared mount (binding it onto itself if it is not a
    mount yet), so a new mount below it propagates into containers that hold it."""
    parent = Path(os.path.abspath(mountpoint)).parent
    target = os.fsencode(parent)
    # Not os.path.ismount: a directory bound onto itself keeps its device and inode, and only
    # the mount table knows it is a mount point.
    if not any(m.point == str(parent) for m in mounts_of(os.getpid())):
        _check(_libc.mount(target, target, None, MS_BIND, None), f"bind {parent}")
    _check(_libc.mount(None, target, None, MS_SHARED, None), f"make {parent} shared")
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
        _check(_libc.setns(ns.fileno(), CLONE_NEWNS), f"setns into pid {pid}")
    for source, target in binds:
        src, dst = os.fsencode(source), os.fsencode(target)
        _libc.umount2(dst, MNT_DETACH)
        _check(_libc.mount(src, dst, None, MS_BIND | MS_REC, None), f"bind {source} {target}")
        _check(_libc.mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
                           | MS_NODEV, None), f"remount {target} read-only")


if __name__ == "__main__":
    try:
        _rebind(int(sys.argv[1]), [(str(a), str(b)) for a, b in json.loads(sys.argv[2])])
    except OSError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
