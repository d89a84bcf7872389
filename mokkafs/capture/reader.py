"""The confined walk of a machine's /sys and /proc below a root directory, as the capture's
reader process runs it (``mokkafs.capture.guarded`` runs it there and bounds its time).

Every path is walked one component at a time with ``openat`` and ``O_NOFOLLOW``; a symbolic
link met on the way is resolved by its text, inside the root (one that climbs out of it, or
more than ``MAX_LINKS`` links in a row, is refused). Only regular files are opened, without
blocking (a FIFO or a device node where an attribute should be is never opened), and at most
``limit`` bytes are read (a page by default). What cannot be read is ``Unreadable`` with a
reason the caller counts in its notes (``mokkafs.capture.notes``).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

PAGE = 4096
MAX_LINKS = 40  # as the kernel's path walk allows (ELOOP beyond)
MAX_ENTRIES = 65536  # the most names one directory listing returns
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class Unreadable(Exception):
    """A path that was not read; ``reason`` is one of the kinds the notes count."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # "dir", "file", "link" or "other"


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]


class Walk:
    """A machine's file tree below the directory ``fd`` holds open (the caller's to close)."""

    def __init__(self, fd: int, limit: int = PAGE) -> None:
        self.fd = fd
        self.limit = limit

    def resolve(self, rel: str, follow_last: bool = True) -> list[str]:
        """The components of ``rel`` with every symbolic link resolved inside the root.
        Raises Unreadable."""
        todo = _split(rel)
        done: list[str] = []
        links = 0
        while todo:
            name = todo.pop(0)
            if name == "..":
                if not done:
                    raise Unreadable(rel, "a link out of the root")
                done.pop()
                continue
            parent = self._open_dir(done, rel)
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise Unreadable(rel, _reason(exc)) from None
            finally:
                os.close(parent)
            if stat.S_ISLNK(st.st_mode) and (todo or follow_last):
                links += 1
                if links > MAX_LINKS:
                    raise Unreadable(rel, "a symbolic link loop")
                target = self.readlink("/".join([*done, name]))
                if target.startswith("/"):
                    raise Unreadable(rel, "a link out of the root")
                todo = _split(target) + todo
                continue
            done.append(name)
        return done

    def _open_dir(self, parts: list[str], rel: str) -> int:
        fd = os.dup(self.fd)
        try:
            for part in parts:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            os.close(fd)
            raise Unreadable(rel, _reason(exc)) from None
        return fd

    def readlink(self, rel: str) -> str:
        parts = _split(rel)
        if not parts:
            raise Unreadable(rel, "not a link")
        parent = self._open_dir(self.resolve("/".join(parts[:-1])), rel)
        try:
            return os.readlink(parts[-1], dir_fd=parent)
        except OSError as exc:
            raise Unreadable(rel, _reason(exc)) from None
        finally:
            os.close(parent)

    def kind(self, rel: str) -> str:
        """"dir", "file", "link" (not followed), "other" or "absent"."""
        parts = _split(rel)
        try:
            parent = self._open_dir(self.resolve("/".join(parts[:-1])), rel)
        except Unreadable:
            return "absent"
        try:
            return _kind(os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            return "absent"
        finally:
            os.close(parent)

    def listdir(self, rel: str) -> list[Entry]:
        """The entries of a directory, sorted, each with its kind (links not followed)."""
        fd = self._open_dir(self.resolve(rel), rel)
        try:
            names = sorted(os.listdir(fd))[:MAX_ENTRIES]
            out = []
            for name in names:
                try:
                    mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                except OSError:
                    continue
                out.append(Entry(name, _kind(mode)))
            return out
        except OSError as exc:
            raise Unreadable(rel, _reason(exc)) from None
        finally:
            os.close(fd)

    def read(self, rel: str, limit: int | None = None) -> bytes:
        """At most ``limit`` bytes (default a page) of a regular file. Raises Unreadable:
        absent, not a regular file, larger than the limit, or not permitted."""
        limit = self.limit if limit is None else limit
        parts = self.resolve(rel)
        if not parts:
            raise Unreadable(rel, "not a regular file")
        parent = self._open_dir(parts[:-1], rel)
        try:
            st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise Unreadable(rel, "not a regular file (a FIFO, device or socket)")
            if st.st_size > limit and st.st_size != PAGE:  # sysfs attributes say a page
                raise Unreadable(rel, f"larger than {limit} bytes")
            fd = os.open(parts[-1], FILE_FLAGS, dir_fd=parent)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise Unreadable(rel, "not a regular file (a FIFO, device or socket)")
                data = b""
                while len(data) <= limit:
                    chunk = os.read(fd, limit + 1 - len(data))
                    if not chunk:
                        break
                    data += chunk
            finally:
                os.close(fd)
        except OSError as exc:
            raise Unreadable(rel, _reason(exc)) from None
        finally:
            os.close(parent)
        if len(data) > limit:
            raise Unreadable(rel, f"larger than {limit} bytes")
        return data


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "not permitted (it needs root)"
    if exc.errno == errno.ENOENT:
        return "absent"
    if exc.errno == errno.ELOOP:
        return "a symbolic link where a directory should be"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    return f"unreadable ({errno.errorcode.get(exc.errno or 0, exc.errno)})"
