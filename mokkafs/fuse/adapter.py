"""pyfuse3 ``Operations`` over the current ``Tree``.

Contract with the kernel:
- Read-only: the mount is ``ro``, so the kernel answers EROFS to every write, create, rename,
  unlink and setattr before a request reaches the daemon.
- Static files carry their exact size and the mtime of the build that last changed them, so
  page caches serve repeated reads and a swap (new mtime, plus invalidation) drops them.
- Two cache modes (``mokkafs.fuse.modes``):
  - no-open: ``open``/``opendir`` answer ENOSYS and the kernel serves files, listings and link
    targets from its caches; ``read``/``readdir`` get the inode (patched pyfuse3). Content the
    tree does not fix (counters, the host's sysfs) is described by a snapshot taken when its
    attributes are asked for (``mokkafs.fuse.snapshots``), with attribute timeouts no longer
    than its allowed staleness.
  - keep-cache: each open takes a snapshot of the content (``handles``), so a reader sees one
    generation and one instant from its first byte to its last. Static files are opened with
    ``keep_cache``, dynamic ones ``direct_io``. Because a reader may refill the page cache with
    old bytes after a swap invalidated it, an open of a file that still has (or had, since the
    last open) a handle on other bytes is answered without ``keep_cache``, which makes the
    kernel drop the file's pages there and then.
- Beneath directories that merge the host's sysfs (``Dir.merge``), names the tree does not have
  are the host's, served by ``mokkafs.fuse.passthrough`` at request time.
- Only ``FUSEError`` leaves a handler. Anything else is logged and answered with EIO for that
  request alone; pyfuse3 would otherwise end ``main()`` and with it the mount.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import itertools
import logging
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import pyfuse3
import trio

from mokkafs.fuse.modes import CacheMode
from mokkafs.fuse.passthrough import HOST_TIMEOUT, HostNode, HostView
from mokkafs.fuse.snapshots import Snapshot, Snapshots
from mokkafs.tree.build import Entry, Tree
from mokkafs.tree.nodes import CharDevice, Dir, File, Symlink

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
                 observe: Observer = _ignore, host: HostView | None = None,
                 mode: CacheMode = CacheMode.KEEP_CACHE) -> None:
        super().__init__()
        self.holder = holder
        self.no_open = mode is CacheMode.NO_OPEN
        self.enable_symlink_cache = self.no_open  # read by patched pyfuse3 at FUSE_INIT
        self.snapshots = Snapshots()  # no-open: what the kernel was told, per inode
        self.host = host
        self.timeout = timeout
        self.clock = clock
        self.observe = observe
        self.handles: dict[int, tuple[int, bytes]] = {}  # fh -> (inode, snapshot)
        self.open_handles: dict[int, set[int]] = {}  # inode -> its open fhs
        self.stale_pages: set[int] = set()  # inodes whose pages may hold other bytes
        self.host_handles: dict[int, int] = {}  # fh -> host file descriptor
        self.dir_handles: dict[int, list[tuple[str, pyfuse3.EntryAttributes]]] = {}
        self._next_fh = itertools.count(1)

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
            if node.error:  # as sysfs says; not 0, or a no-open read would never ask us
                attrs.st_size = DYNAMIC_SIZE
            elif isinstance(node.content, bytes):
                attrs.st_size = len(node.content)
            elif self.no_open:
                now = self.clock()
                snap = self.snapshots.take(entry.inode, node.read(now))
                attrs.st_size, mtime = len(snap.content), snap.mtime_ns
                # Cached until the content's next step, so no reader sees it older than that.
                attrs.attr_timeout = min(node.fresh_for(now), self.timeout)
            else:
                attrs.st_size = DYNAMIC_SIZE
                mtime = time.time_ns()
        elif isinstance(node, Dir) and node.merge is not None and self.no_open:
            # Its listing includes the host's, which changes without the tree: the mtime the
            # kernel checks its cached listing against follows a snapshot of the names.
            listed = self.snapshots.get(entry.inode)
            mtime = listed.mtime_ns if listed else mtime
            attrs.entry_timeout = attrs.attr_timeout = min(self.timeout, HOST_TIMEOUT)
        elif isinstance(node, Symlink):
            attrs.st_size = len(node.target.encode())
        elif isinstance(node, CharDevice):
            attrs.st_rdev = os.makedev(node.major, node.minor)
        attrs.st_blksize = 4096
        attrs.st_blocks = (attrs.st_size + 511) // 512
        attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = mtime
        return attrs

    def _entry(self, tree: Tree, inode: int) -> Entry:
        entry = tree.get(inode)
        if entry is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return entry

    async def fresh_attributes(self, tree: Tree, entry: Entry) -> pyfuse3.EntryAttributes:
        """``attributes``, after (no-open) a new snapshot of a merged directory's names: the
        tree's and the host's (a listdir; their attributes are not needed to see a change)."""
        node = entry.node
        if self.no_open and self.host and isinstance(node, Dir) and node.merge is not None:
            host = await trio.to_thread.run_sync(self.host.listdir_in, node.merge,
                                                 self.host.netns.host_sysfs)
            names = [name for name, _ in entry.children] + host
            self.snapshots.take(entry.inode, "\0".join(names).encode())
        return self.attributes(tree, entry)

    async def host_attributes(self, node: HostNode,
                              st: os.stat_result) -> pyfuse3.EntryAttributes:
        """The host node's attributes; in no-open mode from a new snapshot of its content."""
        assert self.host is not None
        snap: Snapshot | None = None
        if self.no_open:
            content = await trio.to_thread.run_sync(self.host.snapshot_source, node, st)
            if content is not None:
                snap = self.snapshots.take(node.inode, content)
        return self.host.attributes(node, st, snap)

    def _host_dir(self, tree: Tree, inode: int) -> tuple[str, tuple[str, ...]] | None:
        """(host path, hidden patterns) of a directory whose host entries show, or None."""
        entry = tree.get(inode)
        if entry is not None:
            node = entry.node
            if self.host and isinstance(node, Dir) and node.merge is not None:
                return node.merge, node.hide
            return None
        host = self.host.nodes.get(inode) if self.host else None
        return (host.rel, ()) if host else None

    def _host_node(self, inode: int) -> HostNode:
        node = self.host.nodes.get(inode) if self.host else None
        if node is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return node

    def _host_path(self, node: HostNode) -> str:
        assert self.host is not None
        path = self.host.path(node)
        if path is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return path

    # -- lookups ---------------------------------------------------------------------------

    @guarded
    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        tree = self.holder.tree
        text = os.fsdecode(name)
        entry = tree.lookup(parent_inode, text)
        if entry is not None:
            return await self.fresh_attributes(tree, entry)
        merged = self._host_dir(tree, parent_inode)
        if merged is None or self.host is None or text in (".", ".."):
            raise pyfuse3.FUSEError(errno.ENOENT)
        base, hide = merged
        if any(fnmatch.fnmatchcase(text, pattern) for pattern in hide):
            raise pyfuse3.FUSEError(errno.ENOENT)
        found = await trio.to_thread.run_sync(self.host.node, f"{base}/{text}".lstrip("/"),
                                              ctx.pid)
        if found is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.host_attributes(*found)

    @guarded
    async def getattr(self, inode: int,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        tree = self.holder.tree
        entry = tree.get(inode)
        if entry is not None:
            return await self.fresh_attributes(tree, entry)
        node = self._host_node(inode)
        assert self.host is not None
        st = self.host.lstat(node)
        if st is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.host_attributes(node, st)

    @guarded
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        entry = self.holder.tree.get(inode)
        if entry is None:
            return os.fsencode(os.readlink(self._host_path(self._host_node(inode))))
        if not isinstance(entry.node, Symlink):
            raise pyfuse3.FUSEError(errno.EINVAL)
        return os.fsencode(entry.node.target)

    # -- directories -----------------------------------------------------------------------

    async def listing(self, tree: Tree, inode: int, pid: int | None, ns: int,
                      ) -> list[tuple[str, pyfuse3.EntryAttributes]]:
        """A directory's entries in name order: the tree's, then (merged and host directories)
        the host's, as ``pid`` sees them, or (``pid`` None) from namespace ``ns``'s sysfs.
        Host I/O runs in a worker thread; a directory of the tree alone is listed here."""
        if self._host_dir(tree, inode) is None:
            return self._listing(tree, inode, pid, ns)
        return await trio.to_thread.run_sync(self._listing, tree, inode, pid, ns)

    def _listing(self, tree: Tree, inode: int, pid: int | None, ns: int,
                 ) -> list[tuple[str, pyfuse3.EntryAttributes]]:
        entry = tree.get(inode)
        if entry is not None and not isinstance(entry.node, Dir):
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        items = [] if entry is None else [
            (name, self.attributes(tree, tree.entries[ino])) for name, ino in entry.children]
        merged = self._host_dir(tree, inode)
        if merged is None or self.host is None:
            return items
        base, hide = merged
        taken = {name for name, _ in items}
        host = self.host
        if pid is not None:
            names = host.listdir(base, pid)
            find = functools.partial(host.node, pid=pid)
        else:
            root = host.netns.known(ns)
            names = host.listdir_in(base, root) if root is not None else []
            find = functools.partial(host.node_in, ns=ns)
        for name in names:
            if name in taken or any(fnmatch.fnmatchcase(name, p) for p in hide):
                continue
            found = find(f"{base}/{name}".lstrip("/"))
            if found is not None:
                node, st = found
                items.append((name, self.host.attributes(node, st,
                                                         self.snapshots.get(node.inode))))
        items.sort(key=lambda item: item[0])
        return items

    @guarded
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        if self.no_open:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # the kernel caches listings from now on
        tree = self.holder.tree
        if tree.get(inode) is None:
            self._host_node(inode)
        items = await self.listing(tree, inode, ctx.pid, 0)
        fh = next(self._next_fh)
        self.dir_handles[fh] = items
        return fh

    @guarded
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        if self.no_open:  # fh is the directory's inode; no handle holds a listing
            tree = self.holder.tree
            ns = 0
            if tree.get(fh) is None:
                ns = self._host_node(fh).ns
            items = await self.listing(tree, fh, None, ns)
        else:
            items = self.dir_handles[fh]
        for offset in range(start_id, len(items)):
            name, attrs = items[offset]
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attrs, offset + 1):
                break

    @guarded
    async def releasedir(self, fh: int) -> None:
        self.dir_handles.pop(fh, None)

    # -- files -----------------------------------------------------------------------------

    @guarded
    async def open(self, inode: int, flags: int,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        if self.no_open:
            raise pyfuse3.FUSEError(errno.ENOSYS)  # the kernel keeps pages from now on
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise pyfuse3.FUSEError(errno.EROFS)
        entry = self.holder.tree.get(inode)
        if entry is None:
            path = self._host_path(self._host_node(inode))
            try:
                fd = await trio.to_thread.run_sync(os.open, path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
            fh = next(self._next_fh)
            self.host_handles[fh] = fd
            return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)
        node = entry.node
        if isinstance(node, Dir):
            raise pyfuse3.FUSEError(errno.EISDIR)
        if not isinstance(node, File):
            raise pyfuse3.FUSEError(errno.ELOOP)
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
        if self.no_open:
            return await self._read_inode(fh, off, size)
        fd = self.host_handles.get(fh)
        if fd is not None:
            try:
                return await trio.to_thread.run_sync(os.pread, fd, size, off)
            except OSError as exc:
                raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        try:
            _, data = self.handles[fh]
        except KeyError:
            raise pyfuse3.FUSEError(errno.EBADF) from None
        return data[off:off + size]

    async def _read_inode(self, inode: int, off: int, size: int) -> bytes:
        """No-open read: the snapshot the kernel was last told the size of, else the content
        now (static tree files are always the latter)."""
        entry = self.holder.tree.get(inode)
        node = entry.node if entry is not None else None
        if node is not None and not isinstance(node, File):
            raise pyfuse3.FUSEError(errno.EISDIR if isinstance(node, Dir) else errno.EINVAL)
        if node is not None and node.error:
            raise pyfuse3.FUSEError(node.error)
        if node is not None and isinstance(node.content, bytes):
            return node.content[off:off + size]
        snap = self.snapshots.get(inode)
        if snap is not None:
            return snap.content[off:off + size]
        if node is not None:
            return self.snapshots.take(inode, node.read(self.clock())).content[off:off + size]
        path = self._host_path(self._host_node(inode))

        def pread() -> bytes:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return os.pread(fd, size, off)
            finally:
                os.close(fd)
        try:
            return await trio.to_thread.run_sync(pread)
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        # No reply is sent, so nothing may escape (cannot: forget never raises).
        for inode, _ in inode_list:  # the kernel dropped it: so can its snapshot
            self.snapshots.forget(inode)

    @guarded
    async def release(self, fh: int) -> None:
        fd = self.host_handles.pop(fh, None)
        if fd is not None:
            os.close(fd)
            return
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


def mount_options(fsname: str = "mokkafs") -> set[str]:
    """Options for ``pyfuse3.init``: read-only, kernel-checked modes, visible to every uid."""
    return set(pyfuse3.default_options) | {  # default_permissions
        f"fsname={fsname}", "subtype=mokkafs", "allow_other", "ro"}
