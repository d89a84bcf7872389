"""How the kernel caches the view: two cache modes, chosen once (``mokkafs.fuse.cache_mode``),
each an object the handlers call for what differs between them.

- ``no-open`` (``NoOpen``): ``open`` and ``opendir`` answer ENOSYS, so the kernel stops sending
  OPEN, RELEASE, OPENDIR and RELEASEDIR for the connection, keeps every file's pages and every
  directory's listing in its caches, and (with FUSE_CAP_CACHE_SYMLINKS) every link's target.
  Steady-state reads never reach the daemon. Freshness rests on attributes alone: exact sizes,
  an mtime that changes when content changes (the kernel's auto_inval_data drops pages then),
  attribute timeouts no longer than a content's allowed staleness, and invalidation on swaps.
  Content the tree does not fix (counters, the host's sysfs) is described by a snapshot taken
  when its attributes are asked for (``mokkafs.fuse.snapshots``); the READ that follows serves
  that same snapshot. A host attribute not every user may read has none: it reports 4096.
  Stock pyfuse3 cannot serve it: its read and readdir get the file handle, which is 0 in
  this mode; ``native/pyfuse3/pass-inode-when-no-open.patch`` passes the inode (its
  write-up, and how to install it: ``native/pyfuse3/README.md``).
- ``keep-cache`` (``KeepCache``): every open reaches the daemon, which takes a per-open snapshot
  (``mokkafs.fuse.handles``) and answers ``direct_io``: every read is served from the handle's
  snapshot, never bounded by a size the kernel holds. Works with any pyfuse3.
"""

from __future__ import annotations

import abc
import errno
import logging
import os

import pyfuse3

from mokkafs.clock import SleepUntil
from mokkafs.fuse import attrs
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.handles import FileHandle, Handles
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.passthrough import HOST_TIMEOUT, HostNode
from mokkafs.fuse.rounds import PUSHED_TIMEOUT, Rounds
from mokkafs.fuse.snapshots import Snapshots
from mokkafs.fuse.view import Item, View
from mokkafs.host.netns import OWN
from mokkafs.host.sysfs import is_private
from mokkafs.tree.build import Entry, Tree
from mokkafs.tree.nodes import Dir, File

log = logging.getLogger(__name__)

def serving(mode: CacheMode, view: View, kernel: Invalidator | None = None) -> Serving:
    """The mode's handlers; ``kernel``, where no-open mode may put fresh content."""
    return NoOpen(view, kernel=kernel) if mode is CacheMode.NO_OPEN else KeepCache(view)


class Serving(abc.ABC):
    """What the two modes share; subclasses answer what differs."""

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


