"""No-open mode: what the kernel was told, per inode, for content the tree does not fix.

In no-open mode the kernel caches what a READ returns for as long as the attributes it holds
stay valid, and drops it when a fresh GETATTR shows another size or mtime. For content that
changes on its own (IB counters, the host's sysfs) the size and mtime must therefore describe
exactly the bytes a later READ returns. A GETATTR (or LOOKUP) records the content as told
(``Told``) and reports its length and its mtime. The READ that follows serves that same
content. The mtime moves only when the bytes do, so an unchanged file keeps its pages.

Listings are built in worker threads, so the store takes a lock. What is told of the host's
content is held up to ``budget`` bytes (least recently used go first), so a walk over a whole
host sysfs cannot grow the daemon without bound. A READ whose record went reads the content
afresh. A later GETATTR with the same bytes then reports a new mtime, which costs the kernel
one more READ and nothing else. What is told of the tree's own dynamic files is ``pinned``:
refreshes (``mokkafs.fuse.refresh``) rely on it to know what the kernel holds, and its number
is bounded by the tree's.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

BUDGET = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Told:
    """Content whose length and mtime the kernel was given."""

    content: bytes
    mtime_ns: int


class ToldStore:
    def __init__(self, budget: int = BUDGET) -> None:
        self._last: OrderedDict[int, Told] = OrderedDict()
        self._pinned: dict[int, Told] = {}
        self.budget = budget
        self.size = 0  # bytes of content held
        self._lock = threading.Lock()

    def take(self, inode: int, content: bytes, pinned: bool = False) -> Told:
        """Record ``content`` as what ``inode`` holds now; its mtime moves if it changed."""
        with self._lock:
            return self._take(inode, content, pinned)

    def _take(self, inode: int, content: bytes, pinned: bool) -> Told:
        before = self.get(inode)
        if before is not None and before.content == content:
            if inode in self._last:
                self._last.move_to_end(inode)
            return before
        mtime = time.time_ns()
        if before is not None and mtime <= before.mtime_ns:
            mtime = before.mtime_ns + 1  # a change must never look like no change
        told = Told(content, mtime)
        self._drop(inode)
        if pinned:
            self._pinned[inode] = told
            return told
        self._last[inode] = told
        self.size += len(content)
        while self.size > self.budget and len(self._last) > 1:
            _, old = self._last.popitem(last=False)
            self.size -= len(old.content)
        return told

    def refresh(self, inode: int, content: bytes) -> Told:
        """Record ``content`` under the mtime last told: for content put into the kernel's
        page cache by the daemon itself, which the kernel must keep (a new mtime would make
        it drop the pages it was just given)."""
        with self._lock:
            before = self.get(inode)
            if before is None:
                return self._take(inode, content, pinned=True)
            told = Told(content, before.mtime_ns)
            if inode in self._pinned:
                self._pinned[inode] = told
                return told
            self._drop(inode)
            self._last[inode] = told
            self.size += len(content)
            return told

    def get(self, inode: int) -> Told | None:
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
