"""Apply Updates and fault transitions: build the new tree off the FUSE loop, swap it in with
one assignment, then tell the kernel what changed (from a worker thread), and record the result.

Three things change the view: a new State from the source (the profile), a change of the
faults applied at run time (``mokkafs fault``, through ``faults.book.FaultBook``), and the
clock reaching a fault's transition (``mokkafs.serve.faults.FaultScheduler``). All go through
``_install``, one at a time: ``state`` is the State with its faults (their origins set,
counters carried, in the build's worker thread), and the view is ``at(state, when)``, the
State as its faults make it at that time.

An update that carries an error changes nothing that is served: the last good State stays, and
the error shows in /readyz, the metrics and the log. So does any failure while applying a good
one: a surface (or the carrying of counters) that raises while the tree is built, kernel
invalidations that fail, a CDI spec that cannot be written. No failure here ends the daemon.

Updates that queue up while one is applied are coalesced: only the newest State is built (an
error after it is still reported), so a burst of edits costs one build.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import trio

from mokkafs.errors import MokkafsError, internal_error
from mokkafs.faults.book import FaultBook
from mokkafs.faults.effects import at, carry
from mokkafs.faults.schedule import status
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.view import TreeHolder
from mokkafs.obs.metrics import Metrics
from mokkafs.obs.status import Status
from mokkafs.serve.mig import MigLayer
from mokkafs.source import Update
from mokkafs.state import State
from mokkafs.tree.assemble import Build
from mokkafs.tree.build import Tree
from mokkafs.tree.diff import Invalidation, diff
from mokkafs.writes.book import WriteBook

log = logging.getLogger(__name__)

Publish = Callable[[State], None]
Persist = Callable[[FaultBook, State, float], None]  # keep the run-time faults (a state file)


@dataclass
class Installed:
    """What an install changed: the generation now served, its nodes changed, removed and
    added, and the kernel invalidations sent."""

    generation: int
    changed: int
    removed: int
    added: int
    invalidations: int


@dataclass(frozen=True)
class Prepared:
    """A view built ahead of a transition: valid while ``version`` is the swapper's."""

    version: int
    effective: State  # the State as its faults make it at the transition's time
    tree: Tree
    counts: dict[str, int]
    plan: Invalidation  # from the tree served when it was built


