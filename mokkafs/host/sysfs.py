"""sysfs instances of the daemon's own, reached through a file descriptor.

The view passes the host's sysfs through beneath the simulated nodes. It never reads the host's
``/sys`` itself: other filesystems are mounted beneath it (tracefs, debugfs, securityfs, bpf,
cgroup, configfs, fusectl), where a read can block forever (``kernel/tracing/trace_pipe``),
consume events, or show what a container must not see. Instead the daemon mounts a sysfs
instance of its own, keeps a descriptor of its root and detaches it at once: a fresh sysfs has
no submounts (their mount points are the empty directories a container's own /sys shows), it is
in no mount table, and it lives exactly as long as the descriptor, so a killed daemon leaves
nothing mounted. Every path is resolved below that descriptor; sysfs's own links are relative,
and ``..`` at the root of a detached mount stays there.

A sysfs instance shows the network devices of the network namespace it was mounted from:
``mount_detached`` can mount one from inside another namespace (see ``mokkafs.host.netns``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
from pathlib import Path

from mokkafs.host import linux

# sysfs reports 4096 for every text attribute whatever its length; its binary attributes report
# their real size. A text attribute holds at most a page.
TEXT_ATTRIBUTE_SIZE = 4096
MOUNT_FLAGS = linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC


def is_private(st: os.stat_result) -> bool:
    """A text attribute that not every user may read. Its length is shown as sysfs shows it
    (4096), never learned from its content: the kernel caches one size per inode whoever
    asked, and the daemon, being root, would read it for any caller's stat."""
    return stat.S_ISREG(st.st_mode) and st.st_size == TEXT_ATTRIBUTE_SIZE \
        and not st.st_mode & stat.S_IROTH


class Sysfs:
    """One sysfs instance. ``rel`` paths are relative to its root ("" is the root). Methods
    raise OSError as os does; they do blocking I/O, so call them from a worker thread."""

    def __init__(self, fd: int, name: str) -> None:
        self.fd = fd
        self.name = name

    @classmethod
    def mount_detached(cls, scratch: Path, netns_fd: int | None = None,
                       name: str = "sysfs") -> Sysfs:
        """A new instance: of the network namespace ``netns_fd`` when given, else of the
        caller's. ``scratch`` is a directory (on a filesystem the daemon owns) where it is
        mounted for an instant."""
        scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        where = tempfile.mkdtemp(dir=scratch, prefix="sysfs-")
        result: list[int] = []
        errors: list[BaseException] = []

        def work() -> None:  # setns moves only this thread; a fresh one leaves nothing behind
            try:
                with contextlib.ExitStack() as stack:
                    if netns_fd is not None:
                        ours = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                        stack.callback(os.close, ours)
                        linux.setns(netns_fd, linux.CLONE_NEWNET, name)
                        stack.callback(linux.setns, ours, linux.CLONE_NEWNET, "our own netns")
                    linux.mount("sysfs", where, "sysfs", MOUNT_FLAGS)
                    stack.callback(linux.umount_lazily, where)  # detached; the fd keeps it
                    result.append(os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            except BaseException as exc:  # reported in the calling thread
                errors.append(exc)

        try:
            thread = threading.Thread(target=work, name=f"mount-{name}")
            thread.start()
            thread.join()
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(where)
        if errors:
            raise errors[0]
        return cls(result[0], name)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @staticmethod
    def _path(rel: str) -> str:
        return rel or "."

    def lstat(self, rel: str) -> os.stat_result:
        return os.lstat(self._path(rel), dir_fd=self.fd)

    def readlink(self, rel: str) -> str:
        return os.readlink(self._path(rel), dir_fd=self.fd)

    def listdir(self, rel: str) -> list[str]:
        fd = os.open(self._path(rel), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC,
                     dir_fd=self.fd)
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def open(self, rel: str) -> int:
        """A descriptor of the file at ``rel`` for reading (the caller closes it)."""
        return os.open(self._path(rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                       dir_fd=self.fd)

    def read(self, rel: str, size: int, offset: int) -> bytes:
        fd = self.open(rel)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def text_attribute(self, rel: str, st: os.stat_result) -> bytes | None:
        """A text attribute's content, to learn its real length; None for anything else
        (binary attributes already report their size; directories and links have no content
        to read), for a private one (``is_private``: never read on a stat's behalf), or when
        it cannot be read."""
        if not stat.S_ISREG(st.st_mode) or st.st_size != TEXT_ATTRIBUTE_SIZE \
                or is_private(st):
            return None
        try:
            return self.read(rel, TEXT_ATTRIBUTE_SIZE, 0)
        except OSError:
            return None
