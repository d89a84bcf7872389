"""``--host-dev``: the NVIDIA driver's device nodes in the node's own ``/dev``, for the device
plugin, the DRA driver and validators that stat ``/dev/nvidia*`` outside containers.

The daemon makes them at every start (a reboot empties devtmpfs, and the daemon's record
with it: /run is a tmpfs), keeps them in step with each swap's view (a GPU removed takes its
node) and removes them at stop. It makes only what is missing and removes only what it made:

- a name that already exists (a real ``/dev/nvidia0``, a node another tool made) is left as
  it is, and the log says so;
- a node whose major the host's own ``/proc/devices`` registers (a real driver on this
  machine) is not made: a node the simulator made must never reach a real device;
- each node made is on the daemon's record (``mokkafs.serve.owned``) with its inode, before
  and after it exists, so cleanup after a crash removes exactly that node, and nothing that
  took its name since (a different inode or device number is left alone).

Opening such a node fails with ENXIO: no driver registered that major on this host.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mokkafs.errors import MountError

log = logging.getLogger(__name__)

DEV = Path("/dev")


@dataclass(frozen=True)
class Made:
    """A node (or directory, ``major`` -1) the daemon made: where, which device number, and
    which inode on which filesystem with its change time (None until it exists; a name
    removed and made again may get the same inode number, never the same change time)."""

    path: str
    major: int
    minor: int
    ino: tuple[int, int, int] | None = None  # (st_dev, st_ino, st_ctime_ns)

    @property
    def directory(self) -> bool:
        return self.major < 0


Record = Callable[[tuple[Made, ...]], None]


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


Node = tuple[str, int, int, int]  # /dev path, major, minor, mode


def _target(root: Path, path: str) -> str:
    return str(root / path.removeprefix("/dev/"))


def make(root: Path, nodes: Sequence[Node], host_majors: set[int], record: Record,
         keep: tuple[Made, ...] = ()) -> tuple[Made, ...]:
    """Make each missing ``(/dev path, major, minor, mode)`` below ``root``, telling ``record``
    what is about to exist and then what does (after ``keep``, made before). Returns what was
    made, ``keep`` first. Raises ``MountError`` naming the path when a node cannot be made
    (what was made stays on the record, for the caller's ``remove``)."""
    made: list[Made] = list(keep)
    wanted: list[tuple[Made, int]] = []
    dirs: list[Made] = []
    for path, major, minor, mode in nodes:
        target = _target(root, path)
        if major in host_majors:
            log.warning("--host-dev: not making %s: this host's own driver registers major %d",
                        target, major)
            continue
        if _lstat(target) is not None:
            log.warning("--host-dev: left %s as it is: this daemon did not make it", target)
            continue
        parent = os.path.dirname(target)
        if _lstat(parent) is None and all(d.path != parent for d in dirs):
            dirs.append(Made(parent, -1, 0))
        wanted.append((Made(target, major, minor), mode))
    pending = [*keep, *dirs, *(w for w, _ in wanted)]
    record(tuple(pending))
    try:
        for d in dirs:
            os.mkdir(d.path, 0o755)
            made.append(Made(d.path, -1, 0, _identity(os.lstat(d.path))))
        for want, mode in wanted:
            try:
                os.mknod(want.path, stat.S_IFCHR | mode, os.makedev(want.major, want.minor))
            except FileExistsError:
                log.warning("--host-dev: left %s as it is: it appeared as it was made", want.path)
                continue
            os.chmod(want.path, mode)  # (the umask applies to mknod)
            made.append(Made(want.path, want.major, want.minor,
                             _identity(os.lstat(want.path))))
    except OSError as exc:
        record(tuple(made))
        raise MountError(f"--host-dev: cannot make {exc.filename}: {exc.strerror} (the "
                         "device root must be a writable directory, root's)") from None
    record(tuple(made))
    if len(made) > len(keep):
        log.info("--host-dev: made %d nodes below %s", len(made) - len(keep), root)
    return tuple(made)


def sync(root: Path, made: tuple[Made, ...], nodes: Sequence[Node], host_majors: set[int],
         record: Record) -> tuple[Made, ...]:
    """After a swap: remove the nodes made that the new view no longer has (a GPU fewer),
    make those it newly has. Returns what is made now."""
    wanted = {(_target(root, p), major, minor) for p, major, minor, _ in nodes}
    stale = [m for m in made if not m.directory and (m.path, m.major, m.minor) not in wanted]
    have = {(m.path, m.major, m.minor) for m in made}
    missing = [n for n in nodes if (_target(root, n[0]), n[1], n[2]) not in have]
    if not stale and not missing:
        return made
    _, failed = remove(stale)
    keep = tuple(m for m in made if m not in stale) + failed
    record(keep)
    return make(root, missing, host_majors, record, keep)


def _ours(item: Made, st: os.stat_result) -> bool:
    if item.directory:
        same_kind = stat.S_ISDIR(st.st_mode)
    else:
        same_kind = stat.S_ISCHR(st.st_mode) \
            and st.st_rdev == os.makedev(item.major, item.minor)
    # (a directory's change time moves with what is made in it: its inode alone says)
    n = 2 if item.directory else 3
    return same_kind and (item.ino is None or item.ino[:n] == _identity(st)[:n])


def remove(items: Sequence[Made]) -> tuple[list[str], tuple[Made, ...]]:
    """Remove what the record names, each only while it is still what was made (a node with
    no inode recorded: a crash came between recording and making it; it is removed when it
    is a node of that number). Directories last, only when empty. Returns what was done, and
    what is left to try again (an error other than its absence)."""
    done: list[str] = []
    left: list[Made] = []
    for item in sorted(items, key=lambda m: m.directory):
        st = _lstat(item.path)
        if st is None:
            continue
        if not _ours(item, st):
            log.warning("--host-dev: left %s: it is no longer what this daemon made",
                        item.path)
            continue
        try:
            (os.rmdir if item.directory else os.unlink)(item.path)
        except OSError as exc:
            if exc.errno == errno.ENOTEMPTY:
                log.warning("--host-dev: left %s: it holds what this daemon did not make",
                            item.path)
                continue
            log.error("--host-dev: cannot remove %s: %s", item.path, exc.strerror)
            left.append(item)
            continue
        done.append(f"removed {item.path}")
    return done, tuple(left)
