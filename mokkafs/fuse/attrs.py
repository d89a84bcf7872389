"""Entry attributes as the kernel receives them, built in one place for tree entries and for
the host's sysfs entries."""

from __future__ import annotations

import os
import stat

import pyfuse3

from mokkafs.fuse.told import Told
from mokkafs.tree.build import Entry
from mokkafs.tree.nodes import CharDevice, Dir, File, Symlink

SYSFS_SIZE = 4096  # what sysfs reports for every text attribute, whatever its length
STREAM_SIZE = 1 << 62  # a stream file's (dev/kmsg): mokkafs.fuse.stream.END


def make(inode: int, mode: int, *, size: int = 0, nlink: int = 1, uid: int = 0, gid: int = 0,
         rdev: int = 0, mtime_ns: int = 0, timeout: float,
         attr_timeout: float | None = None) -> pyfuse3.EntryAttributes:
    attrs = pyfuse3.EntryAttributes()
    attrs.st_ino = inode
    attrs.generation = 0
    attrs.entry_timeout = timeout
    attrs.attr_timeout = timeout if attr_timeout is None else attr_timeout
    attrs.st_mode = mode
    attrs.st_nlink = nlink
    attrs.st_uid = uid
    attrs.st_gid = gid
    attrs.st_rdev = rdev
    attrs.st_size = size
    attrs.st_blksize = 4096
    attrs.st_blocks = (size + 511) // 512
    attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = mtime_ns
    return attrs


def size_of(node: File | Dir | Symlink | CharDevice) -> int:
    """A tree node's size as the kernel is told it, for content the tree fixes: a static
    file's length, a link's target length; dynamic and unreadable files as sysfs sizes them."""
    if isinstance(node, File) and node.stream is not None:
        return STREAM_SIZE  # where SEEK_END puts a reader (mokkafs.fuse.stream)
    if isinstance(node, File):
        return len(node.content) if isinstance(node.content, bytes) and not node.error \
            else SYSFS_SIZE
    if isinstance(node, Symlink):
        return len(node.target.encode())
    return 0


def of_entry(entry: Entry, timeout: float, *, told: Told | None = None,
             attr_timeout: float | None = None) -> pyfuse3.EntryAttributes:
    """A tree entry's attributes; with ``told``, the size and mtime of that content (a
    dynamic file's, or a merged directory's names)."""
    node = entry.node
    size, mtime = size_of(node), entry.mtime_ns
    if told is not None:
        mtime = told.mtime_ns
        if isinstance(node, File):
            size = len(told.content)
    return make(entry.inode, entry.mode, size=size, nlink=2 if isinstance(node, Dir) else 1,
                rdev=os.makedev(node.major, node.minor) if isinstance(node, CharDevice) else 0,
                mtime_ns=mtime, timeout=timeout, attr_timeout=attr_timeout)


def of_host(inode: int, st: os.stat_result, timeout: float,
            told: Told | None = None,
            attr_timeout: float | None = None) -> pyfuse3.EntryAttributes:
    """A host sysfs entry's attributes from its stat; with ``told``, the size and mtime of
    that content."""
    size = 0 if stat.S_ISDIR(st.st_mode) else st.st_size
    mtime = st.st_mtime_ns
    if told is not None:
        mtime = told.mtime_ns
        if stat.S_ISREG(st.st_mode):
            size = len(told.content)
    return make(inode, st.st_mode, size=size, nlink=st.st_nlink, uid=st.st_uid, gid=st.st_gid,
                rdev=st.st_rdev, mtime_ns=mtime, timeout=timeout, attr_timeout=attr_timeout)


def absent(timeout: float) -> pyfuse3.EntryAttributes:
    """A name that does not exist, for the kernel to remember for ``timeout`` seconds."""
    attrs = pyfuse3.EntryAttributes()
    attrs.st_ino = 0
    attrs.entry_timeout = timeout
    return attrs
