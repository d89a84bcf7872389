"""Apply Updates: build the new tree off the FUSE loop, swap it in with one assignment, then
tell the kernel what changed (from a worker thread), and record the result.

An update that carries an error changes nothing that is served: the last good State stays, and
the error shows in /readyz, the metrics and the log. So does any failure while applying a good
one: a surface that raises while the tree is built, kernel invalidations that fail, a CDI spec
that cannot be written. No failure here ends the daemon.

Updates that queue up while one is applied are coalesced: only the newest State is built (an
error after it is still reported), so a burst of edits costs one build.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from mokkafs.errors import MokkafsError, internal_error
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.view import TreeHolder
from mokkafs.obs.metrics import Metrics
from mokkafs.obs.status import Status
from mokkafs.source import Update
from mokkafs.state import State
from mokkafs.surfaces.ib_traffic import carry_counters
from mokkafs.tree.build import Tree
from mokkafs.tree.diff import diff

log = logging.getLogger(__name__)

Build = Callable[[State, Tree | None], tuple[Tree, dict[str, int]]]
Publish = Callable[[State], None]


@dataclass
class Applied:
    generation: int
    changed: int
    removed: int
    added: int
    invalidations: int


class Swapper:
    """Owns the served State; every successful update replaces it."""

    def __init__(self, holder: TreeHolder, state: State, counts: dict[str, int], *,
                 build: Build, invalidator: Invalidator, status: Status, metrics: Metrics,
                 publish: Publish | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.holder = holder
        self.state = state
        self.build = build
        self.invalidator = invalidator
        self.status = status
        self.metrics = metrics
        self.publish = publish
        self.clock = clock
        self._record(state, counts)

    def _record(self, state: State, counts: dict[str, int]) -> None:
        s = self.status
        s.generation = state.generation
        s.source = state.source
        s.last_success = state.loaded_at
        s.surfaces = counts
        s.inodes = len(self.holder.tree.entries)

    def _fail(self, stage: str, message: str) -> None:
        self.status.apply_errors[stage] = self.status.apply_errors.get(stage, 0) + 1
        self.status.failed(message)

    async def run(self, updates: trio.MemoryReceiveChannel[Update]) -> None:
        """Apply updates until the channel closes or the task is cancelled."""
        async with updates:
            async for first in updates:
                batch = [first]
                while True:
                    try:
                        batch.append(updates.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                newest = max((i for i, u in enumerate(batch) if u.state is not None),
                             default=-1)
                for i, update in enumerate(batch):
                    if update.state is None or i == newest:  # older States are superseded
                        await self.apply(update)

    async def apply(self, update: Update) -> Applied | None:
        if update.state is None:
            assert update.error is not None
            self.status.source_errors += 1
            self.status.failed(str(update.error), update.at)
            log.error("keeping generation %d: %s", self.state.generation, update.error)
            return None
        start = time.perf_counter()
        old_tree = self.holder.tree
        try:
            state = carry_counters(self.state, update.state, self.clock())
            tree, counts = await trio.to_thread.run_sync(self.build, state, old_tree,
                                                         abandon_on_cancel=True)
            plan = diff(old_tree, tree)
        except Exception as exc:
            log.exception("building generation %d failed", update.state.generation)
            self._fail("build", f"keeping generation {self.state.generation}: "
                       f"{internal_error(f'building the view of {update.state.source}', exc)}")
            return None
        self.holder.tree = tree  # the swap: new requests see the new view from here
        self.state = state
        swapped = time.perf_counter()
        failures: list[str] = []
        # Shielded: the kernel must hear of every change before the loop may stop serving.
        with trio.CancelScope(shield=True):
            try:
                sent = (await trio.to_thread.run_sync(self.invalidator.apply, plan)).sent
            except Exception as exc:
                log.exception("invalidating the kernel's caches failed")
                self._fail("invalidate", f"generation {state.generation} serves, but the "
                           f"kernel may keep old entries until they time out: {exc}")
                failures.append("invalidate")
                sent = 0
        done = time.perf_counter()
        self.metrics.swap_seconds.observe(done - start)
        self.metrics.invalidation_seconds.observe(done - swapped)
        self.status.swaps += 1
        self.status.invalidations += sent
        self._record(state, counts)
        if self.publish is not None:
            try:
                self.publish(state)
            except MokkafsError as exc:
                log.error("generation %d serves, but %s", state.generation, exc)
                self._fail("publish", f"generation {state.generation} serves, but {exc}")
                failures.append("publish")
        if not failures:
            self.status.last_error = self.status.last_error_at = None
        applied = Applied(state.generation, len(plan.changed_data) + len(plan.changed_attrs),
                          len(plan.removed), len(plan.added), sent)
        log.info("serving generation %d from %s: %d changed, %d removed, %d added "
                 "(%d invalidations in %.1f ms) in %.1f ms", state.generation, state.source,
                 applied.changed, applied.removed, applied.added, sent,
                 (done - swapped) * 1000, (done - start) * 1000)
        return applied
