"""Tell the kernel what each install changed: in install order, one plan at a time, from a
worker thread of its own, and never under the swap lock.

Why off the lock and after the reply. An invalidation takes kernel locks: an entry's, its
directory's inode lock (``fuse_reverse_inval_entry``); a file's, its page locks. A reader can
hold a directory's lock while it waits for a page lock that only a FUSE reply releases: a
READDIRPLUS or LOOKUP whose reply brings a file's new mtime drops that file's pages, and a
writer in no-open mode holds them until its WRITE is answered. Were that answer to wait for
the invalidation (the write's own, or another install's holding the swap lock), nothing would
move again (seen in issue 37: a reader in ``fuse_readdir_uncached``, a writer in
``fuse_perform_write``, the daemon in ``fuse_reverse_inval_entry``). So no request's answer
waits here: an install hands its plan over and goes on; those that answer no request (a
profile load, a fault, ``mokkafs writes clear``) wait for ``told`` after releasing the lock.

The worker holds nothing a request's answer waits on, so each kernel lock it waits for is
released once the daemon has answered what it is answering. It has a thread limiter of its
own: it never takes a thread the FUSE loop's own work needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from mokkafs.fuse.invalidate import Counts, Invalidator
from mokkafs.serve.served import Installed, Telling
from mokkafs.tree.diff import Invalidation

log = logging.getLogger(__name__)

# (generation, what was sent, or the exception that ended the plan, seconds it took)
Report = Callable[[int, Counts | None, Exception | None, float], None]


class Teller:
    """Send plans to the kernel in the order ``send`` is called."""

    def __init__(self, invalidator: Invalidator, report: Report) -> None:
        self.invalidator = invalidator
        self.report = report
        self._limiter = trio.CapacityLimiter(1)
        self._last = trio.Event()
        self._last.set()

    def send(self, plan: Invalidation, generation: int,
             then: Callable[[], None] = lambda: None) -> Telling:
        """Queue ``plan``; ``then`` runs (on the loop's thread) and ``told`` is set once the
        kernel has heard all of it (or it failed, which ``report`` is told). Returns at once:
        call it under any lock."""
        previous, telling = self._last, Telling()
        self._last = telling.told
        trio.lowlevel.spawn_system_task(self._tell, plan, generation, then, previous, telling,
                                        name=f"tell generation {generation}")
        return telling

    async def settled(self) -> None:
        """Return once every plan sent so far has been told."""
        await self._last.wait()

    async def _tell(self, plan: Invalidation, generation: int, then: Callable[[], None],
                    previous: trio.Event, telling: Telling) -> None:
        def listed() -> None:  # in the teller's thread
            trio.from_thread.run_sync(telling.listed.set)

        try:
            await previous.wait()
            start = time.perf_counter()
            counts, failure = None, None
            try:
                counts = await trio.to_thread.run_sync(self.invalidator.apply, plan, listed,
                                                       limiter=self._limiter)
            except Exception as exc:
                failure = exc
            try:
                self.report(generation, counts, failure, time.perf_counter() - start)
                then()
            except Exception:  # a system task must not raise: it would end the daemon
                log.exception("reporting the invalidations of generation %d failed",
                              generation)
        finally:
            telling.listed.set()
            telling.told.set()


async def told(installed: Installed | None) -> Installed | None:
    """``installed`` once the kernel has heard what it changed."""
    if installed is not None:
        await installed.told.wait()
    return installed
