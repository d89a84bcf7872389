"""Assembling trees (``mokkafs.tree.assemble``) and deriving no-open mode's caching units from
them (``mokkafs.fuse.units``): the tree is immutable, each assembler owns its surfaces' caches,
and the units a swap's worker step prepared are the ones the FUSE side then uses."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterator

import pytest

from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.no_open import NoOpen
from mokkafs.fuse.units import KEPT, Units, UnitsOf
from mokkafs.fuse.view import TreeHolder, View
from mokkafs.state import Generation, State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler, Surface
from mokkafs.tree.build import Tree, build
from mokkafs.tree.nodes import File, Node, text
from tests.helpers.profiles import state_of


class Runs:
    """A surface's cache that counts the runs it was given to."""

    def __init__(self) -> None:
        self.runs = 0


def counted(state: State, cache: Runs) -> Iterator[Node]:
    cache.runs += 1
    yield text("counted", cache.runs)


COUNTED = Surface("counted", counted, ("generation",), (), Runs)


def test_a_tree_cannot_be_changed() -> None:
    tree, _ = Assembler(SURFACES).build(state_of("h100"))
    assert not hasattr(tree, "__dict__")  # nothing can be cached on it behind its back
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.generation = 2  # type: ignore[misc]


def test_each_assembler_holds_its_own_caches_and_passes_them_in() -> None:
    state = state_of("h100")
    first, second = Assembler([COUNTED]), Assembler([COUNTED])
    tree, _ = first.build(state)
    again, _ = first.build(dataclasses.replace(state, generation=Generation(2)), tree)
    other, _ = second.build(state)

    def content(t: Tree) -> bytes:
        entry = t.resolve("counted")
        assert entry is not None and isinstance(entry.node, File)
        return entry.node.read(0.0)

    assert (content(tree), content(again), content(other)) == (b"1\n", b"2\n", b"1\n")


def stepped_tree(generation: int) -> Tree:
    nodes: list[Node] = [File(f"port/counters/{c}", lambda now: b"0\n", quantum=0.1)
                         for c in "ab"]
    return build(nodes, generation, 0)


def test_units_prepared_in_the_build_are_the_ones_served() -> None:
    """``prepared`` wraps the swap's build: the units are made there, not on the FUSE loop."""
    policy = NoOpen(View(TreeHolder(stepped_tree(1))), kernel=Invalidator())
    assert policy.refresher is not None
    made: list[Units] = []
    original = policy.refresher.units.prepare

    def prepare(tree: Tree) -> Units:
        made.append(original(tree))
        return made[-1]

    policy.refresher.units.prepare = prepare  # type: ignore[method-assign]
    tree, counts = policy.prepared(lambda state, previous: (stepped_tree(2), {"x": 2}))(
        state_of("h100"), None)
    assert counts == {"x": 2} and len(made) == 1
    assert policy.refresher.units(tree) is made[0]  # found, not computed again
    assert len(made) == 1
    counters = tree.resolve("port/counters")
    assert counters is not None and policy.refresher.is_stepped(tree, counters)


def test_units_keep_no_tree_alive_and_only_the_last_few() -> None:
    units = UnitsOf()
    trees = [stepped_tree(g) for g in range(KEPT + 2)]
    made = [units.prepare(t) for t in trees]
    assert units(trees[-1]) is made[-1]
    assert units(trees[0]) is not made[0]  # forgotten: computed again, equal
    assert units(trees[0]) == made[0]
    del trees, made
    gc.collect()
    assert all(ref() is None for ref, _ in units._known)
