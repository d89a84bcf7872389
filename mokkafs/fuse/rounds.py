"""Rounds (no-open mode): dynamic files kept fresh in the kernel's page cache a unit at a time,
so a scrape of a port's counters costs one request per port, not a GETATTR and a READ per file.

A unit is a directory whose subdirectories hold stepped files (an IB port, with
``counters/``, ``counters_ext/`` and, under faults, ``hw_counters/``; a PCI function, with
``power/``). Its files keep their attributes and pages for ``PUSHED_TIMEOUT``; what expires at
their next step (the staleness quantum) is the entry of the unit's trigger (``Tree.triggers``):
the unit itself where it is marked so (``Dir.unit``, an IB port: one request for all its
directories), else each stepped directory (``power/``: so a walk of a PCI function that does
not enter it asks nothing). The first path walk through a trigger after the step asks the
daemon once (a LOOKUP); the round then computes that step's content of every stepped file of
the unit the kernel holds, and puts it into the kernel's page cache (FUSE notify_store, from
a worker thread) before the LOOKUP is answered. Content that grew only needs the kernel to
learn the size (one GETATTR); content that shrank (never, for counters) is invalidated
instead. A reader that opens files relative to a directory below the trigger (a cwd, an
``openat`` descriptor) walks through no trigger: it sees new values when the attributes
expire (``PUSHED_TIMEOUT``), or when another walk runs the unit's round.

Directories read together (a scrape walks every port within a second) are refreshed together
the next time: a round also takes the units that were last asked for after this one, as long
after it as is left of this step (and within ``COREAD`` seconds). A scrape of 64 ports thus
costs one worker-thread hop per step it spans, and computes each counter once; a scrape that
outlasts a step is not refreshed ahead for ports it will reach only in the next. A reader that
polls one port alone soon refreshes that port alone (a unit refreshed as a companion does not
count as asked for).
"""

from __future__ import annotations

import math

import trio

from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.snapshots import Snapshots
from mokkafs.tree.build import Entry, Tree

PUSHED_TIMEOUT = 60.0  # attributes of a file its rounds keep fresh
COREAD = 1.0  # seconds apart that units' last rounds were, to be refreshed together


class Rounds:
    def __init__(self, snapshots: Snapshots, kernel: Invalidator) -> None:
        self.snapshots = snapshots
        self.kernel = kernel
        self._done: dict[int, tuple[int, trio.Event]] = {}  # unit -> (step, finished)
        self._last: dict[int, float] = {}  # unit -> when it was last asked for
        # Held from computing a round's content until the kernel and the snapshots hold it,
        # and by a GETATTR of a file rounds keep: two rounds' stores (steps k and k+1, from
        # two threads) never cross, and no snapshot is taken while the kernel is being given
        # other bytes.
        self.lock = trio.Lock()

    @staticmethod
    def keeps(tree: Tree, directory: Entry) -> bool:
        """Whether a directory is a trigger: its lookup runs its unit's round."""
        return directory.inode in tree.triggers

    @staticmethod
    def pushed(tree: Tree, file: Entry) -> bool:
        """Whether a dynamic file is kept fresh by its directory's rounds."""
        return file.parent in tree.stepped

    def _unit_files(self, tree: Tree, unit: int) -> list[Entry]:
        """The files of a unit: the dynamic files of its child directories."""
        entry = tree.get(unit)
        if entry is None:
            return []
        return [tree.entries[f] for _, ino in entry.children
                for f in tree.stepped.get(ino, ())]

    async def refresh(self, tree: Tree, directory: Entry, now: float) -> float:
        """Everything the round of trigger ``directory``'s unit covers, as of ``now``'s step.
        Returns when that step ends (what the trigger's entry may last until)."""
        unit = int(tree.triggers[directory.inode])
        quantum = self._unit_files(tree, unit)[0].node.quantum  # type: ignore[union-attr]
        step = math.floor(now / quantum)
        last = self._last.get(unit)
        self._last[unit] = now  # when it was asked for (a companion refreshed is not asked)
        done = self._done.get(unit)
        if done is not None and done[0] == step:
            await done[1].wait()
            return (step + 1) * quantum
        units = [unit]
        if last is not None:  # and those asked for after it last time, as far as this step
            horizon = min(COREAD, (step + 1) * quantum - now)
            gone = [u for u in self._last if u not in tree.entries]  # swapped away
            for u in gone:
                del self._last[u]
                self._done.pop(u, None)
            units += [u for u, t in self._last.items() if u != unit
                      and 0 <= t - last < horizon and self._done.get(u, (None,))[0] != step]
        finished = trio.Event()
        for u in units:
            self._done[u] = (step, finished)
        try:
            await self._push([f for u in units for f in self._unit_files(tree, u)], now)
        except BaseException:
            for u in units:  # not done: the next asking tries again
                if self._done.get(u, (None, None))[1] is finished:
                    del self._done[u]
            raise
        finally:
            finished.set()
        return (step + 1) * quantum

    async def _push(self, files: list[Entry], now: float) -> None:
        async with self.lock:
            contents: list[tuple[int, bytes]] = []
            stale: list[tuple[int, bytes]] = []
            for f in files:
                before = self.snapshots.get(f.inode)
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
                self.snapshots.refresh(inode, data)
            for inode, data in stale:
                self.snapshots.take(inode, data, pinned=True)
