"""Apply Updates: build the new tree off the FUSE loop, swap it in with one assignment, then
tell the kernel what changed (from a worker thread), and record the result.

An update that carries an error changes nothing that is served: the last good State stays, and
the error shows in /readyz, the metrics and the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import trio

from mokkafs import surfaces
from mokkafs.fuse.adapter import TreeHolder
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.obs.metrics import Health, Metrics
from mokkafs.source import Update
from mokkafs.state import State
from mokkafs.surfaces import ib_traffic
from mokkafs.tree.build import Tree, build
from mokkafs.tree.diff import diff
from mokkafs.tree.nodes import Node

log = logging.getLogger(__name__)


def build_tree(state: State, previous: Tree | None = None) -> tuple[Tree, dict[str, int]]:
    """The Tree of a State, and how many nodes each surface described."""
    counts: dict[str, int] = {}
    nodes: list[Node] = []
    for name, surface in surfaces.SURFACES:
        before = len(nodes)
        nodes.extend(surface(state))
        counts[name] = len(nodes) - before
    return build(nodes, state.generation, int(state.loaded_at * 1e9), previous), counts


def carry_counters(old: State, new: State, now: float) -> State:
    """``new`` with every surviving port's counters continuing from their value now."""
    t = max(now - old.started_at, 0.0)
    old_ports = {(h.name, p.number): p.traffic for h in old.hcas for p in h.ports}
    hcas = tuple(
        replace(h, ports=tuple(
            replace(p, traffic=ib_traffic.continue_from(old_ports[(h.name, p.number)],
                                                        p.traffic, t))
            if (h.name, p.number) in old_ports else p
            for p in h.ports))
        for h in new.hcas)
    return replace(new, hcas=hcas)


class Swapper:
    """Owns the served State; every successful update replaces it."""

    def __init__(self, holder: TreeHolder, state: State, invalidator: Invalidator,
                 metrics: Metrics, health: Health,
                 after_swap: Callable[[State], Awaitable[None]] | None = None) -> None:
        self.after_swap = after_swap
        self.holder = holder
        self.state = state
        self.invalidator = invalidator
        self.metrics = metrics
        self.health = health

    def record_success(self, state: State, counts: dict[str, int]) -> None:
        self.metrics.generation.set(state.generation)
        self.metrics.inodes.set(len(self.holder.tree.entries))
        self.metrics.last_success.set(state.loaded_at)
        self.health.generation = state.generation
        self.health.source = state.source
        self.health.last_success = state.loaded_at
        self.health.surfaces = counts

    async def apply(self, update: Update) -> None:
        if update.state is None:
            self.metrics.source_errors.inc()
            self.health.last_error = str(update.error)
            self.health.last_error_at = update.at
            log.error("keeping generation %d: %s", self.state.generation, update.error)
            return
        start = time.perf_counter()
        state = carry_counters(self.state, update.state, time.monotonic())
        old = self.holder.tree
        tree, counts = await trio.to_thread.run_sync(build_tree, state, old)
        plan = diff(old, tree)
        self.holder.tree = tree  # the swap: new requests see the new view from here
        self.state = state
        swapped = time.perf_counter()
        sent = await trio.to_thread.run_sync(self.invalidator.apply, plan)
        done = time.perf_counter()
        elapsed = done - start
        self.metrics.swaps.inc()
        self.metrics.swap_seconds.observe(elapsed)
        self.metrics.invalidations.inc(sent.sent)
        self.metrics.invalidation_seconds.observe(done - swapped)
        self.record_success(state, counts)
        self.health.last_error = None
        self.health.last_error_at = None
        if self.after_swap is not None:
            await self.after_swap(state)
        log.info("serving generation %d from %s: %d changed, %d removed, %d added "
                 "(%d invalidations in %.1f ms) in %.1f ms", state.generation, state.source,
                 len(plan.changed_data) + len(plan.changed_attrs), len(plan.removed),
                 len(plan.added), sent.sent, (done - swapped) * 1000, elapsed * 1000)
