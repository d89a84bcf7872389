"""keep-cache mode's open handles: per-open snapshots of what a reader sees.

Each open takes a snapshot of the content, so a reader sees one generation and one instant
from its first byte to its last. Static files are opened with ``keep_cache``. The page cache
is the file's, not a handle's, and a handle opened before a swap refills it with its old
bytes when it reads again. So an open of a file that another open handle holds other bytes
of reads around the page cache (``direct_io``), and one that only had such a handle since
the last open is answered without ``keep_cache``, which drops the file's pages there and then.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NewType

from mokkafs.fuse.view import Item

FileHandle = NewType("FileHandle", int)


@dataclass
class Handles:
    files: dict[FileHandle, tuple[int, bytes]] = field(default_factory=dict)  # -> inode, bytes
    hosts: dict[FileHandle, int] = field(default_factory=dict)  # -> host file descriptor
    dirs: dict[FileHandle, list[Item]] = field(default_factory=dict)  # -> listing
    _by_inode: dict[int, set[FileHandle]] = field(default_factory=dict)
    _stale: set[int] = field(default_factory=set)  # inodes whose pages may hold other bytes
    _next: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new(self) -> FileHandle:
        return FileHandle(next(self._next))

    def open_file(self, inode: int, content: bytes) -> tuple[FileHandle, bool, bool]:
        """A handle on ``content``; whether the kernel may keep the file's pages (no other
        handle holds, or held, other bytes); and whether its reads must bypass them (another
        open handle holds other bytes, and may put them there at its next read)."""
        fh = self.new()
        others = self._by_inode.setdefault(inode, set())
        apart = any(self.files[h][1] != content for h in others)
        stale = apart or inode in self._stale
        self._stale.discard(inode)
        self.files[fh] = (inode, content)
        others.add(fh)
        return fh, not stale, apart

    def close_file(self, fh: FileHandle, current: bytes | None) -> None:
        """Release ``fh``; ``current`` is the file's static content now (None: dynamic or
        gone)."""
        inode, content = self.files.pop(fh)
        others = self._by_inode[inode]
        others.discard(fh)
        if not others:
            del self._by_inode[inode]
        if current is not None and current != content:
            self._stale.add(inode)  # this handle may have cached bytes of an older tree
