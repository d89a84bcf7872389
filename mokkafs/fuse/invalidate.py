"""Tell the kernel what a swap changed, in one batch, from a worker thread.

Invalidation calls write to /dev/fuse and can block until the kernel finishes requests that only
the FUSE loop can answer (a lookup holding the parent's lock, a read holding a page lock). Issued
from the trio thread, that is a deadlock (seen 3 times in 30 tries); issued from a worker
thread, the loop stays free to answer. ``Invalidator.apply`` therefore refuses to run on the
thread that runs the loop. Nor may any answer wait for it: ``mokkafs.serve.tell`` sends each
swap's batch off the swap lock, and no request waits for it.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pyfuse3

from mokkafs.tree.diff import Invalidation

log = logging.getLogger(__name__)


class Kernel(Protocol):
    def invalidate_inode(self, inode: int, attr_only: bool) -> None: ...
    def invalidate_entry(self, parent: int, name: bytes, deleted: int) -> None: ...
    def store(self, inode: int, data: bytes) -> None: ...


class Pyfuse3Kernel:
    def invalidate_inode(self, inode: int, attr_only: bool) -> None:
        pyfuse3.invalidate_inode(inode, attr_only)

    def invalidate_entry(self, parent: int, name: bytes, deleted: int) -> None:
        pyfuse3.invalidate_entry(parent, name, deleted)

    def store(self, inode: int, data: bytes) -> None:
        pyfuse3.notify_store(inode, 0, data)


@dataclass
class Counts:
    sent: int = 0
    unknown: int = 0  # the kernel had never seen it (ENOENT): nothing to forget


class Invalidator:
    """Apply an ``Invalidation``. Construct it on the loop's thread; call ``apply`` through
    ``trio.to_thread.run_sync``."""

    def __init__(self, kernel: Kernel | None = None) -> None:
        self.kernel: Kernel = kernel or Pyfuse3Kernel()
        self.loop_thread = threading.get_ident()

    def apply(self, plan: Invalidation, listed: Callable[[], None] = lambda: None) -> Counts:
        """Tell the kernel ``plan``; ``listed`` is called once all but the writable files'
        pages are told: what a listing or a lookup shows is fresh from then on."""
        if threading.get_ident() == self.loop_thread:
            raise RuntimeError("kernel cache invalidation must not run on the FUSE loop's "
                               "thread (it can deadlock); use trio.to_thread.run_sync")
        counts = Counts()
        # More before less (mokkafs.tree.diff): what appears, then what changes, then what
        # goes, so a reader mid-swap sees no name a file it read names go missing.
        for parent, name in plan.added:
            self._send(counts, self.kernel.invalidate_entry, parent, name.encode(), 0)
        for inode in plan.changed_data:  # (directories that gain names first)
            self._send(counts, self.kernel.invalidate_inode, inode, False)
        for inode in (*plan.writable, *plan.changed_attrs):
            self._send(counts, self.kernel.invalidate_inode, inode, True)
        for inode in plan.shrunk:
            self._send(counts, self.kernel.invalidate_inode, inode, False)
        for parent, name, deleted in plan.removed:
            self._send(counts, self.kernel.invalidate_entry, parent, name.encode(), deleted)
        listed()
        for inode in plan.writable:  # pages a writer may hold until its WRITE is answered
            self._send(counts, self.kernel.invalidate_inode, inode, False)
        return counts

    def store(self, contents: list[tuple[int, bytes]], stale: list[int]) -> Counts:
        """Put fresh content into the kernel's page cache (where a store fails, the inode is
        dropped instead, so the kernel asks), and drop ``stale`` inodes. Worker thread only."""
        if threading.get_ident() == self.loop_thread:
            raise RuntimeError("kernel cache stores must not run on the FUSE loop's thread")
        counts = Counts()
        for inode, data in contents:
            try:
                self.kernel.store(inode, data)
                counts.sent += 1
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    counts.unknown += 1  # the kernel holds nothing of it
                else:
                    stale.append(inode)
        for inode in stale:
            self._send(counts, self.kernel.invalidate_inode, inode, False)
        return counts

    @staticmethod
    def _send(counts: Counts, call: object, *args: object) -> None:
        try:
            call(*args)  # type: ignore[operator]
            counts.sent += 1
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                log.warning("invalidation %s%s failed: %s", getattr(call, "__name__", call),
                            args, exc)
            counts.unknown += 1
