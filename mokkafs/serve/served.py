"""What an install serves: what it changed (``Installed``), a view built ahead of a fault's
transition (``Prepared``), and what the status (/readyz, the metrics) says of it, with the log
line of each fault that changed state."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import trio

from mokkafs.faults.schedule import status
from mokkafs.obs.status import Status
from mokkafs.state import State
from mokkafs.tree.build import Tree
from mokkafs.tree.diff import Invalidation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Telling:
    """One plan's progress: ``listed`` once all but the written files' pages are told (a
    listing or a lookup is fresh from then), ``told`` once all of it is."""

    listed: trio.Event = field(default_factory=trio.Event)
    told: trio.Event = field(default_factory=trio.Event)


@dataclass
class Installed:
    """What an install changed: the generation now served, its nodes changed, removed and
    added, and how far the kernel has heard of them (``mokkafs.serve.tell``)."""

    generation: int
    changed: int
    removed: int
    added: int
    telling: Telling

    @property
    def told(self) -> trio.Event:
        """Set once the kernel has heard all of it."""
        return self.telling.told


@dataclass(frozen=True)
class Prepared:
    """A view built ahead of a transition: valid while ``version`` is the swapper's."""

    version: int
    state: State  # the swapper's, made at the transition's time (its mtime)
    effective: State  # the State as its faults make it at the transition's time
    tree: Tree
    counts: dict[str, int]
    plan: Invalidation  # from the tree served when it was built


def served(s: Status, state: State, counts: dict[str, int], inodes: int, when: float) -> None:
    """Record in ``s`` that ``state`` serves (its faults as of ``when``): ``counts`` nodes by
    surface, ``inodes`` in all."""
    s.generation = state.generation
    s.source = state.source
    s.last_success = state.loaded_at
    s.surfaces = counts
    s.inodes = inodes
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
