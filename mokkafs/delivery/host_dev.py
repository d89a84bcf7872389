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
  took its name since (a different inode or device number is left alone);
- no link below the device root is followed (``mokkafs.host.nofollow``): a node whose
  directory is a link, or a file, is not made, and one made there stays on the record
  (a warning says why) until its path reaches it again or it is gone;
- one node that cannot be made or removed is reported, and the rest go on.

Opening such a node fails with ENXIO: no driver registered that major on this host.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mokkafs.errors import MountError
from mokkafs.host import nofollow
from mokkafs.host.nofollow import UNREACHABLE, lstat_at, parent_of

log = logging.getLogger(__name__)

DEV = Path("/dev")


@dataclass(frozen=True)
class Made:
    """A node (or directory, ``major`` -1) the daemon made: where, which device number, and
    which inode on which filesystem with its change time (None until it exists; a name
    removed and made again may get the same inode number, never the same change time); and
    the device root it was made below, from which it is reached without a link."""

    path: str
    major: int
    minor: int
    ino: tuple[int, int, int] | None = None  # (st_dev, st_ino, st_ctime_ns)
    root: str = ""

    @property
    def directory(self) -> bool:
        return self.major < 0

    @property
    def top(self) -> str:
        """Where to reach it from (a record written before roots were kept: its directory)."""
        return self.root or os.path.dirname(self.path)


Record = Callable[[tuple[Made, ...]], None]
Node = tuple[str, int, int, int]  # /dev path, major, minor, mode


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _target(root: Path, path: str) -> str:
    return str(root / path.removeprefix("/dev/"))


def _plan(top: str, target: str) -> tuple[list[str], bool]:
    """The directories above ``target`` to make (outermost first), and whether ``target``
    exists. Raises ``OSError`` (ENOTDIR, ELOOP) where a link or a file is in the way."""
    try:
        with parent_of(top, target) as (fd, name):
            return [], lstat_at(fd, name) is not None
    except FileNotFoundError as exc:
        missing = [os.path.dirname(target)]
        while missing[0] != exc.filename and len(missing[0]) > len(top) + 1:
            missing.insert(0, os.path.dirname(missing[0]))
        return missing, False


def make(root: Path, nodes: Sequence[Node], host_majors: set[int], record: Record,
         keep: tuple[Made, ...] = ()) -> tuple[Made, ...]:
    """Make each missing ``(/dev path, major, minor, mode)`` below ``root``, telling ``record``
    what is about to exist and then what does (after ``keep``, made before; a path ``keep``
    has is not made again). Returns what was made, ``keep`` first. Each node that cannot be
    made is logged and the rest are made; then ``MountError`` names the first (what was made
    stays on the record, for the caller's ``remove``)."""
    top = str(root)
    try:
        os.close(nofollow.open_dir(top))
    except OSError as exc:
        raise MountError(f"--host-dev: cannot use {root}: {exc.strerror} (the device root must "
                         "be a directory, root's; a symbolic link is never followed)") from None
    kept = {m.path for m in keep}
    wanted: list[tuple[Made, int]] = []
    dirs: list[Made] = []
    for path, major, minor, mode in nodes:
        target = _target(root, path)
        if target in kept:
            continue
        if major in host_majors:
            log.warning("--host-dev: not making %s: this host's own driver registers major %d",
                        target, major)
            continue
        try:
            missing, exists = _plan(top, target)
        except OSError as exc:
            log.warning("--host-dev: not making %s: %s is no directory this daemon reaches "
                        "(%s; a symbolic link is never followed)", target, exc.filename,
                        exc.strerror)
            continue
        if exists:
            log.warning("--host-dev: left %s as it is: this daemon did not make it", target)
            continue
        dirs += [Made(d, -1, 0, root=top) for d in missing if all(m.path != d for m in dirs)]
        wanted.append((Made(target, major, minor, root=top), mode))
    record((*keep, *dirs, *(w for w, _ in wanted)))
    made, failed = list(keep), []
    for item, mode in [*((d, 0o755) for d in dirs), *wanted]:
        try:
            with parent_of(top, item.path) as (fd, name):
                if item.directory:
                    os.mkdir(name, mode, dir_fd=fd)
                else:
                    os.mknod(name, stat.S_IFCHR | mode, os.makedev(item.major, item.minor),
                             dir_fd=fd)
                try:  # (the umask applies to mknod)
                    if not item.directory:
                        os.chmod(name, mode, dir_fd=fd, follow_symlinks=False)
                finally:
                    made.append(replace(item, ino=_identity(os.stat(
                        name, dir_fd=fd, follow_symlinks=False))))
        except FileExistsError:
            log.warning("--host-dev: left %s as it is: it appeared as it was made", item.path)
        except (OSError, ValueError) as exc:  # (ValueError: chmod met a link)
            why = exc.strerror if isinstance(exc, OSError) else "it became a symbolic link"
            log.error("--host-dev: cannot make %s: %s", item.path, why)
            failed.append(f"{item.path}: {why}")
    record(tuple(made))
    if len(made) > len(keep):
        log.info("--host-dev: made %d nodes below %s", len(made) - len(keep), root)
    if failed:
        raise MountError(f"--host-dev: cannot make {failed[0]}" + (
            f" (and {len(failed) - 1} more)" if len(failed) > 1 else "")
            + " (the device root must be a writable directory, root's)")
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
    is a node of that number), reached from its root without a link. Directories last, only
    when empty. Returns what was done, and what is left to try again: an error other than
    its absence, a path a link or a file now blocks, and the directories above those."""
    done: list[str] = []
    left: list[Made] = []
    for item in sorted(items, key=lambda m: m.directory):
        if item.directory and any(m.path.startswith(item.path + "/") for m in left):
            left.append(item)
            continue
        try:
            with parent_of(item.top, item.path) as (fd, name):
                st = lstat_at(fd, name)
                if st is None:
                    continue
                if not _ours(item, st):
                    log.warning("--host-dev: left %s: it is no longer what this daemon made",
                                item.path)
                    continue
                if item.directory:
                    os.rmdir(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            continue  # a directory above it is gone, and it with it
        except OSError as exc:
            if exc.errno == errno.ENOTEMPTY:
                log.warning("--host-dev: left %s: it holds what this daemon did not make",
                            item.path)
                continue
            if exc.errno in UNREACHABLE:
                log.warning("--host-dev: left %s on the record: %s is no directory this daemon "
                            "reaches (%s; a symbolic link is never followed)", item.path,
                            exc.filename, exc.strerror)
            else:
                log.error("--host-dev: cannot remove %s: %s", item.path, exc.strerror)
            left.append(item)
            continue
        done.append(f"removed {item.path}")
    return done, tuple(left)
