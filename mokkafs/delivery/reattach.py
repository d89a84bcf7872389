"""Restart survival: the shared parent containers hold, and re-attaching them to a new daemon.

The kernel cannot hand a dead FUSE connection to a new server, and a container's binds of
the old mount stay dead (ENOTCONN) forever. What can be done: the mountpoint's parent is a
shared mount that containers hold with slave propagation (``PROPAGATED``), so the new mount
appears there inside every container at once; then each container's dead binds of this
filesystem (found in /proc/<pid>/mountinfo by the fsname ``mokkafs@<mountpoint>``) are
replaced by binds of the same paths from that live copy, inside the container's mount
namespace, and what the runtime had mounted over them is made again (``_rebind``), as the
container's table shows it and as it was recorded at the container's start (the kernel may
have detached some of it already: ``mokkafs.delivery.records``). ``setns``
into a mount namespace needs a single-threaded process, hence the helper
``python -m mokkafs.delivery.reattach`` per namespace.

The shared parent containers hold is a tmpfs of the daemon's own (mokkafs.delivery.share).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mokkafs.delivery.records import Record, prune, recorded, records, rewrite
from mokkafs.host import linux
from mokkafs.host.mountinfo import FSTYPE, MountEntry, fsname, mounts_of

log = logging.getLogger(__name__)

PROPAGATED = "/run/mokkafs-host"  # where containers see the mountpoint's parent


def _other_namespaces(proc: Path = Path("/proc")) -> dict[int, int]:
    """{mount namespace inode: one pid in it}, for every namespace but our own."""
    own = os.stat(proc / "self/ns/mnt").st_ino
    found: dict[int, int] = {}
    for entry in sorted(os.scandir(proc), key=lambda e: e.name):
        if not entry.name.isdigit():
            continue
        try:
            ns = os.stat(f"{entry.path}/ns/mnt").st_ino
        except OSError:
            continue
        if ns != own:
            found.setdefault(ns, int(entry.name))
    return found


def _ours(mountpoint: Path, pid: int) -> list[MountEntry]:
    name = fsname(mountpoint)
    return [m for m in mounts_of(pid) if m.fstype == FSTYPE and m.source == name]


def holders(mountpoint: Path) -> list[int]:
    """One pid per other mount namespace that holds this filesystem where the CDI spec binds
    the shared parent (``PROPAGATED``): a container given the spec. A namespace that only
    copied the host's mounts when it was made (a service's private namespace, a container
    made meanwhile without the spec) holds it nowhere there, and keeps no share."""
    return [pid for pid in _other_namespaces().values()
            if any(m.point.startswith(PROPAGATED + "/") for m in _ours(mountpoint, pid))]


def plan(mountpoint: Path, live_dev: str) -> dict[int, list[tuple[str, str]]]:
    """{pid: [(source, target)]}: one process per mount namespace that holds dead binds of
    this filesystem, with the live path to bind over each dead one (paths as it sees them)."""
    work: dict[int, list[tuple[str, str]]] = {}
    for pid in _other_namespaces().values():
        mounts = _ours(mountpoint, pid)
        live = [m for m in mounts if m.dev == live_dev and m.root == "/"
                and m.point.startswith(PROPAGATED + "/")]
        dead = [m for m in mounts if m.dev != live_dev]
        if live and dead:
            work[pid] = [(live_source(live[0].point, m.root), m.point) for m in dead]
    return work


def live_source(live: str, dead_root: str) -> str:
    """The live path for a dead bind whose root in the dead filesystem is ``dead_root``. The
    kernel writes a root whose dentry it dropped (a walk that met the dead daemon) as
    ``/sys//deleted``: the path is still the one the bind was made of."""
    return live.rstrip("/") + dead_root.removesuffix("//deleted").rstrip("/")


