"""``python bench/floor_fs.py MOUNTPOINT``: the floor under every request mokkafs answers.

pyfuse3 on trio, as mokkafs runs them, serving a file ``f`` whose attributes expire at once
(every stat is a GETATTR) and a symlink ``l`` to it that the kernel does not cache (every
stat through it is a READLINK). The handlers answer from prepared objects and do nothing
else, so what a request costs here is what pyfuse3's dispatch, trio's scheduling and the
kernel cost: no daemon on this stack answers faster. Prints "serving" once mounted; SIGTERM
unmounts and exits."""

from __future__ import annotations

import errno
import stat
import sys

import pyfuse3

from mokkafs.testing import serve_bare

ROOT = pyfuse3.ROOT_INODE
FILE, LINK = ROOT + 1, ROOT + 2


def attributes(inode: int, mode: int, size: int, timeout: float) -> pyfuse3.EntryAttributes:
    a = pyfuse3.EntryAttributes()
    a.st_ino = inode
    a.st_mode = mode
    a.st_size = size
    a.st_nlink = 1
    a.entry_timeout = 3600
    a.attr_timeout = timeout
    return a


class Floor(pyfuse3.Operations):
    def __init__(self) -> None:
        super().__init__()
        self.table = {ROOT: attributes(ROOT, stat.S_IFDIR | 0o755, 0, 3600),
                      FILE: attributes(FILE, stat.S_IFREG | 0o444, 2, 0),
                      LINK: attributes(LINK, stat.S_IFLNK | 0o777, 1, 3600)}
        self.names = {b"f": FILE, b"l": LINK}

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        inode = self.names.get(name) if parent_inode == ROOT else None
        if inode is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self.table[inode]

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.table[inode]

    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        return b"f"


def main() -> None:
    serve_bare(Floor(), sys.argv[1], "floor")


if __name__ == "__main__":
    main()
