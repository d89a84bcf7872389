"""No-open mode's caching units, derived from a built tree: which directories a refresh covers
(``mokkafs.fuse.refresh``). Caching policy, so the FUSE side's, not the tree's.

- A stepped directory holds dynamic files that all change only at steps (a quantum).
- A unit is the parent of stepped directories (an IB port, a PCI function).
- A trigger is the directory whose LOOKUP refreshes a unit: the unit itself where it is marked
  so (``Dir.unit``, an IB port), else each of its stepped directories (``power/``).

Computing them walks the tree's dynamic files, which takes milliseconds on a large tree. The
swap computes them in its worker step (``UnitsOf.prepare``), so the FUSE loop finds them made.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from mokkafs.tree.build import Entry, Inode, Tree
from mokkafs.tree.nodes import Dir, File

KEPT = 4  # trees whose units are kept: the one serving, and those built since


@dataclass(frozen=True, slots=True)
class Units:
    """The caching units of one tree."""

    # stepped directory -> its stepped files
    stepped: dict[Inode, tuple[Inode, ...]]
    # trigger -> the unit its lookup refreshes
    triggers: dict[Inode, Inode]
    # unit -> the stepped files of its subdirectories: what its refresh keeps fresh
    files: dict[Inode, tuple[Entry, ...]]

    @classmethod
    def of(cls, tree: Tree) -> Units:
        entries = tree.entries
        stepped: dict[Inode, tuple[Inode, ...]] = {}
        for directory in tree.dynamic_parents:
            found = [f for ino in entries[directory].inodes
                     if isinstance((f := entries[ino]).node, File) and f.node.dynamic
                     and not f.node.error]
            if found and all(f.node.quantum > 0 for f in found):  # type: ignore[union-attr]
                stepped[directory] = tuple(f.inode for f in found)
        triggers: dict[Inode, Inode] = {}
        files: dict[Inode, tuple[Entry, ...]] = {}
        for directory, inodes in stepped.items():
            unit = entries[directory].parent
            node = entries[unit].node
            triggers[unit if isinstance(node, Dir) and node.unit else directory] = unit
            files[unit] = files.get(unit, ()) + tuple(entries[f] for f in inodes)
        return cls(stepped, triggers, files)


class UnitsOf:
    """The units of the last few trees, by identity, without keeping a tree alive. ``prepare``
    runs in the swap's worker thread; ``__call__`` on the FUSE loop computes what no swap
    prepared (a tree a test made). Each holds its own list, replaced whole, so the two threads
    need no lock: a race loses an entry, which is computed again."""

    def __init__(self) -> None:
        self._known: tuple[tuple[weakref.ref[Tree], Units], ...] = ()

    def prepare(self, tree: Tree) -> Units:
        units = Units.of(tree)
        alive = tuple(pair for pair in self._known if pair[0]() is not None)
        self._known = ((weakref.ref(tree), units), *alive[:KEPT - 1])
        return units

    def __call__(self, tree: Tree) -> Units:
        for ref, units in self._known:
            if ref() is tree:
                return units
        return self.prepare(tree)