def reattach(mountpoint: Path) -> int:
    """Re-bind every running container's dead binds; returns how many namespaces it fixed."""
    st = os.stat(mountpoint)
    live_dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    fixed = 0
    found = records()  # before the namespaces are listed: see ``prune``
    for pid, binds in plan(mountpoint, live_dev).items():
        result = subprocess.run([sys.executable, "-m", "mokkafs.delivery.reattach", str(pid),
                                 json.dumps(binds)], capture_output=True, text=True,
                                timeout=30, check=False)
        if result.returncode == 0:
            fixed += 1
            log.info("re-attached %d mount(s) in the mount namespace of pid %d", len(binds), pid)
            _record_again(pid)
        else:
            log.warning("could not re-attach pid %d: %s", pid, result.stderr.strip())
    prune(set(_other_namespaces()), found)
    return fixed


def _record_again(pid: int) -> None:
    """The container's record, of the mounts just made (the next re-attach finds those)."""
    try:
        record = recorded(os.stat(f"/proc/{pid}/ns/mnt").st_ino)
        if record is not None:
            rewrite(record, Path(f"/proc/{pid}/mountinfo").read_text())
    except OSError as exc:
        log.warning("could not record the mounts of pid %d again: %s", pid, exc)


@dataclass(frozen=True)
class _Again:
    """One mount the runtime made over a dead bind of the view, and how to make it again over
    the live one: a detached copy of the same filesystem, made from the daemon's namespace
    (``fd``), or a fresh tmpfs with its options (a mask's empty directory, the tmpfs that holds
    cgroup v1's mounts)."""

    point: str
    flags: int  # its per-mount flags (ro, nosuid, ...)
    fd: int | None = None
    tmpfs: str | None = None
    parent_fresh: bool = False  # mounted on a tmpfs made again: its mountpoint is made too


def _below(theirs: list[MountEntry], target: str) -> list[MountEntry]:
    """Every mount over the one at ``target`` (the topmost there), parents before children.
    Not in the table's order: a table lists mounts by when each was made, and a re-attach makes
    the copies of cgroup hierarchies (in the daemon's namespace) before the tmpfs they are
    moved onto, so the table lists them before their parent."""
    at = [m for m in theirs if m.point == target]
    if not at:
        return []
    depth = {at[-1].mount_id: 0}
    grew = True
    while grew:
        grew = False
        for m in theirs:
            if m.mount_id not in depth and m.parent_id in depth:
                depth[m.mount_id] = depth[m.parent_id] + 1
                grew = True
    index = {m.mount_id: i for i, m in enumerate(theirs)}
    return sorted((m for m in theirs if depth.get(m.mount_id, 0) > 0),
                  key=lambda m: (depth[m.mount_id], index[m.mount_id]))


def _runtime_mounts(theirs: list[MountEntry], record: Record | None,
                    target: str) -> list[MountEntry]:
    """What the runtime mounted over the dead bind at ``target``: as recorded, if the record
    is of this very bind (same mount id, device and root: ids are reused only once a mount
    is gone, and a dead bind stays until it is re-attached), then whatever the table shows
    that the record lacks (mounted since)."""
    now = _below(theirs, target)
    if record is None:
        return now
    at = [m for m in theirs if m.point == target]
    then = [m for m in record.mounts if m.point == target]
    if not at or not then or (then[-1].mount_id, then[-1].dev, then[-1].root) != (
            at[-1].mount_id, at[-1].dev, at[-1].root):
        return now
    before = _below(record.mounts, target)
    points = {m.point for m in before}
    return before + [m for m in now if m.point not in points]


