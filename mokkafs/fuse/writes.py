"""The FUSE side of writes: which opens for writing are allowed, and the write itself.

As sysfs: an attribute the view simulates a store for (``mokkafs.writes.attributes``) opens
for writing (``O_WRONLY``, ``O_RDWR``, ``O_TRUNC``: truncation is a no-op) and each ``write()``
is one store of what it carries, at whatever offset; the write returns once the new view is
installed and the kernel told (``mokkafs.serve.writes``), or fails with the store's errno.
Every other file refuses to open for writing (EACCES, as kernfs refuses a file without a store
method to root), a create EACCES, and mkdir, unlink, rename, links and mode changes EPERM.

Who may write: the mount is ``default_permissions``, so the kernel refuses a writer other than
the owner (root) with EACCES before the daemon hears of it; the daemon refuses it too (another
FUSE setting), and refuses a root without CAP_SYS_ADMIN in its effective set with EROFS: that
is a container without privileges, whose /sys is mounted read-only on a real node. The
caller's credentials come with the request (``ctx.uid``, ``ctx.pid``, in the daemon's PID
namespace), its capabilities from ``/proc/<pid>/status``. In no-open mode the kernel sends
no OPEN, and a WRITE carries no credentials that pyfuse3 passes on: the writers are then the
processes that hold the file open for writing (``/proc/<pid>/fdinfo``, matched by inode
number), and every one of them must pass.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyfuse3
import trio

from mokkafs.fuse.invalidate import Invalidator
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


def writers(inode: int, proc: Path = Path("/proc")) -> list[int]:
    """The processes holding a file whose inode number is ``inode`` open for writing, by
    their ``fdinfo`` (no file is touched: a stat could hang on another hung mount). The
    view's inode numbers are 63-bit hashes no other file system gives."""
    found = []
    for pid in (p.name for p in proc.iterdir() if p.name.isdigit()):
        try:
            fds = os.listdir(proc / pid / "fdinfo")
        except OSError:
            continue
        for fd in fds:
            try:
                info = dict(line.split(":", 1) for line in
                            (proc / pid / "fdinfo" / fd).read_text().splitlines()
                            if ":" in line)
                if int(info["ino"]) != inode:
                    continue
                flags = int(info["flags"], 8)
            except (OSError, KeyError, ValueError):
                continue
            if flags & os.O_ACCMODE != os.O_RDONLY:
                found.append(int(pid))
                break
    return found


def uid_of(pid: int, proc: Path = Path("/proc")) -> int | None:
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[2])  # effective
    except OSError:
        pass
    return None


@dataclass
class Writes:
    view: View
    store: Store | None = None  # set once the daemon has its swapper
    proc: Path = Path("/proc")
    kernel: Invalidator | None = None  # set by the daemon: told of the written file's pages
    # fh -> (function, attribute, inode): inode numbers are stable across generations
    handles: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    _next: itertools.count[int] = field(default_factory=lambda: itertools.count(FIRST_HANDLE))

    def target(self, inode: int) -> tuple[str, str]:
        """The (function, attribute) a simulated store is for; FUSEError otherwise. A bus
        file's holder is its directory's name (the driver, or ``pci``): the function it
        changes is the BDF written to it."""
        entry = self.view.holder.tree.get(inode)
        if entry is None:  # the host's own files, shown through: not this daemon's to write
            raise pyfuse3.FUSEError(errno.EACCES)
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

    async def _check_holders(self, inode: int) -> None:
        proc = self.proc

        def holders() -> list[tuple[int | None, bool]]:
            return [(uid_of(pid, proc), may_administer(pid, proc))
                    for pid in writers(inode, proc)]

        found = await trio.to_thread.run_sync(holders)
        if not found or any(uid != 0 for uid, _ in found):
            raise pyfuse3.FUSEError(errno.EACCES)
        if not all(admin for _, admin in found):
            raise pyfuse3.FUSEError(errno.EROFS)

    def owns(self, fh: int) -> bool:
        return fh in self.handles

    async def read(self, fh: int, off: int, size: int) -> bytes:
        """A read through a handle opened ``O_RDWR``: the attribute as served now."""
        entry = self.view.holder.tree.get(self.handles[fh][2])
        if entry is None or not isinstance(entry.node, File):  # gone with its function
            raise pyfuse3.FUSEError(errno.ENODEV)
        return entry.node.read(self.view.clock())[off:off + size]

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        if fh in self.handles:
            bdf, attribute, _ = self.handles[fh]
        elif fh < FIRST_HANDLE:  # no-open mode: the kernel opened nothing, names the inode
            bdf, attribute = self.target(fh)
            await self._check_holders(fh)
        else:
            raise pyfuse3.FUSEError(errno.EBADF)
        if self.store is None:
            raise pyfuse3.FUSEError(errno.EROFS)
        data = buf[:MAX_STORE]
        inode = self.handles[fh][2] if fh in self.handles else fh
        kernel = self.kernel
        if kernel is not None:
            kernel.writing.add(inode)
        try:
            await self.store.store(bdf, attribute, data.decode("latin-1"))
        except WriteRefused as exc:
            raise pyfuse3.FUSEError(exc.errno) from None
        finally:
            if kernel is not None:
                kernel.writing.discard(inode)
                # After the reply, which this handler's return sends: the writer (no-open
                # mode writes through the page cache) holds the page until then.
                trio.lowlevel.spawn_system_task(trio.to_thread.run_sync, kernel.drop_pages,
                                                inode)
        return len(buf)

    def release(self, fh: int) -> bool:
        return self.handles.pop(fh, None) is not None

    async def truncate(self, inode: int, fields: pyfuse3.SetattrFields,
                       ctx: pyfuse3.RequestContext) -> None:
        """A setattr: only the truncation ``O_TRUNC`` makes, of a writable attribute, is a
        no-op that succeeds; anything else is EPERM."""
        if not fields.update_size or any(getattr(fields, f) for f in (
                "update_mode", "update_uid", "update_gid")):
            raise pyfuse3.FUSEError(errno.EPERM)
        self.target(inode)
        self.check_caller(ctx)


def refuse_create(ctx: pyfuse3.RequestContext) -> pyfuse3.FUSEError:
    """What sysfs answers a create: EACCES; EROFS to a caller without CAP_SYS_ADMIN (a
    container without privileges, whose /sys is read-only)."""
    return pyfuse3.FUSEError(errno.EACCES if may_administer(ctx.pid) else errno.EROFS)


def refuse_change(ctx: pyfuse3.RequestContext) -> pyfuse3.FUSEError:
    """What sysfs answers mkdir, unlink, rename, links: EPERM; EROFS as above."""
    return pyfuse3.FUSEError(errno.EPERM if may_administer(ctx.pid) else errno.EROFS)

