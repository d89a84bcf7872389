"""The FUSE side of writes: which opens for writing are allowed, and the write itself.

As sysfs: an attribute the view simulates a store for (``mokkafs.writes.attributes``) opens for
writing (``O_WRONLY``, ``O_RDWR``, ``O_TRUNC``: truncation is a no-op) and each ``write()`` is
one store of what it carries, as bytes, at whatever offset; the write returns once the new view
is installed and the kernel's caches told (waiting for that at most a bound:
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
namespace), its capabilities from ``/proc/<pid>/status``: with the OPEN in keep-cache mode,
with the WRITE itself in no-open mode, where the kernel sends no OPEN (the project's pyfuse3
patch passes the WRITE's context: ``Operations.enable_write_context``). A neighbour holding the
same file open changes nothing, and no other process is looked at.
"""

from __future__ import annotations

import errno
import itertools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyfuse3

from mokkafs.fuse.view import View
from mokkafs.tree.nodes import Dir, File
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.stores import writable

log = logging.getLogger(__name__)

CAP_SYS_ADMIN = 21
FIRST_HANDLE = 1 << 63  # above every inode number (63 bits) and every handle of the modes
MAX_STORE = 4096  # kernfs hands a store at most a page


class Store(Protocol):
    async def store(self, bdf: str, attribute: str, text: str) -> None:
        """Raise ``WriteRefused`` to refuse; return once the view shows the write."""
        ...


def may_administer(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` holds CAP_SYS_ADMIN in its effective set."""
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
    store: Store | None = None  # set once the daemon has its swapper
    proc: Path = Path("/proc")
    # fh -> (function, attribute, inode): inode numbers are stable across generations
    handles: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    _next: itertools.count[int] = field(default_factory=lambda: itertools.count(FIRST_HANDLE))

    def target(self, inode: int) -> tuple[str, str]:
        """The (function, attribute) a simulated store is for; FUSEError otherwise. A bus
        file's holder is its directory's name (the driver, or ``pci``): the function it
        changes is the BDF written to it."""
        entry = self.view.holder.tree.get(inode)
        if entry is None:
            # The host's own files, shown through: a read-only /sys's. Else a file a swap
            # removed, written through a descriptor opened before (kernfs: ENODEV).
            self.view.hosted(inode, missing=errno.ENODEV)
            raise pyfuse3.FUSEError(errno.EROFS)
        node = entry.node
        if isinstance(node, Dir):
            raise pyfuse3.FUSEError(errno.EISDIR)
        if not isinstance(node, File) or not node.mode & 0o222 \
                or not writable(node.directory, node.name):
            raise pyfuse3.FUSEError(errno.EACCES)
        return node.directory.rpartition("/")[2], node.name

    def check_caller(self, ctx: pyfuse3.RequestContext) -> None:
        if ctx.uid != 0:
            raise pyfuse3.FUSEError(errno.EACCES)
        if not may_administer(ctx.pid, self.proc):
            raise pyfuse3.FUSEError(errno.EROFS)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext,
                   ) -> pyfuse3.FileInfo:
        target = self.target(inode)
        self.check_caller(ctx)
        if self.store is None:
            raise pyfuse3.FUSEError(errno.EROFS)
        fh = next(self._next)
        self.handles[fh] = (*target, inode)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    def owns(self, fh: int) -> bool:
        return fh in self.handles

    async def read(self, fh: int, off: int, size: int) -> bytes:
        """A read through a handle opened ``O_RDWR``: the attribute as served now."""
        entry = self.view.holder.tree.get(self.handles[fh][2])
        if entry is None or not isinstance(entry.node, File):  # gone with its function
            raise pyfuse3.FUSEError(errno.ENODEV)
        return entry.node.read(self.view.clock())[off:off + size]

    async def write(self, fh: int, off: int, buf: bytes,
                    ctx: pyfuse3.RequestContext | None) -> int:
        """``ctx``: the WRITE's own context (None from a pyfuse3 that does not pass it)."""
        if fh in self.handles:  # keep-cache mode: its OPEN was checked
            bdf, attribute, inode = self.handles[fh]
            if self.view.holder.tree.get(inode) is None:  # gone with its function
                raise pyfuse3.FUSEError(errno.ENODEV)
        elif fh < FIRST_HANDLE:  # no-open mode: the kernel opened nothing, names the inode
            bdf, attribute = self.target(fh)
            if ctx is None:  # who writes cannot be told: as a read-only /sys
                raise pyfuse3.FUSEError(errno.EROFS)
            self.check_caller(ctx)
        else:
            raise pyfuse3.FUSEError(errno.EBADF)
        if self.store is None:
            raise pyfuse3.FUSEError(errno.EROFS)
        try:  # sysfs attributes are bytes: latin-1 keeps each byte one character
            await self.store.store(bdf, attribute, buf[:MAX_STORE].decode("latin-1"))
        except WriteRefused as exc:
            raise pyfuse3.FUSEError(exc.errno) from None
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
            raise refuse_change(ctx)
        self.target(inode)
        self.check_caller(ctx)


def refuse_create(ctx: pyfuse3.RequestContext) -> pyfuse3.FUSEError:
    """What sysfs answers a create: EACCES; EROFS to a caller without CAP_SYS_ADMIN (a
    container without privileges, whose /sys is read-only)."""
    return pyfuse3.FUSEError(errno.EACCES if may_administer(ctx.pid) else errno.EROFS)


def refuse_change(ctx: pyfuse3.RequestContext) -> pyfuse3.FUSEError:
    """What sysfs answers mkdir, unlink, rename, links: EPERM; EROFS as above."""
    return pyfuse3.FUSEError(errno.EPERM if may_administer(ctx.pid) else errno.EROFS)