class Swapper:
    """Owns the served State; every successful update replaces it."""

    def __init__(self, holder: TreeHolder, profile: State, counts: dict[str, int], *,
                 build: Build, invalidator: Invalidator, status: Status, metrics: Metrics,
                 publish: Publish | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 shown_at: float | None = None, book: FaultBook | None = None,
                 state: State | None = None, persist: Persist | None = None) -> None:
        """``profile``: the first State, as the source gave it; ``state``: it with the faults
        ``book`` keeps from a daemon before (default: ``profile``), whose view ``holder``
        already serves (its faults' origins set, see ``faults.effects.applied``), as of
        ``shown_at`` (default: now). ``persist`` keeps every change of the book."""
        self.holder = holder
        self.profile = profile  # as the source gave it
        self.state = profile if state is None else state  # and with the run-time faults
        self.book = FaultBook() if book is None else book
        self.mig = MigLayer()  # MIG layouts changed at run time (mokkafs.serve.mig)
        self.writes = WriteBook()  # the sysfs writes taken (mokkafs.serve.writes)
        self.build = build
        self.invalidator = invalidator
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
        s = self.status
        s.generation = state.generation
        s.source = state.source
        s.last_success = state.loaded_at
        s.surfaces = counts
        s.inodes = len(self.holder.tree.entries)
        listing = [(f, status(f, when)) for f in state.faults]
        for f, now in listing:
            before = s.fault_states.get(f.name)
            if (before is not None and before != now) or (before is None and now != "pending"):
                log.info("fault %s (%s on %s): %s", f.name, f.kind, f.target, now)
                key = (f.kind, now)
                s.fault_transitions[key] = s.fault_transitions.get(key, 0) + 1
        for name in set(s.fault_states) - {f.name for f in state.faults}:
            log.info("fault %s: cleared", name)
        s.fault_states = {f.name: now for f, now in listing}
        s.faults = [{"name": f.name, "kind": f.kind, "target": f.target, "state": now,
                     "source": f.source, "restored": f.restored} for f, now in listing]

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
        """A new State from the source: the faults applied at run time carry over to it."""
        if update.state is None:
            assert update.error is not None
            self.status.source_errors += 1
            self.status.failed(str(update.error), update.at)
            log.error("keeping generation %d: %s", self.state.generation, update.error)
            return None
        async with self._lock:
            now = self.clock()
            book, writes = self.book.copy(), self.writes.copy()
            mig = self.mig.copy()
            mig.prune(update.state)
            merged = writes.merge(book.merge(mig.over(update.state)))
            installed = await self._install(merged, now, "profile", since=self.state)
            if installed is not None:
                self.profile, self.book, self.mig, self.writes = update.state, book, mig, writes
                await self._persist()
            return installed

    async def refault(self, change: Callable[[FaultBook, State], None]) -> Installed | None:
        """Change the faults applied at run time (``change`` edits the book, checking against
        the profile's State; it raises ``FaultError`` to refuse, and then nothing changes)."""
        async with self._lock:
            book = self.book.copy()
            change(book, self.profile)
            now = self.clock()
            merged = self.writes.copy().merge(book.merge(self.mig.over(self.profile)))
            result = await self._install(merged, now, "faults", since=self.state)
            if result is not None:
                self.book = book
                await self._persist()
            return result

    async def remig(self, change: Callable[[MigLayer, State], None]) -> Installed | None:
        """Change the MIG layouts set at run time (``change`` edits the layer, checking
        against the profile's State; it raises to refuse, and then nothing changes)."""
        async with self._lock:
            mig = self.mig.copy()
            change(mig, self.profile)
            # (changed at this moment: what it changes gets a new mtime, as a load's does)
            merged = replace(self.writes.copy().merge(self.book.merge(mig.over(self.profile))),
                             loaded_at=time.time())
            result = await self._install(merged, self.clock(), "mig", since=self.state)
            if result is not None:
                self.mig = mig
            return result

    async def rewrite(self, change: Callable[[WriteBook, State], bool], reason: str = "write",
                      ) -> Installed | None:
        """Change the writes (``change`` edits a copy of the book, checking against the State
        served; it raises to refuse, and returns False when nothing changes): the new view is
        installed, and the kernel told, before this returns. None: nothing to install, or
        the view could not be built (reported; the old one serves)."""
        async with self._lock:
            writes = self.writes.copy()
            if not change(writes, self.state):
                self.writes = writes  # (its counts)
                return None
            merged = writes.merge(self.book.copy().merge(self.mig.over(self.profile)))
            result = await self._install(merged, self.clock(), reason, since=self.state)
            if result is not None:
                self.writes = writes
            return result

    async def _persist(self) -> None:
        """Keep the book and its faults' timing for the next daemon; a failure is reported
        (the faults apply all the same, but would not survive a restart)."""
        if self.persist is None:
            return
        try:
            await trio.to_thread.run_sync(self.persist, self.book, self.state, self.clock())
        except Exception as exc:
            log.error("the state file cannot be written: %s", exc)
            self._fail("persist", "the faults applied at run time serve, but would not "
                       f"survive a restart: the state file cannot be written: {exc}")

    async def prepare(self, when: float) -> Prepared | None:
        """The view at ``when`` (a coming transition), built now in a worker thread."""
        version, state, old = self.version, self.state, self.holder.tree
        try:
            _, effective, tree, counts, plan = await trio.to_thread.run_sync(
                self._made, state, None, when, old, abandon_on_cancel=True)
        except Exception as exc:
            log.exception("building the view for a fault transition failed")
            self._fail("build", f"a fault transition of generation {state.generation} "
                       f"cannot be built: {internal_error('building the view', exc)}")
            return None
        return Prepared(version, effective, tree, counts, plan)

    def _made(self, state: State, since: State | None, when: float, old: Tree,
              ) -> tuple[State, State, Tree, dict[str, int], Invalidation]:
        """In a worker thread, as each step takes milliseconds the FUSE loop should spend
        answering: ``state`` taken over from ``since`` at ``when`` if given (counters and
        fault origins carried), the State as its faults make it at ``when``, its tree, and
        what the kernel must hear to go there from ``old``."""
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
            return await self._install(self.state, when, "transition", current)

    async def _install(self, state: State, when: float, reason: str,
                       prepared: Prepared | None = None, *,
                       since: State | None = None) -> Installed | None:
        """Serve ``at(state, when)``, with ``state`` carried over from ``since`` if given
        (``faults.effects.carry``). A transition leaves an error the last load or fault
        change reported in place; the others clear it when they succeed."""
        start = time.perf_counter()
        old_tree = self.holder.tree
        try:
            if prepared is not None:
                effective, tree = prepared.effective, prepared.tree
                counts, plan = prepared.counts, prepared.plan
            else:
                state, effective, tree, counts, plan = await trio.to_thread.run_sync(
                    self._made, state, since, when, old_tree, abandon_on_cancel=True)
        except Exception as exc:
            log.exception("building generation %d failed", state.generation)
            self._fail("build", f"keeping generation {self.state.generation}: "
                       f"{internal_error(f'building the view of {state.source}', exc)}")
            return None
        self.holder.tree = tree  # the swap: new requests see the new view from here
        self.state, self.shown_at = state, when
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
        self._record(state, counts, when)
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
        installed = Installed(state.generation, len(plan.changed_data) + len(plan.changed_attrs)
                           + len(plan.shrunk),
                           len(plan.removed), len(plan.added), sent)
        log.info("serving generation %d from %s (%s): %d changed, %d removed, %d added "
                 "(%d invalidations in %.1f ms) in %.1f ms", state.generation, state.source,
                 reason,
                 installed.changed, installed.removed, installed.added, sent,
                 (done - swapped) * 1000, (done - start) * 1000)
        return installed

