"""The ``no-open`` cache mode (``NoOpen``): ``open`` and ``opendir`` answer ENOSYS.

- The kernel then stops sending OPEN, RELEASE, OPENDIR and RELEASEDIR for the connection.
- It keeps every file's pages and every directory's listing in its caches, and (with
  FUSE_CAP_CACHE_SYMLINKS) every link's target. Steady-state reads never reach the daemon.
- Freshness rests on attributes alone: exact sizes, an mtime that changes when content changes
  (the kernel's auto_inval_data drops pages then), attribute timeouts no longer than a
  content's allowed staleness, and invalidation on swaps.
- Content the tree does not fix (counters, the host's sysfs) is computed when its attributes
  are asked for, and recorded as told (``mokkafs.fuse.told``). The READ that follows serves
  that same content. A host attribute not every user may read has none: it reports 4096.
- Stock pyfuse3 cannot serve this mode: its read and readdir get the file handle, which is 0
  here. ``native/pyfuse3/pass-inode-when-no-open.patch`` passes the inode (its write-up, and
  how to install it: ``native/pyfuse3/README.md``).
"""

from __future__ import annotations

import errno
import os

import pyfuse3

from mokkafs.clock import SleepUntil
from mokkafs.fuse import attrs
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.handles import FileHandle
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.passthrough import HOST_TIMEOUT, HostNode
from mokkafs.fuse.policy import CachePolicy
from mokkafs.fuse.refresh import FRESH_FILE_TIMEOUT, Refresher
from mokkafs.fuse.told import ToldStore
from mokkafs.fuse.view import Item, View
from mokkafs.host.netns import OWN
from mokkafs.host.sysfs import is_private
from mokkafs.tree.build import Entry, Tree
from mokkafs.tree.nodes import Dir, File


