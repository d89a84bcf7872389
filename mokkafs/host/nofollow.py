"""Paths below a directory, reached without following a symbolic link: the directory is opened
with ``O_NOFOLLOW``, each directory below it relative to the one before (``O_DIRECTORY |
O_NOFOLLOW``), and the last name is acted on relative to its parent's descriptor (``mknodat``,
``unlinkat``, ``fstatat`` with ``AT_SYMLINK_NOFOLLOW``). A link, or a file where a directory
was, anywhere from the top down, is refused (ELOOP, ENOTDIR), never followed."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
UNREACHABLE = (errno.ENOTDIR, errno.ELOOP)  # a file or a link where a directory was


def open_dir(path: str) -> int:
    """A descriptor of the directory ``path``; raises ``OSError`` when it is a link."""
    return os.open(path, DIR_FLAGS)


@contextmanager
def parent_of(top: str, path: str) -> Iterator[tuple[int, str]]:
    """The descriptor of the directory holding ``path`` (which lies below ``top``), reached
    from ``top`` without following a link, and ``path``'s last name. Raises ``OSError``
    whose ``filename`` is the component refused."""
    rel = os.path.relpath(path, top)
    if rel in (".", "..") or rel.startswith("../"):
        raise OSError(errno.EINVAL, f"not below {top}", path)
    *dirs, name = rel.split("/")
    try:
        fd = open_dir(top)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, top) from None
    try:
        here = top
        for part in dirs:
            here = os.path.join(here, part)
            try:
                below = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, here) from None
            os.close(fd)
            fd = below
        yield fd, name
    finally:
        os.close(fd)


def lstat_at(fd: int, name: str) -> os.stat_result | None:
    """``name`` in the directory ``fd``, the link itself if it is one; None if absent."""
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
