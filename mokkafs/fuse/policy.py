"""What the two cache modes share (``mokkafs.fuse.no_open``, ``mokkafs.fuse.keep_cache``): the
base class the handlers call, and the listing of a directory, the tree's and the host's."""

from __future__ import annotations

import abc
import errno
import os

import pyfuse3

from mokkafs.clock import SleepUntil
from mokkafs.fuse import attrs
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.handles import FileHandle
from mokkafs.fuse.passthrough import HostNode
from mokkafs.fuse.view import Item, View
from mokkafs.host.netns import OWN
from mokkafs.state import State
from mokkafs.tree.assemble import Build
from mokkafs.tree.build import Entry, Tree
from mokkafs.tree.nodes import Dir


class CachePolicy(abc.ABC):
    """What the two cache modes share; subclasses answer what differs."""

    mode: CacheMode
    caches_symlinks = False

    def __init__(self, view: View) -> None:
        self.view = view

    def entry_attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        """A tree entry's attributes as a listing gives them (no I/O)."""
        return attrs.of_entry(entry, self.view.timeout)

    async def attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        """A tree entry's attributes for LOOKUP and GETATTR."""
        return self.entry_attributes(tree, entry)

    def listed_host_attributes(self, node: HostNode,
                               st: os.stat_result) -> pyfuse3.EntryAttributes:
        return attrs.of_host(node.inode, st, node.timeout)

    async def host_attributes(self, node: HostNode,
                              st: os.stat_result) -> pyfuse3.EntryAttributes:
        return self.listed_host_attributes(node, st)

    async def listing(self, tree: Tree, inode: int, key: int) -> list[Item]:
        """A directory's entries, the tree's and (merged and host directories) the host's
        from instance ``key``, in inode order: the order of the offsets READDIR gives them
        (``Operations.readdir``)."""
        host: list[tuple[str, HostNode, os.stat_result]] = []
        if self.view.merged(tree, inode) is not None:
            host = await self.view.on_host(self.view.host_entries, tree, inode, key)
            current = self.view.holder.tree
            if current is not tree:  # swapped meanwhile: list (and size) what serves now
                return await self.listing(current, inode, self.key_of(current, inode))
        entry = tree.get(inode)
        if entry is not None and not isinstance(entry.node, Dir):
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        items: list[Item] = [] if entry is None else [
            (name, self.entry_attributes(tree, tree.entries[ino]), None)
            for name, ino in zip(entry.names, entry.inodes, strict=True)]
        items += [(name, self.listed_host_attributes(node, st), node) for name, node, st in host]
        items.sort(key=lambda item: item[1].st_ino)
        return items

    def key_of(self, tree: Tree, inode: int) -> int:
        return OWN if tree.get(inode) is not None else self.view.host_node(inode).key

    def prepare(self, tree: Tree) -> None:  # noqa: B027  (most modes derive nothing)
        """Derive what the mode needs of a tree before it serves; in the swap's worker thread
        (``prepared``), so the FUSE loop does not."""

    def prepared(self, build: Build) -> Build:
        """``build``, then ``prepare`` of the tree it built: the swap's worker step."""
        def step(state: State, previous: Tree | None) -> tuple[Tree, dict[str, int]]:
            tree, counts = build(state, previous)
            self.prepare(tree)
            return tree, counts
        return step

    def forget(self, inode: int) -> None:  # noqa: B027  (most modes keep nothing per inode)
        """The kernel dropped ``inode``."""

    async def background(  # noqa: B027  (most modes run nothing)
            self, sleep_until: SleepUntil) -> None:
        """What the mode runs beside the FUSE loop, until cancelled."""

    @abc.abstractmethod
    async def opendir(self, inode: int) -> FileHandle: ...

    @abc.abstractmethod
    async def entries(self, fh: int) -> list[Item]: ...

    @abc.abstractmethod
    def releasedir(self, fh: int) -> None: ...

    @abc.abstractmethod
    async def open(self, inode: int, flags: int) -> pyfuse3.FileInfo: ...

    @abc.abstractmethod
    async def read(self, fh: int, off: int, size: int) -> bytes: ...

    @abc.abstractmethod
    def release(self, fh: int) -> None: ...
