"""Surfaces -> one Tree: what a surface is, and how a build reuses the last one.

A ``Surface`` is one record: its name, the function of a State that describes its nodes, the
State fields that function reads, the places it owns (its roots: ``mokkafs.tree.roots``), and
(for a surface that remembers its last run) the cache it is given. Each surface module
defines its own (``mokkafs.surfaces.<name>.SURFACE``).

An ``Assembler`` builds trees from a list of surfaces and owns their caches. Given the tree
before, a build does not compute again a surface whose inputs are equal to that tree's, and
when only content changed it patches that tree instead of building one whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mokkafs.state import State
from mokkafs.tree.build import Part, Tree, build, patch
from mokkafs.tree.nodes import Node
from mokkafs.tree.roots import Root

C = TypeVar("C")

# What a swap's worker step calls: the tree of a State, given the tree before (if any), and
# how many nodes each surface described.
Build = Callable[[State, Tree | None], tuple[Tree, dict[str, int]]]


@dataclass(frozen=True, slots=True)
class Surface(Generic[C]):
    """One simulated surface. ``inputs`` names every State field ``nodes`` reads (methods count
    as the fields they read; tests/unit/test_surface_inputs.py proves each list complete).
    ``roots`` are the places it owns; it may add nodes below another surface's (a PF's
    ``sriov_*`` below the PCI function's directory). ``cache`` makes what ``nodes`` is given
    to remember its last run in; the assembler holds one for as long as it lives."""

    name: str
    nodes: Callable[[State, C], Iterable[Node]]
    inputs: tuple[str, ...]
    roots: tuple[Root, ...]
    cache: Callable[[], C]


def stateless(name: str, nodes: Callable[[State], Iterable[Node]], inputs: tuple[str, ...],
              roots: tuple[Root, ...]) -> Surface[None]:
    """A surface that remembers nothing between builds (all but PCI's and InfiniBand's)."""
    return Surface(name, lambda state, _: nodes(state), inputs, roots, lambda: None)


class Assembler:
    """Builds the trees of ``surfaces``, in their order, and keeps each surface's cache."""

    def __init__(self, surfaces: Sequence[Surface[Any]]) -> None:
        self.surfaces = tuple(surfaces)
        self._caches: dict[str, object] = {s.name: s.cache() for s in self.surfaces}

    def build(self, state: State, previous: Tree | None = None,
              ) -> tuple[Tree, dict[str, int]]:
        """The Tree of a State, and how many nodes each surface described. With ``previous``,
        surfaces whose inputs did not change are not computed again, and a swap that changes
        no path patches it; entries equal to ``previous``'s keep their mtime. Raises
        ``TreeError`` when two surfaces collide."""
        parts: dict[str, Part] = {}
        changes: list[tuple[tuple[Node, ...], tuple[Node, ...]]] = []
        for surface in self.surfaces:
            name = surface.name
            key = tuple(getattr(state, f) for f in surface.inputs)
            old = previous.parts.get(name) if previous is not None else None
            if old is not None and old[0] == key:
                parts[name] = old
                continue
            parts[name] = (key, tuple(surface.nodes(state, self._caches[name])))
            if old is not None:
                changes.append((old[1], parts[name][1]))
        counts = {name: len(part[1]) for name, part in parts.items()}
        mtime = int(state.loaded_at * 1e9)
        tree = None
        if previous is not None and previous.parts.keys() == parts.keys():
            tree = patch(previous, changes, state.generation, mtime, parts)
        if tree is None:
            nodes = [node for part in parts.values() for node in part[1]]
            tree = build(nodes, state.generation, mtime, previous, parts)
        return tree, counts
