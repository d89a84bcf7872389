"""Faults at run time: the task that installs a new view at each fault's transition
(``FaultScheduler``; the faults applied through the control socket are in
``mokkafs.faults.book``).

The scheduler sleeps until the next transition (no polling, nothing runs while nothing
changes), builds the view of that instant shortly before it, and swaps it in at the time.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from mokkafs.errors import internal_error
from mokkafs.faults.schedule import next_change

if TYPE_CHECKING:
    from mokkafs.serve.swap import Swapper

log = logging.getLogger(__name__)

LEAD = 0.5  # seconds before a transition its view is built


@dataclass
class FaultScheduler:
    """Installs the view of each fault transition at its time."""

    swapper: Swapper
    clock: Callable[[], float]
    sleep_until: Callable[[float], Awaitable[None]]

    async def run(self) -> None:
        while True:
            changed = self.swapper.changed
            try:
                await self._next(changed)
            except Exception as exc:  # never the end of the daemon: wait for a new view
                log.exception("fault scheduling failed")
                self.swapper.status.failed(f"fault transitions stopped until the next change: "
                                           f"{internal_error('scheduling faults', exc)}")
                await changed.wait()

    async def _next(self, changed: trio.Event) -> None:
        # From the time the view shows, not the clock's: a transition the clock has already
        # passed (a slow build, a clock that jumps) is installed late, never skipped.
        version = self.swapper.version
        when = next_change(self.swapper.state.faults, self.swapper.shown_at)
        if when is None:
            await changed.wait()
            return
        if not await self._until(when - LEAD, changed):
            return
        prepared = await self.swapper.prepare(when)
        if prepared is None:  # cannot be built (logged and reported): only a new view can help
            await changed.wait()
            return
        if await self._until(when, changed) and \
                await self.swapper.transition(prepared, when, version) is None:
            # Not installed: another view came first (``changed`` is set, so this returns at
            # once), or it cannot be built, which trying again before a change would repeat.
            await changed.wait()

    async def _until(self, when: float, changed: trio.Event) -> bool:
        """Wait for the clock to reach ``when``; False if the view changed meanwhile."""
        if self.clock() >= when:
            return not changed.is_set()
        async with trio.open_nursery() as nursery:
            async def reached() -> None:
                await self.sleep_until(when)
                nursery.cancel_scope.cancel()

            async def interrupted() -> None:
                await changed.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(reached)
            nursery.start_soon(interrupted)
        return not changed.is_set()


async def real_sleep_until(clock: Callable[[], float], when: float) -> None:
    """Sleep until ``clock()`` (a time.monotonic() clock) reaches ``when``."""
    await trio.sleep(max(0.0, when - clock()))
