"""The FUSE side of writes: which opens for writing are allowed, and the write itself.

As sysfs: a file with a store the view simulates (its node carries the key the surface made
for it, ``File.store``) opens for writing (``O_WRONLY``, ``O_RDWR``, ``O_TRUNC``: truncation is
a no-op) and each ``write()`` is one store of the bytes it carries, at whatever offset. Writes
never cross this edge as paths: the edge forwards (key, bytes, who writes) to the ``Store``
the Operations were made with, and never looks inside the key. The write returns once the new
view is installed and the kernel's caches told (waiting for that at most a bound:
``mokkafs.serve.writes``), or fails with the store's errno. Every other file of the view
refuses to open for writing (EACCES, as kernfs refuses a file without a store method to root),
a create EACCES, and mkdir, unlink, rename, links and mode changes EPERM. The host's own files,
shown through, are a read-only /sys's: EROFS. A write through a descriptor of a file a swap
removed: ENODEV, as kernfs answers for an attribute removed while open.

Who may write: the mount is ``default_permissions``, so the kernel refuses a writer other than
the owner (root) with EACCES before the daemon hears of it; the daemon refuses it too (another
FUSE setting), and refuses a root without CAP_SYS_ADMIN in its effective set with EROFS: that
is a container without privileges, whose /sys is mounted read-only on a real node. The
writer's credentials come with its own request (``ctx.uid``, ``ctx.pid``, in the daemon's PID
namespace), its capabilities from ``/proc/<pid>/status`` (FUSE passes no capabilities), read
in a worker thread, never on the event loop: with the OPEN in keep-cache mode, with the WRITE
itself in no-open mode, where the kernel sends no OPEN (the project's pyfuse3 patch passes the
WRITE's context: ``Operations.enable_write_context``). A neighbour holding the same file open
changes nothing, and no other process is looked at.
"""

from __future__ import annotations

import errno
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyfuse3
import trio

from mokkafs.fuse.view import View
from mokkafs.model.sysfs import StoreKey
from mokkafs.tree.nodes import Dir, File

log = logging.getLogger(__name__)

CAP_SYS_ADMIN = 21
FIRST_HANDLE = 1 << 63  # above every inode number (63 bits) and every handle of the modes
PROC = Path("/proc")


@dataclass(frozen=True)
class Caller:
    """Who writes: the request's credentials (its pid in the daemon's PID namespace)."""

    uid: int
    gid: int
    pid: int


class Store(Protocol):
    async def store(self, key: StoreKey, data: bytes, caller: Caller) -> int:
        """Take one write of ``data`` to the store ``key`` names: 0 once the view shows it,
        else the errno the write fails with."""
        ...