def _again(m: MountEntry, ours: list[MountEntry], fresh: set[int]) -> _Again | str:
    """How to make ``m`` again, or why it cannot be. ``ours``: the daemon's mount table, where
    a mount of the same filesystem (a cgroup hierarchy) can be cloned from; ``fresh``: the
    ids of the mounts of ``m``'s tree that will be tmpfs made again. A tmpfs is always made
    fresh, and a filesystem is the same only with the same type and options too: ``m`` may
    be a record of a mount the kernel has detached since, whose device number a new
    filesystem (any tmpfs) may have been given."""
    flags = 0
    for option in m.options.split(","):
        flags |= linux.MOUNT_FLAGS.get(option, 0)
    parent_fresh = m.parent_id in fresh
    if m.fstype == "tmpfs":  # private to the container: an empty one is the same
        fresh.add(m.mount_id)
        options = ",".join(o for o in m.super_options.split(",") if o not in ("rw", "ro", ""))
        return _Again(m.point, flags, tmpfs=options, parent_fresh=parent_fresh)
    same = [h for h in ours if (h.dev, h.fstype, h.super_options) == (
        m.dev, m.fstype, m.super_options) and h.fstype != FSTYPE
            and (m.root == h.root or m.root.startswith(h.root.rstrip("/") + "/"))]
    if same:
        host = max(same, key=lambda h: len(h.root))
        path = host.point.rstrip("/") + m.root[len(host.root.rstrip("/")):]
        try:
            return _Again(m.point, flags, fd=linux.clone_tree(path or "/"),
                          parent_fresh=parent_fresh)
        except OSError as exc:
            return f"{m.point}: {exc}"
    return f"{m.point}: a {m.fstype} mount mokkafs cannot make again"


def _rebind(pid: int, binds: list[tuple[str, str]]) -> list[str]:
    """In the mount namespace of ``pid``: bind each live path over its dead bind, and make
    again what the runtime mounted over the dead one (masks over host paths, /sys/fs/cgroup),
    which goes when the dead bind is detached: its paths cannot be walked any more, so the
    same filesystems are cloned from the daemon's own namespace, or made fresh. Returns what
    could not be made again."""
    theirs, ours = mounts_of(pid), mounts_of()  # (in there, /proc is the container's)
    record = recorded(os.stat(f"/proc/{pid}/ns/mnt").st_ino)
    plans: list[tuple[str, str, list[_Again]]] = []
    lost: list[str] = []
    for source, target in binds:
        fresh: set[int] = set()
        again = []
        for m in _runtime_mounts(theirs, record, target):
            how = _again(m, ours, fresh)
            if isinstance(how, str):
                lost.append(how)
            else:
                again.append(how)
        plans.append((source, target, again))
    with open(f"/proc/{pid}/ns/mnt") as ns:
        linux.setns(ns.fileno(), linux.CLONE_NEWNS, f"the mount namespace of pid {pid}")
    for source, target, again in plans:
        linux.umount_lazily(target)
        linux.mount(source, target, None, linux.MS_BIND | linux.MS_REC)
        linux.mount(None, target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY
                    | linux.MS_NOSUID | linux.MS_NODEV)
        made = []
        for a in again:
            try:
                if a.parent_fresh and not os.path.lexists(a.point):
                    os.mkdir(a.point)
                if a.fd is not None:
                    linux.move_tree(a.fd, a.point)
                else:
                    linux.mount("tmpfs", a.point, "tmpfs", 0, a.tmpfs)
                made.append(a)
            except OSError as exc:
                lost.append(f"{a.point}: {exc}")
            finally:
                if a.fd is not None:
                    os.close(a.fd)
        for a in reversed(made):  # its own flags last: a read-only tmpfs holds mountpoints
            try:
                linux.mount(None, a.point, None, linux.MS_REMOUNT | linux.MS_BIND | a.flags)
            except OSError as exc:
                lost.append(f"{a.point}: {exc}")
    return lost


if __name__ == "__main__":
    try:
        lost = _rebind(int(sys.argv[1]), [(str(a), str(b)) for a, b in json.loads(sys.argv[2])])
    except OSError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    if lost:
        print(f"re-attached the view, but not the runtime's mounts over it: {'; '.join(lost)}",
              file=sys.stderr)
        sys.exit(1)