class NoOpen(CachePolicy):
    """Dynamic files in directories of their own (a port's counters) are kept fresh in the
    kernel's page cache by refreshes (``mokkafs.fuse.refresh``): the entry of their unit's
    trigger (an IB port's directory, a ``power/`` directory) expires at their next step (a
    second on, for a unit read every step, which is refreshed ahead), and its LOOKUP
    refreshes them all; other dynamic files expire one by one."""

    mode = CacheMode.NO_OPEN
    caches_symlinks = True  # read by patched pyfuse3 at FUSE_INIT

    def __init__(self, view: View, told: ToldStore | None = None,
                 kernel: Invalidator | None = None) -> None:
        super().__init__(view)
        self.told = told or ToldStore()  # what the kernel was told, per inode
        # where fresh content of dynamic files is put (None: each file refreshes on its own)
        self.refresher = Refresher(self.told, kernel) if kernel is not None else None
        # A static file's content as of the last attributes the kernel was given (its size is
        # what the kernel bounds reads by), kept until the kernel asks again or forgets it.
        self.told_static: dict[int, bytes] = {}

    def prepare(self, tree: Tree) -> None:
        """The tree's caching units (``mokkafs.fuse.units``)."""
        if self.refresher is not None:
            self.refresher.prepare(tree)

    def entry_attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        """As a listing gives them: nothing is computed. A dynamic file's attributes expire at
        once, so the kernel asks (``attributes``) before it reads: listing a directory of
        counters computes none of them, and one that fails cannot fail the listing."""
        node, timeout = entry.node, self.view.timeout
        if isinstance(node, File) and node.dynamic and not node.error:
            return attrs.of_entry(entry, timeout, told=self.told.get(entry.inode),
                                  attr_timeout=0.0)
        if self.refresher is not None and self.refresher.is_trigger(tree, entry):
            # Listed, not looked up: no refresh ran for it, so the next walk must ask.
            return attrs.of_entry(entry, 0.0, attr_timeout=self._dir_timeout(tree, entry))
        if self.refresher is not None and self.refresher.is_stepped(tree, entry):
            return attrs.of_entry(entry, timeout,
                                  attr_timeout=min(self.refresher.dir_timeout, timeout))
        if isinstance(node, Dir) and node.merge is not None:
            # Its listing includes the host's, which changes without the tree: the mtime the
            # kernel checks its cached listing against follows the names last told.
            return attrs.of_entry(entry, min(timeout, HOST_TIMEOUT),
                                  told=self.told.get(entry.inode))
        if isinstance(node, File) and isinstance(node.content, bytes) and not node.error:
            self.told_static[entry.inode] = node.content
        return attrs.of_entry(entry, timeout)

    async def attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        node, host = entry.node, self.view.host
        if isinstance(node, File) and node.dynamic and not node.error:
            if self.refresher is not None and self.refresher.keeps_fresh(tree, entry):
                async with self.refresher.lock:  # not while a round gives the kernel its bytes
                    told = self.told.take(entry.inode, node.read(self.view.clock()),
                                          pinned=True)
                return attrs.of_entry(entry, self.view.timeout, told=told,
                                      attr_timeout=min(FRESH_FILE_TIMEOUT, self.view.timeout))
            # Cached until the content's next step, so no reader sees it older than that.
            now = self.view.clock()
            told = self.told.take(entry.inode, node.read(now), pinned=True)
            return attrs.of_entry(entry, self.view.timeout, told=told,
                                  attr_timeout=min(node.fresh_for(now), self.view.timeout))
        if self.refresher is not None and self.refresher.is_trigger(tree, entry):
            # Its entry lasts until the step the refresh computed ends (not the one it ended
            # in), or, for a hot unit, as long as it is refreshed ahead of its readers.
            until = await self.refresher.refresh(tree, entry, self.view.clock())
            left = max(0.0, until - self.view.clock())
            return attrs.of_entry(entry, min(left, self.view.timeout),
                                  attr_timeout=self._dir_timeout(tree, entry))
        if self.refresher is not None and self.refresher.is_stepped(tree, entry):
            await self.refresher.catch_up(tree, entry, self.view.clock())
            return self.entry_attributes(tree, entry)
        if host is not None and isinstance(node, Dir) and node.merge is not None:
            names = await self.view.on_host(host.listdir_merged, node.merge, OWN)
            mine = list(entry.names)
            self.told.take(entry.inode, "\0".join(mine + names).encode())
        return self.entry_attributes(tree, entry)

    def listed_host_attributes(self, node: HostNode,
                               st: os.stat_result) -> pyfuse3.EntryAttributes:
        if is_private(st):
            return self._private(node, st)
        return attrs.of_host(node.inode, st, node.timeout, self.told.get(node.inode))

    def _private(self, node: HostNode, st: os.stat_result) -> pyfuse3.EntryAttributes:
        """A host attribute not every user may read: 4096, never read for a stat, and its
        attributes never cached. A permitted reader's short READ shrinks the size the kernel
        holds to the real length; the next stat, whoever asks, must see 4096 again."""
        self.told.forget(node.inode)  # told while it was for everyone
        return attrs.of_host(node.inode, st, node.timeout, attr_timeout=0.0)

    def _dir_timeout(self, tree: Tree, directory: Entry) -> float:
        """The attribute timeout of a directory: short for one whose files refreshes keep, so a
        reader below its unit's trigger asks for it, and with it for fresh content."""
        if self.refresher is not None and self.refresher.is_stepped(tree, directory):
            return min(self.refresher.dir_timeout, self.view.timeout)
        return self.view.timeout

    async def host_attributes(self, node: HostNode,
                              st: os.stat_result) -> pyfuse3.EntryAttributes:
        assert self.view.host is not None
        if is_private(st):
            return self._private(node, st)
        content = await self.view.on_host(self.view.host.content, node, st)
        told = self.told.take(node.inode, content) if content is not None else None
        return attrs.of_host(node.inode, st, node.timeout, told)

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
                return self.told_static.get(fh, node.content)[off:off + size]
        told = self.told.get(fh)
        if told is not None:
            return told.content[off:off + size]
        if entry is not None:
            assert isinstance(entry.node, File)
            now = self.view.clock()
            return self.told.take(fh, entry.node.read(now), pinned=True).content[off:off + size]
        # Neither the tree's nor the host's: a file a swap removed, read through a descriptor
        # opened before. Reading a removed sysfs attribute fails so.
        host, found = self.view.hosted(fh, missing=errno.ENODEV)
        return await self.view.on_host(host.read, found, size, off)

    def release(self, fh: int) -> None:
        pass

    def forget(self, inode: int) -> None:
        self.told.forget(inode)  # the kernel dropped it: so can what it was told
        self.told_static.pop(inode, None)

    async def background(self, sleep_until: SleepUntil) -> None:
        """Hot units are refreshed ahead of their readers (``Refresher.run``)."""
        if self.refresher is not None:
            view = self.view
            await self.refresher.run(lambda: view.holder.tree, view.clock, sleep_until)
