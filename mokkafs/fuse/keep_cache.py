"""The ``keep-cache`` cache mode (``KeepCache``): every open reaches the daemon.

- Each open takes a per-open copy of the content (``mokkafs.fuse.handles``).
- Every file is opened ``direct_io``: each read is served from the handle's copy, never bounded
  by a size the kernel holds.
- It works with any pyfuse3.
"""

from __future__ import annotations

import errno
import os

import pyfuse3

from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.handles import FileHandle, Handles
from mokkafs.fuse.policy import CachePolicy
from mokkafs.fuse.view import Item, View
from mokkafs.tree.nodes import Dir, File


class KeepCache(CachePolicy):
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
        fh = self.handles.open_file(node.read(self.view.clock()))  # the per-open copy
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
