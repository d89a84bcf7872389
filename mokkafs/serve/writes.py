"""Writes at run time: a store through the mount (``mokkafs.fuse.writes``: a file's key and the
bytes written) becomes an entry of the swapper's ``WriteBook`` and a new view, installed before
the write returns; a refused one changes nothing, and answers its errno. The write also waits,
at most ``TOLD_WAIT`` seconds, for the kernel's caches to be told all but the written file's
pages (``mokkafs.serve.tell``, ``Telling.listed``), so a listing right after it shows what it
made, as on a real node. Those pages go after the answer: the writer holds them until then. Only
that bound is safe: a reader can hold the lock the telling needs while it waits for the written
page, which this write's answer releases. Each is logged, counted (``Status.writes``, the
metrics), listed with the faults (``mokkafs writes list``, /readyz), and all are cleared by one
command (``mokkafs writes clear``).
"""

from __future__ import annotations

import errno
import logging
import time
from typing import Any

import trio

from mokkafs.fuse.writes import Caller
from mokkafs.layers.writes import WRITES
from mokkafs.model.sysfs import StoreKey
from mokkafs.serve.swap import Swapper
from mokkafs.state import State
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.book import WriteBook
from mokkafs.writes.stores import text

log = logging.getLogger(__name__)

TOLD_WAIT = 0.1  # seconds a write's answer waits for the kernel to be told, at most


class Writer:
    """The mount's store (``mokkafs.fuse.writes.Store``): ``store`` one write. (Clearing them
    all is the writes layer's control request: ``mokkafs.layers.writes``.)"""

    def __init__(self, swapper: Swapper) -> None:
        self.swapper = swapper
        swapper.status.writes = self.report  # read when /readyz and /metrics are asked

    def report(self) -> dict[str, Any]:
        """The writes served, and how many were taken, refused (by errno) and dropped."""
        book = self.swapper.layers.writes
        return {"list": book.listing(), "taken": book.taken, "dropped": book.dropped,
                "refused": {errno.errorcode.get(c, str(c)): n for c, n in book.refused.items()}}

    async def store(self, key: StoreKey, data: bytes, caller: Caller) -> int:
        """0 once the view shows the write (and the kernel was told, or ``TOLD_WAIT``
        passed); else the errno it is refused with, and nothing changed."""
        try:
            await self._store(key, data, caller)
        except WriteRefused as exc:
            return exc.errno
        return 0

    async def _store(self, key: StoreKey, data: bytes, caller: Caller) -> None:
        wall = time.time()
        changed = False
        shown = text(data).strip()[:32]

        def change(book: WriteBook, served: State) -> bool:
            nonlocal changed
            changed = book.write(key, data, served, wall)
            return changed

        try:
            applied = await self.swapper.change(WRITES, change, reason="write")
        except WriteRefused as exc:
            self.swapper.layers.writes.refuse(exc.errno)
            log.info("write %s/%s=%r by pid %d refused (%s): %s", key.holder, key.name, shown,
                     caller.pid, errno.errorcode.get(exc.errno, exc.errno), exc.reason)
            raise
        if not changed:
            return  # the value it has: nothing to install
        if applied is None:
            raise WriteRefused(errno.EIO, "the new view could not be built")
        log.info("write %s/%s=%r by pid %d: generation %d serves it", key.holder, key.name,
                 shown, caller.pid, applied.generation)
        with trio.move_on_after(TOLD_WAIT) as waited:
            # Not the written file's own pages: this writer holds them until it is answered.
            await applied.telling.listed.wait()
        if waited.cancelled_caught:
            log.debug("write %s/%s: answered before the kernel was told (a reader holds what "
                      "the telling needs)", key.holder, key.name)
