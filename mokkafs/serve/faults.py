"""Faults at run time: the ones applied through the control socket (``FaultBook``), and the
task that installs a new view at each fault's transition (``FaultScheduler``).

The book keeps faults as written, and resolves them against every new profile State: a fault
whose target a profile swap removes ends, with a log line. Clearing a profile's own fault holds
it off until the profile changes that fault's definition.

The scheduler sleeps until the next transition (no polling, nothing runs while nothing
changes), builds the view of that instant shortly before it, and swaps it in at the time.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import trio

from mokkafs.errors import FaultError, UsageError, internal_error
from mokkafs.faults.schedule import next_change
from mokkafs.profile.faults import compile_faults
from mokkafs.profile.load import Problems
from mokkafs.profile.schema import Fault
from mokkafs.state import FaultSpec, State

if TYPE_CHECKING:
    from mokkafs.serve.swap import Swapper

log = logging.getLogger(__name__)

LEAD = 0.5  # seconds before a transition its view is built


@dataclass
class FaultBook:
    control: dict[str, Fault] = field(default_factory=dict)  # by name, in order applied
    held: dict[str, FaultSpec] = field(default_factory=dict)  # cleared profile faults
    # Applies of each name: applying a fault again (an ended one, to run the scenario again)
    # makes it a new one, whose timing starts then, even if nothing in it changed.
    applies: dict[str, int] = field(default_factory=dict)

    def copy(self) -> FaultBook:
        return copy.deepcopy(self)

    def apply(self, faults: list[Fault], profile: State, filename: str) -> None:
        """Add (or replace, by name) faults; raises ``FaultError`` naming every problem."""
        problems = Problems(filename, {})
        compile_faults(faults, profile, ("faults",), problems, "control")
        own = {f.name for f in profile.faults}
        for i, fault in enumerate(faults):
            if fault.name in own:
                problems.add(("faults", i, "name"), f"{fault.name} is a fault of the profile; "
                             "give this one a name of its own")
        if problems.items:
            raise FaultError(filename, problems.items)
        for fault in faults:
            self.control.pop(fault.name, None)
            self.control[fault.name] = fault
            self.applies[fault.name] = self.applies.get(fault.name, 0) + 1

    def clear(self, names: list[str], profile: State) -> None:
        """Clear faults by name (none: all of them); raises ``UsageError`` for a name that no
        fault has."""
        own = {f.name: f for f in profile.faults}
        unknown = [n for n in names if n not in self.control and n not in own]
        if unknown:
            known = ", ".join([*self.control, *own]) or "none"
            raise UsageError(f"no fault named {', '.join(unknown)} (the node's faults: "
                             f"{known}); nothing was cleared")
        for name in names or [*self.control, *own]:
            if name in self.control:
                del self.control[name]
            else:
                self.held[name] = own[name].definition()

    def merge(self, profile: State) -> State:
        """``profile`` with the faults applied at run time, and without those cleared."""
        own = [f for f in profile.faults
               if self.held.get(f.name) != f.definition()]
        self.held = {n: d for n, d in self.held.items()
                     if any(f.name == n and f.definition() == d for f in profile.faults)}
        names = {f.name for f in profile.faults}
        added: list[FaultSpec] = []
        for name, fault in list(self.control.items()):
            problems = Problems("the control socket", {})
            specs = compile_faults([fault], profile, ("faults",), problems, "control")
            if name in names or not specs:
                why = "the profile now has a fault of that name" if name in names else \
                    "; ".join(p.message for p in problems.items)
                log.warning("fault %s ends: %s", name, why)
                del self.control[name]
                continue
            added += [replace(spec, revision=self.applies.get(name, 1) - 1) for spec in specs]
        return replace(profile, faults=(*own, *added))


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
