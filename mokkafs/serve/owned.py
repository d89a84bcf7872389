"""What a daemon made, on record, and the lock that says whether that daemon still lives.

Below ``--runtime-dir`` (root's alone: created 0700; refused when it is a link, belongs to
another user or may be written by others) each mountpoint has a directory of its own,
``mount-<hash of the mountpoint>``, holding:

- ``lock``: ``flock``ed for the daemon's whole life, so ``mokkafs cleanup`` and the next
  daemon tell a live daemon from a dead one without guessing (the kernel drops the lock when
  the process dies, however it dies);
- ``record.json`` (0600, replaced atomically): the mountpoint, the daemon's pid, the mount
  id of its FUSE mount, the mount id of the share over the parent it made or adopted, the
  CDI spec it wrote (its directory's identity and the SHA-256 of its content), the
  ``--host-dev`` nodes it made (each path with its device number, inode and device root), and
  the mountpoint's device and inode when the daemon made it (``mokkafs.host.made_dir``);
- ``scratch/``: where the daemon mounts sysfs instances for an instant.

``Owned.undo`` (cleanup, or the next daemon before it mounts) acts on a dead daemon's record
only, and on each thing only while it is still the very thing recorded: a mount by its id,
type and source in /proc/self/mountinfo, the spec by its directory and content, a node by
its device number and inode (``mokkafs.delivery.host_dev``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mokkafs.delivery import host_dev
from mokkafs.delivery.share import release_parent
from mokkafs.delivery.specdir import SpecDir, SpecRef
from mokkafs.errors import MountError
from mokkafs.host import linux, made_dir
from mokkafs.host.mountinfo import FSTYPE, fsname, mounted_at, mounts_of

log = logging.getLogger(__name__)

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
RECORD = "record.json"


@dataclass(frozen=True)
class Record:
    mountpoint: str
    pid: int = 0
    mount_id: int | None = None  # the FUSE mount (type FSTYPE, source fsname(mountpoint))
    share: int | None = None  # the tmpfs over the parent (mokkafs.delivery.share)
    spec: SpecRef | None = None
    host_dev: tuple[host_dev.Made, ...] = ()  # --host-dev: the nodes made in the host's /dev
    made_dir: made_dir.DirId | None = None  # the mountpoint, when the daemon made it

    @property
    def empty(self) -> bool:
        return self.mount_id is None and self.share is None and self.spec is None \
            and not self.host_dev and self.made_dir is None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Record:
        spec = data.get("spec")
        made = tuple(host_dev.Made(str(m["path"]), int(m["major"]), int(m["minor"]),
                                   None if m.get("ino") is None else
                                   (int(m["ino"][0]), int(m["ino"][1]), int(m["ino"][2])),
                                   str(m.get("root", "")))
                     for m in data.get("host_dev", ()))
        mine = data.get("made_dir")
        return cls(str(data["mountpoint"]), int(data.get("pid", 0)), data.get("mount_id"),
                   data.get("share"), None if spec is None else SpecRef(
                       str(spec["path"]), (int(spec["dir"][0]), int(spec["dir"][1])),
                       tuple(str(h) for h in spec["sha256"])), made,
                   None if mine is None else (int(mine[0]), int(mine[1])))


def _private(path: Path, fd: int) -> None:
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        what = (f"it belongs to uid {st.st_uid}" if st.st_uid != os.geteuid() else
                f"others may write it (mode {st.st_mode & 0o777:o})")
        raise MountError(f"--runtime-dir {path}: {what}; give the daemon a directory only "
                         "root can write (the default /run/mokkafs-runtime)")


def _open_private(path: Path) -> int:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, _DIR)
    except OSError as exc:
        raise MountError(f"--runtime-dir {path}: {exc.strerror} (a symbolic link is never "
                         "followed)") from None
    _private(path, fd)
    return fd


def _fuse_mounts(mountpoint: Path) -> list[int]:
    """The ids of mokkafs mounts of ``mountpoint`` there (by type and source), bottom first."""
    return [m.mount_id for m in mounted_at(os.path.abspath(mountpoint))
            if m.fstype == FSTYPE and m.source == fsname(mountpoint)]


def fuse_mount_id(mountpoint: Path) -> int | None:
    """The id of the (topmost) mokkafs mount at ``mountpoint``, as mountinfo shows it."""
    ours = _fuse_mounts(mountpoint)
    return ours[-1] if ours else None


class Owned:
    """One mountpoint's directory below the runtime directory, and its lock."""

    def __init__(self, runtime_dir: Path, mountpoint: Path) -> None:
        self.mountpoint = Path(os.path.abspath(mountpoint))
        name = "mount-" + hashlib.sha256(os.fsencode(self.mountpoint)).hexdigest()[:24]
        self.dir = Path(os.path.abspath(runtime_dir)) / name
        self.scratch = self.dir / "scratch"
        root = _open_private(self.dir.parent)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=root)
            self.fd = os.open(name, _DIR, dir_fd=root)
        finally:
            os.close(root)
        _private(self.dir, self.fd)
        self.lock = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                            0o600, dir_fd=self.fd)
        self.left: Record | None = None  # a dead daemon's record, as found
        self.record = Record(str(self.mountpoint), os.getpid())

    @classmethod
    def acquire(cls, runtime_dir: Path, mountpoint: Path) -> Owned:
        """Take the mountpoint's lock, or raise ``MountError`` naming the live daemon that
        holds it. ``left``: the record of a dead daemon, if it left one."""
        for _ in range(20):
            try:
                owned = cls(runtime_dir, mountpoint)
            except FileNotFoundError:  # its directory was being removed (``close``)
                continue
            try:
                fcntl.flock(owned.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                live = owned._load()
                owned._close_fds()
                pid = f" (pid {live.pid})" if live is not None else ""
                raise MountError(f"a live mokkafs daemon{pid} serves {owned.mountpoint}: it "
                                 f"holds {owned.dir}/lock; stop it first (nothing was "
                                 "changed)") from None
            if owned._current():
                owned.left = owned._load()
                return owned
            owned._close_fds()  # its holder removed it before letting go: take the new one
        raise MountError(f"the lock of {mountpoint} in {runtime_dir} keeps being replaced")

    def _current(self) -> bool:
        """Whether the lock taken is still the one at the lock's path."""
        try:
            here = os.stat("lock", dir_fd=self.fd, follow_symlinks=False)
            top = os.stat(self.dir, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return here.st_ino == os.fstat(self.lock).st_ino \
            and top.st_ino == os.fstat(self.fd).st_ino

    def _load(self) -> Record | None:
        try:
            fd = os.open(RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                return Record.parse(json.load(f))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("%s/%s cannot be read (%s); nothing it names is undone",
                        self.dir, RECORD, exc)
            return None

    def update(self, **changes: Any) -> None:
        """Change the record and write it at once (atomically, mode 0600)."""
        self.record = replace(self.record, **changes)
        data = json.dumps(asdict(self.record)).encode()
        tmp = f"{RECORD}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=self.fd)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=self.fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, RECORD, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def undo(self, *, release_share: bool) -> list[str]:
        """Undo what the dead daemon's record names (the share over its parent only with
        ``release_share``, and only when no container holds it). What remains (a share kept
        for the next daemon) stays on this record. Returns what was done."""
        done = self._undo_scratch()
        left = self.left
        if left is None:
            return done
        if left.spec is not None:
            held = SpecDir.reopen(left.spec)
            if held is None:
                log.warning("left %s: its directory is no longer the one the daemon wrote it "
                            "to", left.spec.path)
            else:
                try:
                    if held.remove_if(left.spec.sha256):
                        done.append(f"removed {left.spec.path}, a CDI spec left by a daemon "
                                    "that did not stop cleanly")
                finally:
                    held.close()
        if left.host_dev:
            self.update(host_dev=left.host_dev)  # on this record until each is gone
            removed, kept = host_dev.remove(left.host_dev)
            done += [f"{line}, a --host-dev node left by a daemon that did not stop cleanly"
                     for line in removed]
            self.update(host_dev=kept)
        if left.mount_id is not None and self._detach(left.mount_id):
            done.append(f"{self.mountpoint} holds a dead FUSE mount left by a daemon that "
                        "did not stop cleanly; detached it")
        share = left.share
        if share is not None:
            parent = self.mountpoint.parent
            if release_share and release_parent(self.mountpoint, share):
                done.append(f"removed the share over {parent}")
            if not any(m.mount_id == share for m in mounted_at(parent)):
                share = None
        self.update(share=share)
        if left.made_dir is not None:
            self.update(made_dir=left.made_dir)
            done += self.remove_made_dir()
        for line in done:
            log.warning("%s", line)
        return done

    def remove_made_dir(self) -> list[str]:
        """Remove the mountpoint the record says the daemon made, unless a share covers its
        parent (containers hold it: the next daemon or ``cleanup`` removes it once none
        does). Returns what was done."""
        made = self.record.made_dir
        if made is None or self.record.share is not None:
            return []
        line = made_dir.remove(self.mountpoint, made)
        self.update(made_dir=None)
        return [] if line is None else [line]

    def _detach(self, mount_id: int) -> bool:
        stack = mounted_at(self.mountpoint)
        if mount_id not in _fuse_mounts(self.mountpoint):
            return False
        if stack[-1].mount_id != mount_id:
            log.warning("left the dead mount at %s: something else is mounted over it",
                        self.mountpoint)
            return False
        return linux.umount_lazily(str(self.mountpoint))

    def _undo_scratch(self) -> list[str]:
        """Sysfs instances a killed daemon had mounted for an instant in its own scratch."""
        prefix = str(self.scratch) + "/"
        done = []
        for m in reversed(mounts_of()):
            if m.point.startswith(prefix) and m.fstype == "sysfs" \
                    and linux.umount_lazily(m.point):
                done.append(f"detached {m.point}, left mounted by a daemon that was killed")
        return done

    def close(self) -> None:
        """Drop the lock; and once the record names nothing, the whole directory (the lock
        file is unlinked while still held: see ``acquire``)."""
        if self.record.empty:
            for name, remove in ((RECORD, os.unlink), ("scratch", os.rmdir),
                                 ("lock", os.unlink)):
                with contextlib.suppress(OSError):
                    remove(name, dir_fd=self.fd)
            with contextlib.suppress(OSError):
                os.rmdir(self.dir)
        self._close_fds()

    def _close_fds(self) -> None:
        os.close(self.lock)  # releases the flock
        os.close(self.fd)
