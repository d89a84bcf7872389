"""The content the kernel was last told about, per inode, for content the tree does not fix.

In no-open mode the kernel caches what a READ returns for as long as the attributes it holds
stay valid, and drops it when a fresh GETATTR shows another size or mtime. For content that
changes on its own (IB counters, the host's sysfs) the size and mtime must therefore describe
exactly the bytes a later READ returns: a GETATTR (or LOOKUP) takes a snapshot, reports its
length and its mtime, and the READ that follows serves that same snapshot. The mtime moves
only when the bytes do, so an unchanged file keeps its pages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Snapshot:
    content: bytes
    mtime_ns: int


class Snapshots:
    def __init__(self) -> None:
        self._last: dict[int, Snapshot] = {}

    def take(self, inode: int, content: bytes) -> Snapshot:
        """Record ``content`` as what ``inode`` holds now; its mtime moves if it changed."""
        before = self._last.get(inode)
        if before is not None and before.content == content:
            return before
        mtime = time.time_ns()
        if before is not None and mtime <= before.mtime_ns:
            mtime = before.mtime_ns + 1  # a change must never look like no change
        snap = Snapshot(content, mtime)
        self._last[inode] = snap
        return snap

    def get(self, inode: int) -> Snapshot | None:
        return self._last.get(inode)

    def forget(self, inode: int) -> None:
        self._last.pop(inode, None)

    def __len__(self) -> int:
        return len(self._last)
