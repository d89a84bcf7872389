"""Surfaces' nodes -> one immutable ``Tree``, with inode numbers stable across generations.

An inode number is a hash of the node's kind and path, so a path present in two generations
(or two daemon runs) keeps its number and the kernel's view of an unchanged file survives a
swap, while a path that changes kind (file -> link) gets a new number, as the kernel requires.
The root is inode 1, as FUSE requires. Each entry's mtime is the time of the build in which its
content (or, for a directory, its listing) last changed, so page caches are dropped exactly
when content changes.
"""

from __future__ import annotations

import bisect
import hashlib
import stat
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NewType

from mokkafs.tree.nodes import CharDevice, Dir, File, Node, Symlink

Inode = NewType("Inode", int)  # what the kernel knows a node by

ROOT_INODE = Inode(1)


def _kind(node: Node) -> str:
    if isinstance(node, CharDevice):
        return "c"
    return "d" if isinstance(node, Dir) else "l" if isinstance(node, Symlink) else "f"


def hash_inode(key: str) -> Inode:
    """The inode number of whatever ``key`` names: 63 bits of its hash, never 0 or 1 (the
    root's), the same in every process and release."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return Inode((int.from_bytes(digest, "big") >> 1) | 2)


def inode_of(path: str, kind: str = "f") -> Inode:
    """Stable inode number of a mount-relative path ('' is the root) holding a node of
    ``kind`` ('d', 'f', 'l' or 'c')."""
    return hash_inode(f"{kind}:{path}") if path else ROOT_INODE


@dataclass(frozen=True, slots=True)
class Entry:
    """One node as served: its inode, parent, node, and (directories) its children's names
    in sorted order with their inodes beside them: two tuples, not a pair per child (at 256
    HCAs the pairs would take 3 MiB)."""

    inode: Inode
    parent: Inode
    node: Node
    names: tuple[str, ...] = ()
    inodes: tuple[Inode, ...] = ()
    mtime_ns: int = 0

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def children(self) -> tuple[tuple[str, Inode], ...]:
        """(name, inode) of each child, in name order."""
        return tuple(zip(self.names, self.inodes, strict=True))

    @property
    def mode(self) -> int:
        node = self.node
        if isinstance(node, Dir):
            return stat.S_IFDIR | node.mode
        if isinstance(node, Symlink):
            return stat.S_IFLNK | 0o777
        if isinstance(node, CharDevice):
            return stat.S_IFCHR | node.mode
        return stat.S_IFREG | node.mode


class TreeError(ValueError):
    """Two surfaces described the same path, or a node has no parent directory."""


# What one surface described for a build: the inputs it was computed from, and its nodes.
Part = tuple[object, tuple[Node, ...]]


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Tree:
    """An immutable snapshot: inode -> Entry. A name is looked up in its parent's sorted
    children (no second index: at 256 HCAs one would cost 5 MiB). ``dynamic_parents`` are the
    directories holding files whose content changes with time (IB counters, ...). ``parts``
    keeps what each surface described, so the next build can reuse what did not change.
    A tree ``patch`` made keeps which tree it patched (not alive through it) and the entries
    it replaced: all that can differ from it (``tree.diff``)."""

    generation: int
    entries: dict[Inode, Entry]
    dynamic_parents: frozenset[Inode] = field(compare=False)
    parts: dict[str, Part] = field(default_factory=dict, compare=False)
    patched: tuple[weakref.ref[Tree], tuple[Inode, ...]] | None = field(default=None,
                                                                           compare=False)

    def replaced(self, since: Tree) -> tuple[Inode, ...] | None:
        """The only entries that may differ from ``since``'s, if this tree patched it (the
        same paths throughout); None if it did not."""
        if self.patched is None or self.patched[0]() is not since:
            return None
        return self.patched[1]

    def lookup(self, parent: int, name: str) -> Entry | None:
        entry = self.entries.get(Inode(parent))
        if entry is None:
            return None
        names = entry.names
        i = bisect.bisect_left(names, name)
        return self.entries[entry.inodes[i]] if i < len(names) and names[i] == name else None

    def get(self, inode: int) -> Entry | None:
        return self.entries.get(Inode(inode))

    def resolve(self, path: str) -> Entry | None:
        """The entry at a mount-relative path, without following symlinks."""
        entry = self.entries[ROOT_INODE]
        for part in filter(None, path.split("/")):
            found = self.lookup(entry.inode, part)
            if found is None:
                return None
            entry = found
        return entry

    def walk(self) -> Iterable[tuple[str, Entry]]:
        """Every (path, entry), parents before children, siblings in name order."""
        stack: list[tuple[str, Entry]] = [("", self.entries[ROOT_INODE])]
        while stack:
            path, entry = stack.pop()
            yield path, entry
            for name, ino in zip(reversed(entry.names), reversed(entry.inodes), strict=True):
                stack.append((f"{path}/{name}" if path else name, self.entries[ino]))


def patch(previous: Tree, changes: Sequence[tuple[Sequence[Node], Sequence[Node]]],
          generation: int, mtime_ns: int, parts: dict[str, Part]) -> Tree | None:
    """``previous`` with changed nodes replaced in place: what a swap that changes content but
    no path costs (a firmware version, a rate, a port's state). ``changes`` pairs each changed
    surface's old and new nodes. None when a path comes or goes or changes kind, or a node
    is not the one the tree holds at its path: then the tree must be built whole."""
    entries = dict(previous.entries)
    replaced: list[Inode] = []
    kinds_kept = True
    for old_nodes, new_nodes in changes:
        if len(old_nodes) != len(new_nodes):
            return None
        for a, b in zip(old_nodes, new_nodes, strict=True):
            if a.name != b.name or a.directory != b.directory or type(a) is not type(b):
                return None
            if a is b or a == b:  # (a surface may reuse the very node)
                continue
            ino = inode_of(b.path, _kind(b))
            entry = entries.get(ino)
            if entry is None or entry.node != a:
                return None
            if isinstance(a, Dir) and isinstance(b, Dir) and a.merge != b.merge:  # (implied kids)
                return None
            kinds_kept &= not isinstance(a, File) or a.dynamic == b.dynamic  # type: ignore[union-attr]
            entries[ino] = Entry(ino, entry.parent, b, entry.names, entry.inodes, mtime_ns)
            replaced.append(ino)
    # (with no file turned static or dynamic, the same directories hold dynamic files)
    dynamic = previous.dynamic_parents if kinds_kept else dynamic_parents(entries)
    return Tree(generation, entries, dynamic, parts, (weakref.ref(previous), tuple(replaced)))


def build(nodes: Iterable[Node], generation: int, mtime_ns: int,
          previous: Tree | None = None, parts: dict[str, Part] | None = None) -> Tree:
    """Assemble nodes into a Tree. Parent directories named by a path but not described are
    created with mode 0755; below a merged directory they merge the host's of their name
    unless it hides that name. Entries equal to ``previous``'s keep their mtime; new or changed
    ones get ``mtime_ns``. Raises ``TreeError`` on a duplicate path."""
    # Nodes by their directory's path and their name, strings the nodes share: a whole path
    # is made only to hash it. (At 256 HCAs a dict of 55,527 whole paths, alive to the end of
    # the build, raised the daemon's resident memory for good by what it took at its peak.)
    root = Dir("")
    below: dict[str, dict[str, Node]] = {}
    implied: set[str] = set()  # directories made because a deeper node named them
    for node in nodes:
        directory, name = node.directory, node.name
        if not name:
            raise TreeError("two surfaces describe ''")
        siblings = below.get(directory)
        if siblings is None:
            siblings = below[directory] = {}
            _imply(directory, below, implied)
        if name in siblings:
            path = node.path
            if path not in implied:
                raise TreeError(f"two surfaces describe {path!r}")
            implied.discard(path)
        siblings[name] = node
    for path in sorted(implied):  # parents first
        above, _, name = path.rpartition("/")
        outer = _at(above, below, root)
        if isinstance(outer, Dir) and outer.merge is not None and not outer.hides(name):
            # sys/devices/virtual/dmi keeps the host's other virtual devices beside it
            below[above][name] = Dir(path, merge=f"{outer.merge}/{name}".lstrip("/"))
    before = previous.entries if previous else {}
    kids: dict[Inode, tuple[tuple[str, ...], tuple[Inode, ...]]] = {}  # below each directory
    parents: list[tuple[Inode, dict[str, Node]]] = []
    same: set[Inode] = set()  # directories whose children are the last tree's, node for node
    for directory, siblings in below.items():
        if not isinstance(_at(directory, below, root), Dir):
            child = f"{directory}/{next(iter(siblings))}"
            raise TreeError(f"{child!r} is below {directory!r}, which is not a directory")
        names = tuple(sorted(siblings))
        parent = inode_of(directory, "d")
        parents.append((parent, siblings))
        old = before.get(parent)
        kept = _kept(old, siblings, before) if old is not None and old.names == names else None
        if old is not None and kept is not None:
            kids[parent] = (names, old.inodes)  # the same names of the same kinds: their inodes
            if kept:
                same.add(parent)
            continue
        kids[parent] = (names, tuple(
            inode_of(f"{directory}/{name}" if directory else name, _kind(siblings[name]))
            for name in names))
    entries: dict[Inode, Entry] = {}

    def add(ino: Inode, parent: Inode, node: Node) -> None:
        names, inos = kids.get(ino, ((), ()))
        old = before.get(ino)
        if old is not None and old.names == names and old.inodes == inos and \
                (old.node is node or old.node == node):
            # (a surface not computed again hands back its nodes themselves)
            entries[ino] = old
            return
        entries[ino] = Entry(ino, parent, node, names, inos, mtime_ns)

    add(ROOT_INODE, ROOT_INODE, root)
    count = 1
    for parent, siblings in parents:
        names, inos = kids[parent]
        count += len(inos)
        if parent in same:  # the files as they were; each directory by its own listing
            for name, ino in zip(names, inos, strict=True):
                if ino in kids:
                    add(ino, parent, siblings[name])
                else:
                    entries[ino] = before[ino]
            continue
        for name, ino in zip(names, inos, strict=True):
            add(ino, parent, siblings[name])
    if len(entries) != count:  # two paths hashed to one inode number
        raise TreeError("inode collision between two paths")
    return Tree(generation, entries, dynamic_parents(entries), parts or {})


def _kept(old: Entry, siblings: dict[str, Node], before: dict[Inode, Entry]) -> bool | None:
    """Whether each child ``old`` lists is the node of its name now (True), or of the same
    kind (False: its inode, which hashes the kind with the path, is the same); None when one
    is of another kind."""
    nodes = True
    for name, ino in zip(old.names, old.inodes, strict=True):
        child, node = before.get(ino), siblings[name]
        if child is None:
            return None
        if child.node is not node:
            if _kind(child.node) != _kind(node):
                return None
            nodes = False
    return nodes


def dynamic_parents(entries: dict[Inode, Entry]) -> frozenset[Inode]:
    """The directories holding files whose content changes with time."""
    return frozenset(e.parent for e in entries.values()
                     if isinstance(e.node, File) and e.node.dynamic)


def _at(path: str, below: dict[str, dict[str, Node]], root: Dir) -> Node:
    if not path:
        return root
    directory, _, name = path.rpartition("/")
    return below[directory][name]


def _imply(directory: str, below: dict[str, dict[str, Node]], implied: set[str]) -> None:
    """Make ``directory`` and those above it that nothing described (yet)."""
    while directory:
        above, _, name = directory.rpartition("/")
        siblings = below.get(above)
        if siblings is None:
            siblings = below[above] = {}
        elif name in siblings:
            return
        siblings[name] = Dir(directory)
        implied.add(directory)
        directory = above
