"""The mount's life: mountpoint checks and stale-mount cleanup, the options, and pyfuse3's
session (init mounts, close unmounts)."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from types import TracebackType

import pyfuse3

from mokkafs.errors import MountError
from mokkafs.host import linux, made_dir
from mokkafs.host.mountinfo import FSTYPE, fsname, mounted_at

log = logging.getLogger(__name__)


def options(mountpoint: Path, writable: bool = False) -> set[str]:
    """Kernel-checked modes, visible to every uid. Read-only, unless ``writable``
    (``--writable``): then the kernel passes writes on, and mokkafs.fuse.writes takes them
    only where the view simulates a store. A writable mount costs no-open readers more
    requests (docs/writes.md), so it is asked for, not the default."""
    return set(pyfuse3.default_options) | {  # default_permissions
        f"fsname={fsname(mountpoint)}", f"subtype={FSTYPE.split('.')[1]}", "allow_other",
        *(() if writable else ("ro",))}


def refuse_link(mountpoint: Path) -> None:
    """Raise ``MountError`` when ``mountpoint`` is a symbolic link: the daemon mounts, and
    cleanup detaches, at the path it was given, never where a link points."""
    if os.path.islink(mountpoint):
        raise MountError(f"mountpoint {mountpoint} is a symbolic link; give the directory "
                         f"itself ({os.path.realpath(mountpoint)}, if that is the one)")


def prepare_mountpoint(mountpoint: Path, nonempty: bool = False) -> made_dir.DirId | None:
    """Make ``mountpoint`` ready to mount on, or raise ``MountError`` saying why it is not.
    A missing mountpoint is made where its parent is safe (``mokkafs.host.made_dir``); its
    identity is returned then, for the daemon to remove it at stop.

    A directory that holds files is refused unless ``nonempty``: the mount would hide them
    (libfuse 3 mounts over them without a word).

    A dead mokkafs mount of this mountpoint left by a killed daemon is detached first (a dead
    mount of any other filesystem is refused). It is found with statfs, which always reaches
    the FUSE server (ENOTCONN when it is gone), where a stat may be answered from the
    kernel's attribute cache and look alive.
    """
    refuse_link(mountpoint)
    made = None
    try:
        os.statvfs(mountpoint)
    except FileNotFoundError:
        made = made_dir.make(Path(os.path.abspath(mountpoint)))
        log.info("made the mountpoint %s (mode %o)", mountpoint, made_dir.MODE)
    except OSError as exc:
        if exc.errno != errno.ENOTCONN:
            raise MountError(f"mountpoint {mountpoint}: {exc.strerror}") from None
        stack = mounted_at(os.path.abspath(mountpoint))
        if not stack or stack[-1].fstype != FSTYPE or stack[-1].source != fsname(mountpoint):
            raise MountError(f"mountpoint {mountpoint} holds a dead mount mokkafs did not "
                             f"make ({stack[-1].fstype if stack else 'unknown'}); unmount it "
                             "first") from None
        log.warning("%s holds a dead FUSE mount (ENOTCONN); detaching it", mountpoint)
        if not linux.umount_lazily(str(mountpoint)):
            raise MountError(f"{mountpoint} holds a dead FUSE mount that could not be "
                             f"detached; run: umount -l {mountpoint}") from None
    if not os.path.isdir(mountpoint):
        raise MountError(f"mountpoint {mountpoint} is not a directory")
    if os.path.ismount(mountpoint) or mounted_at(os.path.abspath(mountpoint)):
        raise MountError(f"{mountpoint} is already a mount point (busy); unmount it first "
                         f"or choose another directory")
    if not nonempty:
        try:
            with os.scandir(mountpoint) as entries:
                first = next(entries, None)
        except OSError as exc:
            raise MountError(f"mountpoint {mountpoint}: {exc.strerror}") from None
        if first is not None:
            raise MountError(f"mountpoint {mountpoint} is not empty (it holds {first.name}): "
                             "the mount would hide its files; choose an empty directory, or "
                             "pass --nonempty to mount over them")
    return made


class Session:
    """pyfuse3's one session: entering mounts ``ops`` at ``mountpoint``, leaving unmounts
    (lazily, should pyfuse3's own unmount fail)."""

    def __init__(self, ops: pyfuse3.Operations, mountpoint: Path, writable: bool = False
                 ) -> None:
        self.ops = ops
        self.mountpoint = mountpoint
        self.writable = writable

    def __enter__(self) -> Session:
        try:
            pyfuse3.init(self.ops, str(self.mountpoint), options(self.mountpoint, self.writable))
        except RuntimeError as exc:  # pyfuse3 reports fuse_session_mount failing this way
            raise MountError(f"cannot mount at {self.mountpoint}: {exc} (is /dev/fuse there, "
                             "and is this root?)") from None
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            pyfuse3.close(unmount=True)
            log.info("unmounted %s", self.mountpoint)
        except Exception:
            log.exception("pyfuse3.close failed; detaching %s", self.mountpoint)
            linux.umount_lazily(str(self.mountpoint))