def may_administer(pid: int, proc: Path = PROC) -> bool:
    """Whether process ``pid`` holds CAP_SYS_ADMIN in its effective set. Blocking."""
    try:
        status = (proc / str(pid) / "status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


@dataclass
class Writes:
    view: View
    store: Store | None = None  # None: the mount takes no writes (as a read-only /sys)
    proc: Path = PROC
    # fh -> (store, inode, who opened it): inode numbers are stable across generations
    handles: dict[int, tuple[StoreKey, int, Caller]] = field(default_factory=dict)
    _next: itertools.count[int] = field(default_factory=lambda: itertools.count(FIRST_HANDLE))

    def target(self, inode: int) -> StoreKey:
        """The key of the store a file's writes go to; FUSEError if it has none."""
        entry = self.view.holder.tree.get(inode)
        if entry is None:
            # The host's own files, shown through: a read-only /sys's. Else a file a swap
            # removed, written through a descriptor opened before (kernfs: ENODEV).
            self.view.hosted(inode, missing=errno.ENODEV)
            raise pyfuse3.FUSEError(errno.EROFS)
        node = entry.node
        if isinstance(node, Dir):
            raise pyfuse3.FUSEError(errno.EISDIR)
        if not isinstance(node, File) or node.store is None or not node.mode & 0o222:
            raise pyfuse3.FUSEError(errno.EACCES)
        return node.store

    async def administers(self, pid: int) -> bool:
        """``may_administer``, in a worker thread: /proc is read off the event loop."""
        return await trio.to_thread.run_sync(may_administer, pid, self.proc)

    async def check_caller(self, ctx: pyfuse3.RequestContext) -> Caller:
        if ctx.uid != 0:
            raise pyfuse3.FUSEError(errno.EACCES)
        if not await self.administers(ctx.pid):
            raise pyfuse3.FUSEError(errno.EROFS)
        return Caller(ctx.uid, ctx.gid, ctx.pid)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext,
                   ) -> pyfuse3.FileInfo:
        key = self.target(inode)
        caller = await self.check_caller(ctx)
        if self.store is None:
            raise pyfuse3.FUSEError(errno.EROFS)
        fh = next(self._next)
        self.handles[fh] = (key, inode, caller)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    def owns(self, fh: int) -> bool:
        return fh in self.handles

    async def read(self, fh: int, off: int, size: int) -> bytes:
        """A read through a handle opened ``O_RDWR``: the attribute as served now."""
        entry = self.view.holder.tree.get(self.handles[fh][1])
        if entry is None or not isinstance(entry.node, File):  # gone with its function
            raise pyfuse3.FUSEError(errno.ENODEV)
        return entry.node.read(self.view.clock())[off:off + size]

    async def write(self, fh: int, off: int, buf: bytes,
                    ctx: pyfuse3.RequestContext | None) -> int:
        """``ctx``: the WRITE's own context (None from a pyfuse3 that does not pass it)."""
        if fh in self.handles:  # keep-cache mode: its OPEN was checked
            key, inode, caller = self.handles[fh]
            if self.view.holder.tree.get(inode) is None:  # gone with its function
                raise pyfuse3.FUSEError(errno.ENODEV)
        elif fh < FIRST_HANDLE:  # no-open mode: the kernel opened nothing, names the inode
            key = self.target(fh)
            if ctx is None:  # who writes cannot be told: as a read-only /sys
                raise pyfuse3.FUSEError(errno.EROFS)
            caller = await self.check_caller(ctx)
        else:
            raise pyfuse3.FUSEError(errno.EBADF)
        if self.store is None:
            raise pyfuse3.FUSEError(errno.EROFS)
        code = await self.store.store(key, buf, caller)
        if code:
            raise pyfuse3.FUSEError(code)
        return len(buf)

    def release(self, fh: int) -> bool:
        return self.handles.pop(fh, None) is not None

    async def truncate(self, inode: int, fields: pyfuse3.SetattrFields,
                       ctx: pyfuse3.RequestContext) -> None:
        """A setattr: only the truncation ``O_TRUNC`` makes, of a writable attribute, is a
        no-op that succeeds. A change of mode or owner is EPERM (kernfs would take
        it from root; the view does not simulate it), EROFS as ``refuse_change`` says."""
        if not fields.update_size or any(getattr(fields, f) for f in (
                "update_mode", "update_uid", "update_gid")):
            raise await self.refuse_change(ctx)
        self.target(inode)
        await self.check_caller(ctx)

    async def refuse_create(self, ctx: pyfuse3.RequestContext) -> pyfuse3.FUSEError:
        """What sysfs answers a create: EACCES; EROFS to a caller without CAP_SYS_ADMIN (a
        container without privileges, whose /sys is read-only)."""
        return pyfuse3.FUSEError(errno.EACCES if await self.administers(ctx.pid)
                                 else errno.EROFS)

    async def refuse_change(self, ctx: pyfuse3.RequestContext) -> pyfuse3.FUSEError:
        """What sysfs answers mkdir, unlink, rename, links: EPERM; EROFS as above."""
        return pyfuse3.FUSEError(errno.EPERM if await self.administers(ctx.pid)
                                 else errno.EROFS)
