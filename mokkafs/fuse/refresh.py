"""Refreshes (no-open mode): dynamic files kept fresh in the kernel's page cache a unit at a
time, so a scrape of a port's counters costs one request per port, not a GETATTR and a READ
per file.

A unit is a directory whose subdirectories hold stepped files (an IB port, with
``counters/``, ``counters_ext/`` and, under faults, ``hw_counters/``; a PCI function, with
``power/``). What expires at their next step (the staleness quantum) is the entry of the
unit's trigger (``mokkafs.fuse.units``): the unit itself where it is marked so (``Dir.unit``,
an IB port: one request for all its directories), else each stepped directory (``power/``: so a
walk of a PCI function that does not enter it asks nothing). The first path walk through a
trigger after the step asks the daemon once (a LOOKUP). A round (one refresh of some units at
one step) then computes that step's content of every stepped file of the unit the kernel holds,
and puts it into the kernel's page cache (FUSE notify_store, from a worker thread) before the
LOOKUP is answered. Content that grew only needs the kernel to learn the size (one GETATTR);
content that shrank (never, for counters) is invalidated instead.

A reader that opens files relative to a directory below the trigger (a shell whose working
directory is ``counters/``, an ``openat`` descriptor) walks through no trigger. It is served
by the kernel's permission check instead (the mount has ``default_permissions``): to search
the directory that holds the file, the kernel needs that directory's attributes, and asks for
them (a GETATTR) once they are older than ``STEPPED_DIR_TIMEOUT``; that GETATTR brings the
unit up to the step (``catch_up``). Such a reader sees values at most that old, and a walker
pays one GETATTR per stepped directory per ``STEPPED_DIR_TIMEOUT``, not one per file. The
files' own attributes last ``FRESH_FILE_TIMEOUT``: what bounds a reader that holds a file open
and reads it again (each read checks them), at one GETATTR per file per that time.

Directories read together (a scrape walks every port within a second) are refreshed together
the next time: a round also takes the units that were last asked for after this one, as long
after it as is left of this step (and within ``COREAD`` seconds). A scrape of 64 ports thus
costs one worker-thread hop per step it spans, and computes each counter once; a scrape that
outlasts a step is not refreshed ahead for ports it will reach only in the next. A reader that
polls one port alone soon refreshes that port alone (a unit refreshed as a companion does not
count as asked for).

Units read in consecutive steps (a loop, dashboards polling faster than the quantum,
back-to-back scrapes) are hot: their trigger's entry is given ``HOT`` seconds instead of the
rest of the step, and ``run`` pushes each step's content into the kernel at the step's start,
so those readers ask nothing until the entry ends; then a reader still there makes the unit
hot again. A hot unit's values are at most a step plus the push's latency old (the push runs
when the step begins). Pushing ends with the entry, so the rounds run ahead of readers for at
most ``HOT`` seconds after the last of them, and a node nobody reads runs none: ``run`` waits
on an event, without a timer. Readers slower than a step never make a unit hot and cost what
they ask for.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import trio

from mokkafs.clock import SleepUntil
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.told import ToldStore
from mokkafs.fuse.units import Units, UnitsOf
from mokkafs.tree.build import Entry, Inode, Tree

log = logging.getLogger(__name__)

FRESH_FILE_TIMEOUT = 600.0  # attributes of a file refreshes keep fresh
STEPPED_DIR_TIMEOUT = 60.0  # attributes of a directory of such files
COREAD = 1.0  # seconds apart that units' last rounds were, to be refreshed together
HOT = 1.0  # seconds a unit read in consecutive steps is kept fresh ahead of its readers


class Refresher:
    """Puts each unit's fresh content into the kernel's page cache: when its trigger is looked
    up (``refresh``), when a stepped directory is asked for from below it (``catch_up``), and
    at each step for hot units (``run``)."""

    def __init__(self, told: ToldStore, kernel: Invalidator) -> None:
        self.told = told
        self.kernel = kernel
        self.units = UnitsOf()  # the caching units of each tree (``prepare`` makes them)
        self._done: dict[Inode, tuple[int, trio.Event]] = {}  # unit -> (step, finished)
        self._last: dict[Inode, float] = {}  # unit -> when it was last asked for
        # Held from computing a round's content until the kernel and ``told`` hold it, and by
        # a GETATTR of a file refreshes keep fresh: two rounds' stores (steps k and k+1, from
        # two threads) never cross, and nothing is told of them while the kernel is being
        # given other bytes.
        self.lock = trio.Lock()
        self.pushing = False  # whether ``run`` keeps hot units fresh (else none is hot)
        self._hot: dict[Inode, float] = {}  # unit -> when its trigger's entry ends
        self._woken = trio.Event()
        self.dir_timeout = STEPPED_DIR_TIMEOUT  # (a test may shorten it)

    def prepare(self, tree: Tree) -> Units:
        """Make ``tree``'s units, in the swap's worker thread, before the tree serves."""
        return self.units.prepare(tree)

    def is_trigger(self, tree: Tree, directory: Entry) -> bool:
        """Whether a directory's lookup refreshes its unit."""
        return directory.inode in self.units(tree).triggers

    def is_stepped(self, tree: Tree, directory: Entry) -> bool:
        """Whether a directory holds files refreshes keep fresh: its GETATTR (a walk from
        below the trigger, once its attributes expired) catches its unit up (``catch_up``)."""
        return directory.inode in self.units(tree).stepped

    def keeps_fresh(self, tree: Tree, file: Entry) -> bool:
        """Whether a dynamic file is kept fresh by its directory's refreshes."""
        return file.parent in self.units(tree).stepped

    async def refresh(self, tree: Tree, directory: Entry, now: float) -> float:
        """Everything the round of trigger ``directory``'s unit covers, as of ``now``'s step.
        Returns when the trigger's entry may last until: the step's end, or for a hot unit
        the end of the step ``HOT`` seconds on."""
        units = self.units(tree)
        unit = units.triggers[directory.inode]
        quantum = units.files[unit][0].node.quantum  # type: ignore[union-attr]
        step = math.floor(now / quantum)
        until = (step + 1) * quantum
        last = self._last.get(unit)
        self._last[unit] = now  # when it was asked for (a companion refreshed is not asked)
        if self.pushing and self._wanted(unit, last, now, quantum):
            until = (math.floor((now + HOT) / quantum) + 1) * quantum
            self._hot[unit] = until
            self._woken.set()
        while (done := self._done.get(unit)) is not None and done[0] == step:
            await done[1].wait()
            if self._done.get(unit) is done:  # it pushed (a failed round forgets it)
                return until
        due = [unit]
        if last is not None:  # and those asked for after it last time, as far as this step
            horizon = min(COREAD, (step + 1) * quantum - now)
            gone = [u for u in self._last if u not in tree.entries]  # swapped away
            for u in gone:
                del self._last[u]
                self._done.pop(u, None)
            due += [u for u, t in self._last.items() if u != unit
                    and 0 <= t - last < horizon and self._done.get(u, (None,))[0] != step]
        await self._round(tree, due, step, now)
        return until

    async def catch_up(self, tree: Tree, directory: Entry, now: float) -> None:
        """Bring the unit of stepped ``directory`` to ``now``'s step, if no round has yet: for a
        reader that reached the directory without walking through its trigger. Not an asking:
        it makes no unit hot and takes no companions along."""
        unit = directory.parent
        quantum = self.units(tree).files[unit][0].node.quantum  # type: ignore[union-attr]
        step = math.floor(now / quantum)
        while (done := self._done.get(unit)) is not None and done[0] == step:
            await done[1].wait()
            if self._done.get(unit) is done:
                return
        await self._round(tree, [unit], step, now)

    def _wanted(self, unit: Inode, last: float | None, now: float, quantum: float) -> bool:
        """Whether a unit is read about every step: asked for less than two quanta ago, or
        within a step of the end of its time as hot."""
        hot_until = self._hot.get(unit)
        return (last is not None and now - last < 2 * quantum) or (
            hot_until is not None and now < hot_until + quantum)

    async def _round(self, tree: Tree, units: list[Inode], step: int, now: float) -> None:
        finished = trio.Event()
        for u in units:
            self._done[u] = (step, finished)
        try:
            files = self.units(tree).files
            await self._push([f for u in units for f in files.get(u, ())], now)
        except BaseException:
            for u in units:  # not done: the next asking tries again
                if self._done.get(u, (None, None))[1] is finished:
                    del self._done[u]
            raise
        finally:
            finished.set()

    async def run(self, current: Callable[[], Tree], clock: Callable[[], float],
                  sleep_until: SleepUntil) -> None:
        """Keep hot units fresh: at the start of each step, one round for every hot unit whose
        entry lasts past it and whose step nobody's asking refreshed yet (at once, if a step
        passed while the last round ran). Waits on an event while nothing is hot. A round
        that fails is logged and tried again at the next step: the kernel holds those units'
        entries until they end, so the pusher must not give up on them."""
        self.pushing = True
        failing = False
        failed_step = None  # a step whose round failed: tried again at the next one
        try:
            while True:
                await trio.lowlevel.checkpoint()
                tree, now = current(), clock()
                quantum = self._prune(tree, now)
                if quantum is None:
                    self._woken = trio.Event()
                    await self._woken.wait()
                    continue
                step = math.floor(now / quantum)
                if step == failed_step or not self._due(tree, now, step):  # wait for the next
                    boundary = (step + 1) * quantum
                    if boundary <= now:  # floor() of a clock exactly on a boundary
                        boundary = (step + 2) * quantum
                    await sleep_until(boundary)
                    tree, now = current(), clock()
                    step = math.floor(now / quantum)
                due = self._due(tree, now, step)
                if not due:
                    continue
                try:
                    await self._round(tree, due, step, now)
                except Exception:
                    if not failing:
                        log.exception("pushing counters ahead of their readers failed; "
                                      "trying again at every step")
                    failing, failed_step = True, step
                else:
                    if failing:
                        log.warning("pushing counters ahead of their readers works again")
                    failing = False
        finally:
            self.pushing = False
            self._hot.clear()

    def _prune(self, tree: Tree, now: float) -> float | None:
        """Forget hot units a step after their entry ended (until then a reader still there
        makes them hot again) or that a swap removed; the quantum of those left, if any."""
        quantum = None
        units = self.units(tree).files
        for u, until in list(self._hot.items()):
            files = units.get(u)
            if files is None:
                del self._hot[u]
                continue
            q = files[0].node.quantum  # type: ignore[union-attr]
            if now >= until + q:
                del self._hot[u]
            else:
                quantum = q  # stepped files all have the State's counter quantum
        return quantum

    def _due(self, tree: Tree, now: float, step: int) -> list[Inode]:
        """Hot units whose entry lasts past ``now`` and whose ``step`` is not pushed yet."""
        files = self.units(tree).files
        return [u for u, until in self._hot.items() if now < until and u in files
                and self._done.get(u, (None,))[0] != step]

    async def _push(self, files: list[Entry], now: float) -> None:
        async with self.lock:
            contents: list[tuple[int, bytes]] = []
            stale: list[tuple[int, bytes]] = []
            for f in files:
                before = self.told.get(f.inode)
                if before is None:  # the kernel holds nothing of it
                    continue
                data = f.node.read(now)  # type: ignore[union-attr]
                if data == before.content:
                    continue
                if len(data) >= len(before.content):  # a store can grow a file, not shrink it
                    contents.append((f.inode, data))
                else:
                    stale.append((f.inode, data))
            if not contents and not stale:
                return
            await trio.to_thread.run_sync(self.kernel.store, contents,
                                          [inode for inode, _ in stale])
            # Only now: until the kernel held the new bytes, a READ had to get the old ones.
            for inode, data in contents:
                self.told.refresh(inode, data)
            for inode, data in stale:
                self.told.take(inode, data, pinned=True)
