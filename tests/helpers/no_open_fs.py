"""``python -m tests.helpers.no_open_fs MOUNTPOINT``: the smallest file system that leaves
``open`` and ``opendir`` as pyfuse3's ``Operations`` has them (answering ENOSYS, so the
kernel stops sending OPEN and OPENDIR and keeps pages and listings cached), and says in each
file what handle its ``read`` was given. The reproducer of native/pyfuse3/README.md: stock
pyfuse3 gives every read and readdir handle 0; patched, the inode. Prints "serving" once
mounted; SIGTERM unmounts and exits."""

from __future__ import annotations

import errno
import stat
import sys

import pyfuse3

from mokkafs.testing import serve_bare

ROOT = pyfuse3.ROOT_INODE
FILES = {b"a": ROOT + 1, b"b": ROOT + 2}


def attributes(inode: int, mode: int, size: int) -> pyfuse3.EntryAttributes:
    a = pyfuse3.EntryAttributes()
    a.st_ino = inode
    a.st_mode = mode
    a.st_size = size
    a.st_nlink = 1
    a.entry_timeout = a.attr_timeout = 3600
    return a


def content(fh: int) -> bytes:
    return f"fh={fh}\n".encode()


class NoOpen(pyfuse3.Operations):
    """Handles are inodes: what a file system that opens nothing would like to be given."""

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if parent_inode != ROOT or name not in FILES:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.getattr(FILES[name], ctx)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if inode == ROOT:
            return attributes(ROOT, stat.S_IFDIR | 0o755, 0)
        return attributes(inode, stat.S_IFREG | 0o444, len(content(inode)))

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return content(fh)[off:off + size]

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        if fh != ROOT:  # no directory has this handle
            raise pyfuse3.FUSEError(errno.EBADF)
        for name, inode in FILES.items():
            if inode > start_id and not pyfuse3.readdir_reply(
                    token, name, attributes(inode, stat.S_IFREG | 0o444, 5), inode):
                return


def main() -> None:
    serve_bare(NoOpen(), sys.argv[1], "no-open")


if __name__ == "__main__":
    main()
