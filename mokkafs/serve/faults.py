"""Faults at run time: the task that installs a new view at each fault's transition
(``FaultScheduler``; the faults applied through the control socket are in
``mokkafs.faults.book``).

The scheduler sleeps until the next transition (no polling, nothing runs while nothing
changes), builds the view of that instant shortly before it, and swaps it in at the time. It
installs at most one view every ``MIN_GAP`` seconds, and one that wakes late installs the view
of now: transitions it missed are skipped, never replayed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import trio

from mokkafs.clock import Clock, SleepUntil
from mokkafs.errors import internal_error
from mokkafs.faults.schedule import next_change
from mokkafs.obs.status import Status
from mokkafs.state import State

log = logging.getLogger(__name__)

LEAD = 0.5  # seconds before a transition its view is built
MIN_GAP = 0.1  # seconds between two transitions at least: 10 views a second at most


Prepared = TypeVar("Prepared")  # a view built ahead of its time, as ``Views`` makes it


class Views(Protocol[Prepared]):
    """What the scheduler needs of the one that serves the view (``serve.swap.Swapper``):
    the State served and since when, the install count and an event for the next one, and
    building and installing the view of a time."""

    state: State  # with its faults
    shown_at: float  # the time the view shows
    version: int  # grows with every install
    changed: trio.Event  # set (and replaced) at every install
    status: Status

    async def prepare(self, when: float) -> Prepared | None: ...

    async def transition(self, prepared: Prepared | None, when: float,
                         version: int) -> object | None: ...


@dataclass
class FaultScheduler(Generic[Prepared]):
    """Installs the view of each fault transition at its time."""

    swapper: Views[Prepared]
    clock: Clock
    sleep_until: SleepUntil
    _last: float = -math.inf  # when the last transition installed took effect

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
        # From the time the view shows, not the clock's, and no sooner than ``MIN_GAP`` after
        # the last transition: faults cost what their effect costs, never what their schedule
        # asks (edges closer together than that are served as one view).
        version, faults = self.swapper.version, self.swapper.state.faults
        when = next_change(faults, self.swapper.shown_at)
        if when is None:
            await changed.wait()
            return
        when = max(when, self._last + MIN_GAP)
        if not await self._until(when - LEAD, changed):
            return
        prepared = await self.swapper.prepare(when)
        if prepared is None:  # cannot be built (logged and reported): only a new view can help
            await changed.wait()
            return
        if not await self._until(when, changed):
            return
        # Woken late (a slow build, a clock that jumps, a stopped process), past more edges
        # than this one: the view of now, once; the transitions between are never replayed.
        now = self.clock()
        passed = next_change(faults, when)
        if passed is not None and passed <= now:
            prepared, when = None, now
        if await self.swapper.transition(prepared, when, version) is None:
            # Not installed: another view came first (``changed`` is set, so this returns at
            # once), or it cannot be built, which trying again before a change would repeat.
            await changed.wait()
        else:
            self._last = when

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