class NoOpen(Serving):
    """Dynamic files in directories of their own (a port's counters) are kept fresh in the
    kernel's page cache by rounds (``mokkafs.fuse.rounds``): the entry of their unit's
    trigger (an IB port's directory, a ``power/`` directory) expires at their next step (a
    second on, for a unit read every step, which rounds push ahead), and its LOOKUP refreshes
    them all; other dynamic files expire one by one."""

    mode = CacheMode.NO_OPEN
    caches_symlinks = True  # read by patched pyfuse3 at FUSE_INIT

    def __init__(self, view: View, snapshots: Snapshots | None = None,
                 kernel: Invalidator | None = None) -> None:
        super().__init__(view)
        self.snapshots = snapshots or Snapshots()  # what the kernel was told, per inode
        # where fresh content of dynamic files is put (None: each refreshes on its own)
        self.rounds = Rounds(self.snapshots, kernel) if kernel is not None else None
        # A static file's content as of the last attributes the kernel was given (its size is
        # what the kernel bounds reads by), kept until the kernel asks again or forgets it.
        self.told: dict[int, bytes] = {}

    def entry_attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        """As a listing gives them: nothing is computed. A dynamic file's attributes expire at
        once, so the kernel asks (``attributes``) before it reads: listing a directory of
        counters computes none of them, and one that fails cannot fail the listing."""
        node, timeout = entry.node, self.view.timeout
        if isinstance(node, File) and node.dynamic and not node.error:
            return attrs.of_entry(entry, timeout, snapshot=self.snapshots.get(entry.inode),
                                  attr_timeout=0.0)
        if self.rounds is not None and self.rounds.keeps(tree, entry):
            # Listed, not looked up: no round ran for it, so the next walk must ask.
            return attrs.of_entry(entry, 0.0, attr_timeout=self._dir_timeout(tree, entry))
        if self.rounds is not None and self.rounds.guards(tree, entry):
            return attrs.of_entry(entry, timeout,
                                  attr_timeout=min(self.rounds.dir_timeout, timeout))
        if isinstance(node, Dir) and node.merge is not None:
            # Its listing includes the host's, which changes without the tree: the mtime the
            # kernel checks its cached listing against follows a snapshot of the names.
            return attrs.of_entry(entry, min(timeout, HOST_TIMEOUT),
                                  snapshot=self.snapshots.get(entry.inode))
        if isinstance(node, File) and isinstance(node.content, bytes) and not node.error:
            self.told[entry.inode] = node.content
        return attrs.of_entry(entry, timeout)

    async def attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        node, host = entry.node, self.view.host
        if isinstance(node, File) and node.dynamic and not node.error:
            if self.rounds is not None and self.rounds.pushed(tree, entry):
                async with self.rounds.lock:  # not while a round gives the kernel its bytes
                    snap = self.snapshots.take(entry.inode, node.read(self.view.clock()),
                                               pinned=True)
                return attrs.of_entry(entry, self.view.timeout, snapshot=snap,
                                      attr_timeout=min(PUSHED_TIMEOUT, self.view.timeout))
            # Cached until the content's next step, so no reader sees it older than that.
            now = self.view.clock()
            snap = self.snapshots.take(entry.inode, node.read(now), pinned=True)
            return attrs.of_entry(entry, self.view.timeout, snapshot=snap,
                                  attr_timeout=min(node.fresh_for(now), self.view.timeout))
        if self.rounds is not None and self.rounds.keeps(tree, entry):
            # Its entry lasts until the step the round computed ends (not the one it ended
            # in), or, for a hot unit, as long as rounds push ahead of its readers.
            until = await self.rounds.refresh(tree, entry, self.view.clock())
            left = max(0.0, until - self.view.clock())
            return attrs.of_entry(entry, min(left, self.view.timeout),
                                  attr_timeout=self._dir_timeout(tree, entry))
        if self.rounds is not None and self.rounds.guards(tree, entry):
            await self.rounds.catch_up(tree, entry, self.view.clock())
            return self.entry_attributes(tree, entry)
        if host is not None and isinstance(node, Dir) and node.merge is not None:
            names = await self.view.on_host(host.listdir_merged, node.merge, OWN)
            mine = list(entry.names)
            self.snapshots.take(entry.inode, "\0".join(mine + names).encode())
        return self.entry_attributes(tree, entry)

    def listed_host_attributes(self, node: HostNode,
                               st: os.stat_result) -> pyfuse3.EntryAttributes:
        if is_private(st):
            return self._private(node, st)
        return attrs.of_host(node.inode, st, node.timeout, self.snapshots.get(node.inode))

    def _private(self, node: HostNode, st: os.stat_result) -> pyfuse3.EntryAttributes:
        """A host attribute not every user may read: 4096, never read for a stat, and its
        attributes never cached. A permitted reader's short READ shrinks the size the kernel
        holds to the real length; the next stat, whoever asks, must see 4096 again."""
        self.snapshots.forget(node.inode)  # one taken while it was for everyone
        return attrs.of_host(node.inode, st, node.timeout, attr_timeout=0.0)

    def _dir_timeout(self, tree: Tree, directory: Entry) -> float:
        """The attribute timeout of a directory: short for one rounds keep the files of, so a
        reader below its unit's trigger asks for it, and with it for fresh content."""
        if self.rounds is not None and self.rounds.guards(tree, directory):
            return min(self.rounds.dir_timeout, self.view.timeout)
        return self.view.timeout

    async def host_attributes(self, node: HostNode,
                              st: os.stat_result) -> pyfuse3.EntryAttributes:
        assert self.view.host is not None
        if is_private(st):
            return self._private(node, st)
        content = await self.view.on_host(self.view.host.content, node, st)
        snap = self.snapshots.take(node.inode, content) if content is not None else None
        return attrs.of_host(node.inode, st, node.timeout, snap)

    async def opendir(self, inode: int) -> FileHandle:
        raise pyfuse3.FUSEError(errno.ENOSYS)  # the kernel caches listings from now on

    async def entries(self, fh: int) -> list[Item]:
        """``fh`` is the directory's inode: no handle holds a listing."""
        tree = self.view.holder.tree
        return await self.listing(tree, fh, self.key_of(tree, fh))

    def releasedir(self, fh: int) -> None:
        pass

    async def open(self, inode: int, flags: int) -> pyfuse3.FileInfo:
        raise pyfuse3.FUSEError(errno.ENOSYS)  # the kernel keeps pages from now on

    async def read(self, fh: int, off: int, size: int) -> bytes:
        """``fh`` is the inode. The content the kernel was last told the size of, else the
        content now. For a static file that is the one of its last attributes: between a
        swap and its invalidation the kernel holds the old size, and the new bytes would be
        cut to it (or padded with NULs); it asks again before it reads past the swap."""
        entry = self.view.holder.tree.get(fh)
        if entry is not None:
            node = entry.node
            if not isinstance(node, File):
                raise pyfuse3.FUSEError(errno.EISDIR if isinstance(node, Dir) else errno.EINVAL)
            if node.error:
                raise pyfuse3.FUSEError(node.error)
            if isinstance(node.content, bytes):
                return self.told.get(fh, node.content)[off:off + size]
        snap = self.snapshots.get(fh)
        if snap is not None:
            return snap.content[off:off + size]
        if entry is not None:
            assert isinstance(entry.node, File)
            now = self.view.clock()
            return self.snapshots.take(fh, entry.node.read(now),
                                       pinned=True).content[off:off + size]
        # Neither the tree's nor the host's: a file a swap removed, read through a descriptor
        # opened before. Reading a removed sysfs attribute fails so.
        host, found = self.view.hosted(fh, missing=errno.ENODEV)
        return await self.view.on_host(host.read, found, size, off)

    def release(self, fh: int) -> None:
        pass

    def forget(self, inode: int) -> None:
        self.snapshots.forget(inode)  # the kernel dropped it: so can its snapshot
        self.told.pop(inode, None)

    async def background(self, sleep_until: SleepUntil) -> None:
        """Rounds run ahead of readers of hot units (``Rounds.run``)."""
        if self.rounds is not None:
            view = self.view
            await self.rounds.run(lambda: view.holder.tree, view.clock, sleep_until)


