"""pyfuse3 ``Operations`` over the current ``Tree``.

Contract with the kernel:
- Read-only: the mount is ``ro``, so the kernel answers EROFS to every write, create, rename,
  unlink and setattr before a request reaches the daemon.
- Every reply sets its cache behaviour explicitly. Static files are opened with
  ``keep_cache`` and carry their exact size and the generation's mtime, so the page cache serves
  repeated reads and a swap (new mtime) drops it; dynamic files (counters) are ``direct_io``:
  every read reaches the daemon.
- Each open takes a snapshot of the content (``handles``): a reader sees one generation and one
  instant from its first byte to its last, whatever swaps happen meanwhile. Because such a
  reader may refill the page cache with old bytes after a swap invalidated it, an open of a
  file that still has (or had, since the last open) a handle on other bytes is answered
  without ``keep_cache``, which makes the kernel drop the file's pages there and then.
- Only ``FUSEError`` leaves a handler. Anything else is logged and answered with EIO for that
  request alone; pyfuse3 would otherwise end ``main()`` and with it the mount.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import pyfuse3

from mokkafs.tree.build import Entry, Tree
from mokkafs.tree.nodes import Dir, File, Symlink

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

DYNAMIC_SIZE = 4096  # what sysfs reports for every text attribute


class TreeHolder:
    """The one reference a swap assigns. Readers take ``tree`` once per request."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree


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
            self.failures += 1
            log.exception("%s failed; answering EIO", name)
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            self.observe(name, time.perf_counter() - start)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


class Operations(pyfuse3.Operations):
    """Serve ``holder.tree``. ``clock`` gives the time dynamic files are rendered at."""

    def __init__(self, holder: TreeHolder, *, timeout: float = 60.0,
                 clock: Callable[[], float] = time.monotonic,
                 observe: Observer = _ignore) -> None:
        super().__init__()
        self.holder = holder
        self.timeout = timeout
        self.clock = clock
        self.observe = observe
        self.handles: dict[int, tuple[int, bytes]] = {}  # fh -> (inode, snapshot)
        self.open_handles: dict[int, set[int]] = {}  # inode -> its open fhs
        self.stale_pages: set[int] = set()  # inodes whose pages may hold other bytes
        self.dir_handles: dict[int, tuple[Tree, tuple[tuple[str, int], ...]]] = {}
        self._next_fh = itertools.count(1)
        self.failures = 0

    # -- attributes ------------------------------------------------------------------------

    def attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        attrs = pyfuse3.EntryAttributes()
        node = entry.node
        attrs.st_ino = entry.inode
        attrs.generation = 0
        attrs.entry_timeout = self.timeout
        attrs.attr_timeout = self.timeout
        attrs.st_mode = entry.mode
        attrs.st_nlink = 2 if isinstance(node, Dir) else 1
        attrs.st_uid = 0
        attrs.st_gid = 0
        mtime = entry.mtime_ns
        if isinstance(node, File):
            if isinstance(node.content, bytes):
                attrs.st_size = len(node.content)
            else:
                attrs.st_size = DYNAMIC_SIZE
                mtime = time.time_ns()
        elif isinstance(node, Symlink):
            attrs.st_size = len(node.target.encode())
        attrs.st_blksize = 4096
        attrs.st_blocks = (attrs.st_size + 511) // 512
        attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = mtime
        return attrs

    def _entry(self, tree: Tree, inode: int) -> Entry:
        entry = tree.get(inode)
        if entry is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return entry

    # -- lookups ---------------------------------------------------------------------------

    @guarded
    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        tree = self.holder.tree
        entry = tree.lookup(parent_inode, os.fsdecode(name))
        if entry is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self.attributes(tree, entry)

    @guarded
    async def getattr(self, inode: int,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        tree = self.holder.tree
        return self.attributes(tree, self._entry(tree, inode))

    @guarded
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        node = self._entry(self.holder.tree, inode).node
        if not isinstance(node, Symlink):
            raise pyfuse3.FUSEError(errno.EINVAL)
        return os.fsencode(node.target)

    # -- directories -----------------------------------------------------------------------

    @guarded
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        tree = self.holder.tree
        entry = self._entry(tree, inode)
        if not isinstance(entry.node, Dir):
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        fh = next(self._next_fh)
        self.dir_handles[fh] = (tree, entry.children)
        return fh

    @guarded
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        tree, children = self.dir_handles[fh]
        for offset in range(start_id, len(children)):
            name, inode = children[offset]
            attrs = self.attributes(tree, tree.entries[inode])
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attrs, offset + 1):
                break

    @guarded
    async def releasedir(self, fh: int) -> None:
        self.dir_handles.pop(fh, None)

    # -- files -----------------------------------------------------------------------------

    @guarded
    async def open(self, inode: int, flags: int,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self._entry(self.holder.tree, inode).node
        if isinstance(node, Dir):
            raise pyfuse3.FUSEError(errno.EISDIR)
        if not isinstance(node, File):
            raise pyfuse3.FUSEError(errno.ELOOP)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise pyfuse3.FUSEError(errno.EROFS)
        if node.error:
            raise pyfuse3.FUSEError(node.error)
        fh = next(self._next_fh)
        content = node.read(self.clock())
        others = self.open_handles.setdefault(inode, set())
        stale = inode in self.stale_pages or any(self.handles[h][1] != content for h in others)
        self.stale_pages.discard(inode)
        self.handles[fh] = (inode, content)
        others.add(fh)
        if node.dynamic:
            return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)
        return pyfuse3.FileInfo(fh=fh, direct_io=False, keep_cache=not stale)

    @guarded
    async def read(self, fh: int, off: int, size: int) -> bytes:
        try:
            _, data = self.handles[fh]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None
        return data[off:off + size]

    @guarded
    async def release(self, fh: int) -> None:
        inode, content = self.handles.pop(fh)
        others = self.open_handles[inode]
        others.discard(fh)
        if not others:
            del self.open_handles[inode]
        entry = self.holder.tree.get(inode)
        node = entry.node if entry else None
        if isinstance(node, File) and node.content != content and not node.dynamic:
            self.stale_pages.add(inode)  # this handle may have cached bytes of an older tree

    @guarded
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        stats = pyfuse3.StatvfsData()
        stats.f_bsize = stats.f_frsize = 4096
        stats.f_files = len(self.holder.tree.entries)
        stats.f_namemax = 255
        return stats


def mount_options(extra: Sequence[str] = ()) -> set[str]:
    """Options for ``pyfuse3.init``: read-only, kernel-checked modes, visible to every uid."""
    opts = set(pyfuse3.default_options)  # default_permissions
    opts |= {"fsname=mokkafs", "subtype=mokkafs", "allow_other", "ro"}
    opts |= set(extra)
    return opts
