"""Apply Updates and fault transitions: build the new tree off the FUSE loop, swap it in with
one assignment, hand what changed to the teller (``mokkafs.serve.tell``: the kernel hears it in
install order, from a worker thread, off the swap lock), and record the result.

Three things change the view: a new State from the source (the profile), a change of a
run-time layer (``change``: a fault, a MIG layout, a write; ``mokkafs.layers``), and the
clock reaching a fault's transition (``mokkafs.serve.faults.FaultScheduler``). All go through
``_install``, one at a time: ``state`` is the State with its faults (their origins set,
counters carried, in the build's worker thread), and the view is ``at(state, when)``, the
State as its faults make it at that time.

An update that carries an error changes nothing that is served: the last good State stays, and
the error shows in /readyz, the metrics and the log. So does any failure while applying a good
one: a surface (or the carrying of counters) that raises while the tree is built, kernel
invalidations that fail, a CDI spec that cannot be written. No failure here ends the daemon.

A change that answers no FUSE request (a profile load, a fault, a MIG layout, the writes
cleared) returns once the kernel has been told, waiting after it released the lock. A write
waits for it only within a bound (``mokkafs.serve.writes``, ``mokkafs.serve.tell``).

Updates that queue up while one is applied are coalesced: only the newest State is built (an
error after it is still reported), so a burst of edits costs one build.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import trio

from mokkafs.errors import MokkafsError, internal_error
from mokkafs.faults.effects import at, carry
from mokkafs.fuse.invalidate import Counts, Invalidator
from mokkafs.fuse.view import TreeHolder
from mokkafs.layers.layer import B, Edit, Layer
from mokkafs.layers.registry import Layers
from mokkafs.obs.metrics import Metrics
from mokkafs.obs.status import Status
from mokkafs.serve.served import Installed, Prepared, served
from mokkafs.serve.tell import Teller, told
from mokkafs.source import Update
from mokkafs.state import State
from mokkafs.tree.assemble import Build
from mokkafs.tree.build import Tree
from mokkafs.tree.diff import Invalidation, diff

log = logging.getLogger(__name__)

Publish = Callable[[State], None]
Persist = Callable[[Layers, State, float], None]  # keep the run-time layers (a state file)


class Swapper:
    """Owns the served State; every successful update replaces it."""

    def __init__(self, holder: TreeHolder, profile: State, counts: dict[str, int], *,
                 build: Build, invalidator: Invalidator, status: Status, metrics: Metrics,
                 publish: Publish | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 shown_at: float | None = None, layers: Layers | None = None,
                 state: State | None = None, persist: Persist | None = None) -> None:
        """``profile``: the first State, as the source gave it; ``state``: it with the
        ``layers`` kept from a daemon before (default: ``profile``), whose view ``holder``
        already serves (its faults' origins set, see ``faults.effects.applied``), as of
        ``shown_at`` (default: now). ``persist`` keeps every change of the layers."""
        self.holder = holder
        self.profile = profile  # as the source gave it
        self.state = profile if state is None else state  # and with the run-time faults
        # What changed at run time (mokkafs.layers): MIG layouts, faults, writes.
        self.layers = Layers() if layers is None else layers
        self.build = build
        self.teller = Teller(invalidator, self._told)
        self.status = status
        self.metrics = metrics
        self.publish = publish
        self.persist = persist
        self.clock = clock
        self.version = 0  # grows with every install
        self.changed = trio.Event()  # set (and replaced) at every install
        self._lock = trio.Lock()
        self.shown_at = clock() if shown_at is None else shown_at  # what the view shows
        self._record(self.state, counts, self.shown_at)

    @property
    def effective(self) -> State:
        """The State as served: its faults' effects as of the last install."""
        return at(self.state, self.shown_at)

    def _record(self, state: State, counts: dict[str, int], when: float) -> None:
        served(self.status, state, counts, len(self.holder.tree.entries), when)

    def _wall(self, when: float) -> float:
        """The wall-clock time of ``when`` on the swapper's clock."""
        return time.time() + (when - self.clock())

    def _told(self, generation: int, counts: Counts | None, failure: Exception | None,
              seconds: float) -> None:
        """What the teller reports of one install's plan."""
        self.metrics.invalidation_seconds.observe(seconds)
        if failure is not None:
            log.error("invalidating the kernel's caches for generation %d failed: %s",
                      generation, failure)
            self._fail("invalidate", f"generation {generation} serves, but the kernel may "
                       f"keep old entries until they time out: {failure}")
            return
        assert counts is not None
        self.status.invalidations += counts.sent
        log.debug("generation %d: %d invalidations in %.1f ms", generation, counts.sent,
                  seconds * 1000)

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

    async def apply(self, update: Update) -> Installed | None:
        """A new State from the source: the run-time layers carry over to it."""
        if update.state is None:
            assert update.error is not None
            self.status.source_errors += 1
            self.status.failed(str(update.error), update.at)
            log.error("keeping generation %d: %s", self.state.generation, update.error)
            return None
        async with self._lock:
            installed = await self._change(self.layers.copy(), update.state, "profile",
                                           stamped=False)
        return await told(installed)

    async def change(self, layer: Layer[B], edit: Edit[B], reason: str | None = None,
                     ) -> Installed | None:
        """Change one run-time layer: ``edit`` edits a copy of its book, checked against the
        profile's State, or the State served for a layer edited through the mount (it raises
        to refuse, and returns False when nothing changes: then only what it counted is kept).
        The new view is installed before this returns, and the kernel told, but for a layer
        edited through the mount: a write's answer must not wait for it (``Installed.told``).
        None: nothing to install, or the view could not be built (reported; the old one
        serves). ``reason`` (default: the layer's name) is the log's."""
        async with self._lock:
            layers = self.layers.copy()
            if edit(layers[layer], self.state if layer.through_mount else self.profile) \
                    is False:
                self.layers[layer] = layers[layer]  # (its counts)
                return None
            installed = await self._change(layers, self.profile, reason or layer.name)
        return installed if layer.through_mount else await told(installed)

    async def _change(self, layers: Layers, profile: State, reason: str, *,
                      stamped: bool = True) -> Installed | None:
        """Serve ``layers`` over ``profile``; keep both if the view is installed. What a
        run-time change alters gets this moment as its mtime (``stamped``); what a new
        profile alters gets its load's."""
        installed = await self._install(layers.over(profile), self.clock(), reason,
                                        since=self.state,
                                        stamp=time.time() if stamped else None)
        if installed is not None:
            self.profile, self.layers = profile, layers
            await self._persist()
        return installed

    async def _persist(self) -> None:
        """Keep the layers and their faults' timing for the next daemon; a failure is reported
        (the changes apply all the same, but would not survive a restart)."""
        if self.persist is None:
            return
        try:
            await trio.to_thread.run_sync(self.persist, self.layers, self.state, self.clock())
        except Exception as exc:
            log.error("the state file cannot be written: %s", exc)
            self._fail("persist", "the changes made at run time serve, but would not "
                       f"survive a restart: the state file cannot be written: {exc}")

    async def prepare(self, when: float) -> Prepared | None:
        """The view at ``when`` (a coming transition), built now in a worker thread."""
        version, state, old = self.version, self.state, self.holder.tree
        stamp = self._wall(when)
        try:
            state, effective, tree, counts, plan = await trio.to_thread.run_sync(
                self._made, state, None, when, old, stamp, abandon_on_cancel=True)
        except Exception as exc:
            log.exception("building the view for a fault transition failed")
            self._fail("build", f"a fault transition of generation {state.generation} "
                       f"cannot be built: {internal_error('building the view', exc)}")
            return None
        return Prepared(version, state, effective, tree, counts, plan)

    def _made(self, state: State, since: State | None, when: float, old: Tree,
              stamp: float | None) -> tuple[State, State, Tree, dict[str, int], Invalidation]:
        """In a worker thread, as each step takes milliseconds the FUSE loop should spend
        answering: ``state`` taken over from ``since`` at ``when`` if given (counters and
        fault origins carried) and made at wall-clock time ``stamp`` if given (the mtime of
        what it changes), the State as its faults make it at ``when``, its tree, and what the
        kernel must hear to go there from ``old``."""
        if stamp is not None:
            state = replace(state, loaded_at=stamp)
        if since is not None:
            state = carry(since, state, when)
        effective = at(state, when)
        tree, counts = self.build(effective, old)
        return state, effective, tree, counts, diff(old, tree)

    async def transition(self, prepared: Prepared | None, when: float,
                         version: int) -> Installed | None:
        """Serve the view at ``when``: ``prepared`` if still current, else built now. None if
        another view was installed since ``version`` (``when`` may be out of date) or the
        view at ``when`` cannot be built."""
        async with self._lock:
            if self.version != version:
                return None
            current = prepared if prepared is not None and prepared.version == self.version \
                else None
            installed = await self._install(self.state, when, "transition", current,
                                            stamp=self._wall(when))
        return await told(installed)

    async def _install(self, state: State, when: float, reason: str,
                       prepared: Prepared | None = None, *, since: State | None = None,
                       stamp: float | None = None) -> Installed | None:
        """Serve ``at(state, when)``, with ``state`` carried over from ``since`` if given
        (``faults.effects.carry``) and made at ``stamp`` if given (``_made``). A transition
        leaves an error the last load or fault change reported in place; the others clear it
        when they succeed."""
        start = time.perf_counter()
        old_tree = self.holder.tree
        try:
            if prepared is not None:
                state, effective, tree = prepared.state, prepared.effective, prepared.tree
                counts, plan = prepared.counts, prepared.plan
            else:
                state, effective, tree, counts, plan = await trio.to_thread.run_sync(
                    self._made, state, since, when, old_tree, stamp, abandon_on_cancel=True)
        except Exception as exc:
            log.exception("building generation %d failed", state.generation)
            self._fail("build", f"keeping generation {self.state.generation}: "
                       f"{internal_error(f'building the view of {state.source}', exc)}")
            return None
        self.holder.tree = tree  # the swap: new requests see the new view from here
        self.state, self.shown_at = state, when
        # The kernel hears it after, in order, off this lock; then the status says it serves.
        telling = self.teller.send(plan, state.generation,
                                lambda: self._record(state, counts, when))
        failures: list[str] = []
        done = time.perf_counter()
        self.metrics.swap_seconds.observe(done - start)
        self.status.swaps += 1
        self.version += 1
        self.changed.set()
        self.changed = trio.Event()
        if self.publish is not None:
            try:
                self.publish(effective)
            except MokkafsError as exc:
                log.error("generation %d serves, but %s", state.generation, exc)
                self._fail("publish", f"generation {state.generation} serves, but {exc}")
                failures.append("publish")
        if not failures and reason != "transition":
            self.status.last_error = self.status.last_error_at = None
        changed = len(plan.changed_data) + len(plan.changed_attrs) + len(plan.shrunk) \
            + len(plan.writable)
        installed = Installed(state.generation, changed, len(plan.removed), len(plan.added),
                              telling)
        log.info("serving generation %d from %s (%s): %d changed, %d removed, %d added "
                 "in %.1f ms", state.generation, state.source, reason,
                 installed.changed, installed.removed, installed.added, (done - start) * 1000)
        return installed

