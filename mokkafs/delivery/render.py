"""Write a Tree to a directory as plain files: the same view, for hosts without FUSE and for
side-by-side benchmarks. There is no second renderer: the content comes from the same Tree,
walked as ``mokkafs tree`` walks it (``mokkafs.delivery.listing.below``).

``render`` touches only what it made. The whole tree is built in a fresh directory beside
``dest`` (mode 0700, so nobody else can plant anything in it), every file created there with
``O_EXCL | O_NOFOLLOW`` relative to its directory's descriptor, and then renamed into place
in one step: a reader sees the old view or the new one, never half of one. ``dest`` must not
exist yet, be empty, or be a directory ``render`` wrote before (it holds the ``MARKER``
file); then the two are exchanged atomically and the old tree is removed without following
a link or crossing into another mount. Anything else (a directory of someone else's, a
symbolic link, a mount below ``dest``) is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from mokkafs.delivery.listing import below
from mokkafs.errors import UsageError
from mokkafs.host import linux
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import CharDevice, Dir, File, Symlink

MARKER = ".mokkafs-render"  # what says a directory holds render's own output
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def render(tree: Tree, dest: Path, now: float) -> int:
    """Write ``tree`` as ``dest``. Dynamic files are rendered at ``now``. Returns the number
    of entries written. Raises ``UsageError`` when ``dest`` is not render's to replace."""
    dest = Path(os.path.abspath(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    parent = os.open(dest.parent, _DIR)
    try:
        before = _own_output(parent, dest)
        work = f".{dest.name}.mokkafs-{secrets.token_hex(6)}"
        os.mkdir(work, 0o700, dir_fd=parent)
        try:
            count = _build(tree, parent, work, now)
            _swap(parent, work, dest, before)
        finally:
            with contextlib.suppress(FileNotFoundError):
                _remove(parent, work, dest)
    finally:
        os.close(parent)
    return count


def _own_output(parent: int, dest: Path) -> tuple[int, int] | None:
    """None when ``dest`` does not exist; its (st_dev, st_ino) when it is empty or render's
    own earlier output, on the same mount as its parent, with no mount below it. Raises
    ``UsageError``."""
    try:
        st = os.stat(dest.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    fix = "give a path that does not exist yet (render creates it)"
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{dest} is a symbolic link; render never writes through one: {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{dest} exists and is not a directory: {fix}")
    fd = os.open(dest.name, _DIR, dir_fd=parent)
    try:
        try:
            marker = os.stat(MARKER, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            marker = None
        empty = not os.listdir(fd)  # nothing to lose (a fresh mktemp -d)
        if not empty and (marker is None or not stat.S_ISREG(marker.st_mode)
                          or marker.st_uid != os.geteuid()):
            raise UsageError(f"{dest} is not a directory mokkafs render wrote (it has no "
                             f"{MARKER} file); render replaces only its own output: {fix}")
        mount = linux.mount_id(parent)
        foreign = _foreign_mount(fd, mount, dest) if linux.mount_id(fd) == mount else dest
        if foreign is not None:
            raise UsageError(f"{foreign} is a mount point below {dest.parent}; render never "
                             f"crosses into another mount: unmount it, or {fix}")
    finally:
        os.close(fd)
    return st.st_dev, st.st_ino


def _foreign_mount(fd: int, mount: int, where: Path) -> Path | None:
    """The first directory below ``fd`` on another mount than ``mount``, if any."""
    for entry in os.scandir(fd):
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, _DIR, dir_fd=fd)
            try:
                if linux.mount_id(sub) != mount:
                    return where / entry.name
                found = _foreign_mount(sub, mount, where / entry.name)
            finally:
                os.close(sub)
            if found is not None:
                return found
    return None


def _build(tree: Tree, parent: int, work: str, now: float) -> int:
    """Write ``tree`` into the fresh directory ``work``, then the marker; returns the count."""
    top = os.open(work, _DIR, dir_fd=parent)
    opened = [("", top)]  # the directory chain down to the entry's parent (walk is depth first)
    count = 0
    try:
        for path, entry in below(tree):
            if not path:
                os.fchmod(top, entry.mode & 0o7777)
                continue
            up, _, name = path.rpartition("/")
            while opened[-1][0] != up:
                os.close(opened.pop()[1])
            at = opened[-1][1]
            node = entry.node
            if isinstance(node, Dir):
                os.mkdir(name, 0o700, dir_fd=at)
                sub = os.open(name, _DIR, dir_fd=at)
                opened.append((path, sub))
                os.fchmod(sub, node.mode)
            elif isinstance(node, Symlink):
                os.symlink(node.target, name, dir_fd=at)
            elif isinstance(node, CharDevice):
                try:
                    os.mknod(name, stat.S_IFCHR | 0o600, os.makedev(node.major, node.minor),
                             dir_fd=at)
                except PermissionError:  # not root: an empty stand-in keeps the name
                    os.close(os.open(name, _NEW, 0o600, dir_fd=at))
                os.chmod(name, node.mode, dir_fd=at, follow_symlinks=False)
            elif isinstance(node, File):
                _write(at, name, b"" if node.error else node.read(now), node.mode)
            count += 1
        _write(top, MARKER, b"written by mokkafs render; it replaces only directories "
               b"holding this file\n", 0o444)
    finally:
        for _, fd in opened:
            os.close(fd)
    return count


def _write(at: int, name: str, data: bytes, mode: int) -> None:
    fd = os.open(name, _NEW, 0o600, dir_fd=at)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _swap(parent: int, work: str, dest: Path, before: tuple[int, int] | None) -> None:
    """Put the built tree at ``dest``: a rename that never replaces, or an exchange with the
    tree checked by ``_own_output`` (undone if another took its place meanwhile)."""
    if before is None:
        try:
            linux.rename_at(parent, work, parent, dest.name, linux.RENAME_NOREPLACE)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
            raise UsageError(f"{dest} appeared while rendering; nothing was changed") from None
        return
    linux.rename_at(parent, work, parent, dest.name, linux.RENAME_EXCHANGE)
    st = os.stat(work, dir_fd=parent, follow_symlinks=False)
    if (st.st_dev, st.st_ino) != before:
        linux.rename_at(parent, work, parent, dest.name, linux.RENAME_EXCHANGE)
        raise UsageError(f"{dest} was replaced while rendering; nothing was changed")


def _remove(parent: int, name: str, dest: Path) -> None:
    """Remove the directory ``name`` (render's own: its build, or the tree it replaced),
    never following a link nor descending into another mount."""
    fd = os.open(name, _DIR, dir_fd=parent)
    try:
        _empty(fd, linux.mount_id(fd), dest.parent / name)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _empty(fd: int, mount: int, where: Path) -> None:
    for entry in os.scandir(fd):
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, _DIR, dir_fd=fd)
            try:
                if linux.mount_id(sub) != mount:
                    raise UsageError(f"{where / entry.name} became a mount point while "
                                     "rendering; it is left as it is")
                _empty(sub, mount, where / entry.name)
            finally:
                os.close(sub)
            os.rmdir(entry.name, dir_fd=fd)
        else:
            os.unlink(entry.name, dir_fd=fd)
