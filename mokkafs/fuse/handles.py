"""keep-cache mode's open handles: per-open copies of what a reader sees.

Each open takes a copy of the content, so a reader sees one generation and one instant from
its first byte to its last. Every file is opened ``direct_io``: its reads reach the daemon and
are served from the handle's copy, whatever size the kernel holds. The page
cache is the file's, not a handle's, and the kernel bounds reads through it by the size it
last heard of; around a swap that size can be another generation's than the handle's bytes
(new bytes cut to the old length, or followed by NULs), so no read goes through it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import NewType

from mokkafs.fuse.view import Item
from mokkafs.tree.build import Tree

FileHandle = NewType("FileHandle", int)


@dataclass
class Handles:
    files: dict[FileHandle, bytes] = field(default_factory=dict)  # -> the per-open copy
    hosts: dict[FileHandle, int] = field(default_factory=dict)  # -> host file descriptor
    dirs: dict[FileHandle, tuple[Tree, list[Item]]] = field(default_factory=dict)  # -> listing
    _next: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new(self) -> FileHandle:
        return FileHandle(next(self._next))

    def open_file(self, content: bytes) -> FileHandle:
        """A handle on ``content``."""
        fh = self.new()
        self.files[fh] = content
        return fh
