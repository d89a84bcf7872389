"""A Swapper for tests: over a tree it serves, with a fake kernel and its own Status."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar, overload

from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.view import TreeHolder
from mokkafs.obs.metrics import Metrics
from mokkafs.obs.status import Status
from mokkafs.serve.pipeline import builder
from mokkafs.serve.swap import Swapper
from mokkafs.state import State
from mokkafs.tree.assemble import Build
from mokkafs.tree.build import Tree
from tests.helpers.kernel import FakeKernel

S = TypeVar("S", bound=Swapper)
Clock = Callable[[], float]


@overload
def swapper_of(tree: Tree, state: State, counts: dict[str, int], *, build: Build = ...,
               clock: Clock = ..., shown_at: float | None = ...) -> Swapper: ...


@overload
def swapper_of(tree: Tree, state: State, counts: dict[str, int], *, kind: type[S],
               build: Build = ..., clock: Clock = ..., shown_at: float | None = ...) -> S: ...


def swapper_of(tree: Tree, state: State, counts: dict[str, int], *,
               kind: type[Swapper] = Swapper, build: Build | None = None,
               clock: Clock = time.monotonic, shown_at: float | None = None) -> Swapper:
    """A ``kind`` (a Swapper or a subclass) serving ``tree``, the view of ``state``, over a
    FakeKernel; its status is ``.status``."""
    status = Status()
    return kind(TreeHolder(tree), state, counts, build=build or builder(),
                invalidator=Invalidator(FakeKernel()), status=status, metrics=Metrics(status),
                clock=clock, shown_at=shown_at)