class KeepCache(Serving):
    mode = CacheMode.KEEP_CACHE

    def __init__(self, view: View) -> None:
        super().__init__(view)
        self.handles = Handles()

    async def opendir(self, inode: int) -> FileHandle:
        tree = self.view.holder.tree
        items = await self.listing(tree, inode, self.key_of(tree, inode))
        fh = self.handles.new()
        self.handles.dirs[fh] = (tree, items)
        return fh

    async def entries(self, fh: int) -> list[Item]:
        """The names the directory was opened with. Their attributes reach the kernel, which
        keeps them an hour: after a swap, the tree in force gives them, and names it lacks
        are left out (the kernel would make them entries again)."""
        listed, items = self.handles.dirs[FileHandle(fh)]
        tree = self.view.holder.tree
        if tree is not listed:
            fresh: list[Item] = []
            for name, given, host_node in items:
                if host_node is not None:  # the host's: its attributes time out in a second
                    fresh.append((name, given, host_node))
                elif (entry := tree.get(given.st_ino)) is not None:
                    fresh.append((name, self.entry_attributes(tree, entry), None))
            items = fresh
            self.handles.dirs[FileHandle(fh)] = (tree, items)
        return items

    def releasedir(self, fh: int) -> None:
        self.handles.dirs.pop(FileHandle(fh), None)

    async def open(self, inode: int, flags: int) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise pyfuse3.FUSEError(errno.EROFS)
        entry = self.view.holder.tree.get(inode)
        if entry is None:
            host, found = self.view.hosted(inode)
            fd = await self.view.on_host(host.open, found)
            fh = self.handles.new()
            self.handles.hosts[fh] = fd
            return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)
        node = entry.node
        if isinstance(node, Dir):
            raise pyfuse3.FUSEError(errno.EISDIR)
        if not isinstance(node, File):
            raise pyfuse3.FUSEError(errno.ELOOP)
        if node.error:
            raise pyfuse3.FUSEError(node.error)
        fh = self.handles.open_file(node.read(self.view.clock()))
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        fd = self.handles.hosts.get(FileHandle(fh))
        if fd is not None:
            return await self.view.on_host(os.pread, fd, size, off)
        try:
            data = self.handles.files[FileHandle(fh)]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None
        return data[off:off + size]

    def release(self, fh: int) -> None:
        fd = self.handles.hosts.pop(FileHandle(fh), None)
        if fd is not None:
            os.close(fd)
        self.handles.files.pop(FileHandle(fh), None)
