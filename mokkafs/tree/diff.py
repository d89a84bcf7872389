"""Tree x Tree -> what the kernel must forget after a swap.

Inode numbers are stable per (kind, path), so entries match by inode:
- ``changed``: in both, with other content, mode, target or listing (their cached attributes
  and pages must go);
- ``removed``: gone, given as the top of each removed subtree (forgetting a directory's
  dentry drops everything below it), with the inode to report deleted: a file's or link's,
  never a directory's (see ``Invalidation``);
- ``added``: new, given as the top of each added subtree (a negative dentry may be cached),
  and directories that begin or cease to hold dynamic files (no-open mode gives their entries
  another timeout, which only a new LOOKUP can bring).

The kernel forgets them in an order that lets a reader see only more, never less, while a
swap is under way (``Invalidator.apply``): names that appear and directories that gain names
first, then files, then directories that lose names and names that go. So a reader that
reads ``cpu/online`` and then lists ``cpu/`` finds every CPU it named, growing or shrinking,
unless a whole swap that removes CPUs came between its two reads (as a hot-remove may on a
real node: a second read of ``online`` shows it).
"""

from __future__ import annotations

from dataclasses import dataclass

from mokkafs.tree.build import Inode, Tree
from mokkafs.tree.nodes import CharDevice, Dir, File


@dataclass(frozen=True)
class Invalidation:
    changed_data: tuple[Inode, ...]  # static files, links, directories: drop pages and attrs
    changed_attrs: tuple[Inode, ...]  # dynamic files and device nodes: attributes only
    # (parent inode, name, the inode the kernel is told was deleted, or 0). Never a
    # directory's: the kernel marks a deleted directory's inode dead for good, and the same
    # path brings the same inode number back (a GPU that returns), so a directory held open
    # or as a working directory across the two would stay empty. Its entry is dropped alone.
    removed: tuple[tuple[Inode, str, Inode | int], ...]
    added: tuple[tuple[Inode, str], ...]  # (parent inode, name)
    shrunk: tuple[Inode, ...] = ()  # directories that lose names: forgotten after files
    # Files with a write bit whose bytes changed: a writer may hold their pages until its
    # WRITE is answered, so their attributes go with the others and their pages last.
    writable: tuple[Inode, ...] = ()

    def __len__(self) -> int:
        return (len(self.changed_data) + len(self.changed_attrs) + len(self.removed)
                + len(self.added) + len(self.shrunk) + len(self.writable))


def diff(old: Tree, new: Tree) -> Invalidation:
    grown: list[Inode] = []  # directories that gain names (or only change): before files
    data: list[Inode] = []
    attrs: list[Inode] = []
    shrunk: list[Inode] = []
    writable: list[Inode] = []
    replaced = new.replaced(old)  # after a patch of ``old``, its few entries are all to look at
    for ino in new.entries if replaced is None else replaced:
        entry = new.entries[ino]
        before = old.entries.get(ino)
        if before is entry:  # a patched tree keeps every entry it did not change
            continue
        if before is None or (before.node == entry.node and before.names == entry.names
                              and before.inodes == entry.inodes):
            continue
        node = entry.node
        if (isinstance(node, File) and node.dynamic) or isinstance(node, CharDevice):
            attrs.append(ino)
        elif isinstance(node, Dir) and before.names != entry.names:
            (grown if set(before.names) <= set(entry.names) else shrunk).append(ino)
        elif isinstance(node, File) and node.mode & 0o222:
            writable.append(ino)
        else:  # bytes, a link target (cached in no-open mode) or a listing the kernel holds
            data.append(ino)
    removed: tuple[tuple[Inode, str, Inode | int], ...] = ()
    added: tuple[tuple[Inode, str], ...] = ()
    if replaced is None and old.entries.keys() != new.entries.keys():  # (never, after a patch)
        removed = tuple((e.parent, e.name, 0 if isinstance(e.node, Dir) else ino)
                        for ino, e in old.entries.items()
                        if ino not in new.entries and e.parent in new.entries)
        added = tuple((e.parent, e.name) for ino, e in new.entries.items()
                      if ino not in old.entries and e.parent in old.entries)
    turned = old.dynamic_parents ^ new.dynamic_parents
    added += tuple((new.entries[ino].parent, new.entries[ino].name) for ino in sorted(turned)
                   if ino in old.entries and ino in new.entries)
    return Invalidation((*grown, *data), tuple(attrs), removed, added, tuple(shrunk),
                        tuple(writable))
