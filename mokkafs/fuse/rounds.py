"""Rounds (no-open mode): dynamic files kept fresh in the kernel's page cache a directory at a
time, so a scrape of a port's counters costs one request per directory, not a GETATTR and a
READ per file.

A directory of dynamic files (a port's ``counters/``) has an entry that expires at its files'
next step (the staleness quantum), and its files keep their attributes and pages for
``PUSHED_TIMEOUT``. The first path walk to one of them after the step asks the daemon once (a
LOOKUP of the directory); the round then computes that step's content of every such file the
kernel holds, in this directory and its sibling directories (``counters_ext/``,
``hw_counters/``), and puts it into the kernel's page cache (FUSE notify_store, from a worker
thread) before the LOOKUP is answered. Content that grew only needs the kernel to learn the
size (one GETATTR); content that shrank (never, for counters) is invalidated instead.

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
from mokkafs.tree.nodes import File

PUSHED_TIMEOUT = 60.0  # attributes of a file its rounds keep fresh
COREAD = 1.0  # seconds apart that units' last rounds were, to be refreshed together


class Rounds:
    def __init__(self, snapshots: Snapshots, kernel: Invalidator) -> None:
        self.snapshots = snapshots
        self.kernel = kernel
        self._done: dict[int, tuple[int, trio.Event]] = {}  # unit -> (step, finished)
        self._last: dict[int, float] = {}  # unit -> when its last round ran

    def files_of(self, tree: Tree, directory: Entry) -> list[Entry]:
        """A directory's dynamic files, if rounds can keep them (all stepped), else []."""
        if directory.inode not in tree.dynamic_parents:
            return []
        files = [tree.entries[ino] for _, ino in directory.children]
        files = [f for f in files if isinstance(f.node, File) and f.node.dynamic
                 and not f.node.error]
        return files if all(f.node.quantum > 0 for f in files  # type: ignore[union-attr]
                            ) else []

    def pushed(self, tree: Tree, file: Entry) -> bool:
        """Whether a dynamic file is kept fresh by its directory's rounds."""
        parent = tree.entries.get(file.parent)
        return parent is not None and bool(self.files_of(tree, parent))

    def _unit_files(self, tree: Tree, unit: int) -> list[Entry]:
        """The files of a unit: the dynamic files of its child directories."""
        entry = tree.get(unit)
        if entry is None:
            return []
        return [f for _, ino in entry.children if ino in tree.dynamic_parents
                for f in self.files_of(tree, tree.entries[ino])]

    async def refresh(self, tree: Tree, directory: Entry, now: float) -> None:
        """Everything the round of ``directory``'s unit covers, as of ``now``'s step."""
        unit = int(directory.parent)
        quantum = self.files_of(tree, directory)[0].node.quantum  # type: ignore[union-attr]
        step = math.floor(now / quantum)
        last = self._last.get(unit)
        self._last[unit] = now  # when it was asked for (a companion refreshed is not asked)
        done = self._done.get(unit)
        if done is not None and done[0] == step:
            await done[1].wait()
            return
        units = [unit]
        if last is not None:  # and those asked for after it last time, as far as this step
            horizon = min(COREAD, (step + 1) * quantum - now)
            units += [u for u, t in self._last.items() if u != unit
                      and 0 <= t - last < horizon and self._done.get(u, (None,))[0] != step]
        finished = trio.Event()
        for u in units:
            self._done[u] = (step, finished)
        try:
            await self._push([f for u in units for f in self._unit_files(tree, u)], now)
        finally:
            finished.set()

    async def _push(self, files: list[Entry], now: float) -> None:
        contents: list[tuple[int, bytes]] = []
        stale: list[int] = []
        for f in files:
            before = self.snapshots.get(f.inode)
            if before is None:  # the kernel holds nothing of it
                continue
            data = f.node.read(now)  # type: ignore[union-attr]
            if data == before.content:
                continue
            if len(data) >= len(before.content):  # a store can grow a file, not shrink it
                self.snapshots.refresh(f.inode, data)
                contents.append((f.inode, data))
            else:
                self.snapshots.take(f.inode, data)
                stale.append(f.inode)
        if contents or stale:
            await trio.to_thread.run_sync(self.kernel.store, contents, stale)
