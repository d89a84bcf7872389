"""pyfuse3 ``Operations`` over the current ``Tree``: the handlers, and nothing else.

Contract with the kernel:
- Read-only but for the files whose writes the view simulates (``mokkafs.fuse.writes``
  decides, and refuses every other change as sysfs does); a write goes to the ``Store`` the
  Operations are made with, as its file's key and its bytes.
- Static files carry their exact size and the mtime of the build that last changed them, so
  page caches serve repeated reads and a swap (new mtime, plus invalidation) drops them.
- What differs between the cache modes is asked of the cache policy (``mokkafs.fuse.policy``);
  what the view holds, of ``mokkafs.fuse.view``.
- Only ``FUSEError`` leaves a handler. Anything else is logged and answered with EIO for that
  request alone; pyfuse3 would otherwise end ``main()`` and with it the mount.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import pyfuse3

from mokkafs.fuse import attrs
from mokkafs.fuse.policy import CachePolicy
from mokkafs.fuse.view import View
from mokkafs.fuse.writes import Store, Writes
from mokkafs.tree.nodes import Symlink

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

Observer = Callable[[str, float], None]  # (operation, seconds) for every request


def _ignore(op: str, seconds: float) -> None:
    pass


Handler = Callable[Concatenate["Operations", P], Coroutine[Any, Any, R]]


def guarded(fn: Handler[P, R]) -> Handler[P, R]:
    """Let FUSEError through; turn any other exception into a logged EIO."""

    name = fn.__name__

    async def wrapper(self: Operations, /, *args: P.args, **kwargs: P.kwargs) -> R:
        start = time.perf_counter()
        try:
            return await fn(self, *args, **kwargs)
        except pyfuse3.FUSEError:
            raise
        except Exception:
            log.exception("%s failed; answering EIO", name)
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            self.observe(name, time.perf_counter() - start)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


class Operations(pyfuse3.Operations):
    def __init__(self, view: View, policy: CachePolicy, observe: Observer = _ignore,
                 store: Store | None = None) -> None:
        """``store``: where writes go (None: the mount takes none, as a read-only /sys)."""
        super().__init__()
        self.view = view
        self.policy = policy
        self.observe = observe
        self.enable_symlink_cache = policy.caches_symlinks  # read by patched pyfuse3
        self.enable_write_context = True  # patched pyfuse3: ``write`` gets the writer's context
        self.writes = Writes(view, store)

    @guarded
    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        tree = self.view.holder.tree
        text = os.fsdecode(name)
        entry = tree.lookup(parent_inode, text)
        if entry is not None:
            return await self.policy.attributes(tree, entry)
        found = await self.view.find(tree, parent_inode, text, ctx.pid)
        if found is None:
            if tree.get(parent_inode) is not None and self.view.merged(tree, parent_inode) \
                    is None and text not in (".", ".."):
                # Only a swap can add it, and a swap invalidates each name it adds: the kernel
                # may remember that it is absent (an st_ino of 0) for as long as it likes.
                return attrs.absent(self.view.timeout)
            raise pyfuse3.FUSEError(errno.ENOENT)
        reply = await self.policy.host_attributes(*found)
        assert self.view.host is not None
        self.view.host.remember(found[0])  # the reply counts as one lookup
        return reply

    @guarded
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        tree = self.view.holder.tree
        entry = tree.get(inode)
        if entry is not None:
            return await self.policy.attributes(tree, entry)
        host, node = self.view.hosted(inode)
        st = await self.view.on_host(host.lstat, node)
        return await self.policy.host_attributes(node, st)

    @guarded
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        entry = self.view.holder.tree.get(inode)
        if entry is None:
            host, node = self.view.hosted(inode)
            return os.fsencode(await self.view.on_host(host.readlink, node))
        if not isinstance(entry.node, Symlink):
            raise pyfuse3.FUSEError(errno.EINVAL)
        return os.fsencode(entry.node.target)

    @guarded
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        return await self.policy.opendir(inode)

    @guarded
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # Each entry's offset is its inode number, and entries come in that order (as kernfs
        # orders by name hash): a listing read in several calls resumes after the last entry
        # it was given even if a swap came between, so no name both generations hold is
        # skipped or given twice.
        items = await self.policy.entries(fh)
        first = bisect.bisect_right(items, start_id, key=lambda item: item[1].st_ino)
        for name, given, host_node in items[first:]:
            if not pyfuse3.readdir_reply(token, os.fsencode(name), given, given.st_ino):
                break
            if host_node is not None and self.view.host is not None:
                self.view.host.remember(host_node)  # each entry given counts as a lookup

    @guarded
    async def releasedir(self, fh: int) -> None:
        self.policy.releasedir(fh)

    @guarded
    async def open(self, inode: int, flags: int,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        # dev/kmsg's readers reach the kmsg mount over it (docs/kmsg.md), not this file.
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            return await self.writes.open(inode, flags, ctx)
        return await self.policy.open(inode, flags)

    @guarded
    async def read(self, fh: int, off: int, size: int) -> bytes:
        if self.writes.owns(fh):
            return await self.writes.read(fh, off, size)
        return await self.policy.read(fh, off, size)

    @guarded
    async def write(self, fh: int, off: int, buf: bytes,
                    ctx: pyfuse3.RequestContext | None = None) -> int:
        return await self.writes.write(fh, off, buf, ctx)

    @guarded
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        await self.writes.truncate(inode, fields, ctx)
        return await self.getattr(inode, ctx)

    @guarded
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext) -> tuple[pyfuse3.FileInfo,
                                                           pyfuse3.EntryAttributes]:
        raise await self.writes.refuse_create(ctx)

    @guarded
    async def mkdir(self, parent_inode: int, name: bytes, mode: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def link(self, inode: int, new_parent_inode: int, new_name: bytes,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        raise await self.writes.refuse_change(ctx)

    @guarded
    async def release(self, fh: int) -> None:
        if not self.writes.release(fh):
            self.policy.release(fh)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        # No reply is sent, so nothing may escape.
        try:
            for inode, count in inode_list:
                self.policy.forget(inode)
                if self.view.host is not None:
                    self.view.host.forget(inode, count)
        except Exception:
            log.exception("forget failed")

    @guarded
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        stats = pyfuse3.StatvfsData()
        stats.f_bsize = stats.f_frsize = 4096
        stats.f_files = len(self.view.holder.tree.entries)
        stats.f_namemax = 255
        return stats
