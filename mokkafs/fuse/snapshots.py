"""The content the kernel was last told about, per inode, for content the tree does not fix.

In no-open mode the kernel caches what a READ returns for as long as the attributes it holds
stay valid, and drops it when a fresh GETATTR shows another size or mtime. For content that
changes on its own (IB counters, the host's sysfs) the size and mtime must therefore describe
exactly the bytes a later READ returns: a GETATTR (or LOOKUP) takes a snapshot, reports its
length and its mtime, and the READ that follows serves that same snapshot. The mtime moves
only when the bytes do, so an unchanged file keeps its pages.

Listings are built in worker threads, so the store takes a lock. Snapshots of the host's
content are held up to ``budget`` bytes (least recently used go first), so a walk over a whole
host sysfs cannot grow the daemon without bound; a READ whose snapshot went reads the content
afresh, and a later GETATTR with the same bytes reports a new mtime, which costs the kernel one
more READ and nothing else. Snapshots of the tree's own dynamic files are ``pinned``: rounds
rely on them to know what the kernel holds, and their number is bounded by the tree's.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

BUDGET = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Snapshot:
    content: bytes
    mtime_ns: int


class Snapshots:
    def __init__(self, budget: int = BUDGET) -> None:
        self._last: OrderedDict[int, Snapshot] = OrderedDict()
        self._pinned: dict[int, Snapshot] = {}
        self.budget = budget
        self.size = 0  # bytes of content held
        self._lock = threading.Lock()

    def take(self, inode: int, content: bytes, pinned: bool = False) -> Snapshot:
        """Record ``content`` as what ``inode`` holds now; its mtime moves if it changed."""
        with self._lock:
            return self._take(inode, content, pinned)

    def _take(self, inode: int, content: bytes, pinned: bool) -> Snapshot:
        before = self.get(inode)
        if before is not None and before.content == content:
            if inode in self._last:
                self._last.move_to_end(inode)
            return before
        mtime = time.time_ns()
        if before is not None and mtime <= before.mtime_ns:
            mtime = before.mtime_ns + 1  # a change must never look like no change
        snap = Snapshot(content, mtime)
        self._drop(inode)
        if pinned:
            self._pinned[inode] = snap
            return snap
        self._last[inode] = snap
        self.size += len(content)
        while self.size > self.budget and len(self._last) > 1:
            _, old = self._last.popitem(last=False)
            self.size -= len(old.content)
        return snap

    def refresh(self, inode: int, content: bytes) -> Snapshot:
        """Record ``content`` under the snapshot's mtime: for content put into the kernel's
        page cache by the daemon itself, which the kernel must keep (a new mtime would make
        it drop the pages it was just given)."""
        with self._lock:
            before = self.get(inode)
            if before is None:
                return self._take(inode, content, pinned=True)
            snap = Snapshot(content, before.mtime_ns)
            if inode in self._pinned:
                self._pinned[inode] = snap
                return snap
            self._drop(inode)
            self._last[inode] = snap
            self.size += len(content)
            return snap

    def get(self, inode: int) -> Snapshot | None:
        return self._pinned.get(inode) or self._last.get(inode)

    def forget(self, inode: int) -> None:
        with self._lock:
            self._drop(inode)

    def _drop(self, inode: int) -> None:
        self._pinned.pop(inode, None)
        old = self._last.pop(inode, None)
        if old is not None:
            self.size -= len(old.content)

    def __len__(self) -> int:
        return len(self._last) + len(self._pinned)
