"""``python -m tests.helpers.stall_fs MOUNTPOINT``: a small sysfs-like file system in which
one file's read, one directory's listing and one name's lookup are never answered (their
handlers sleep until the server stops), as a hung FUSE daemon would leave them. It holds one
PCI function (``BDF``), whose attributes read normally but ``STALLED_FILE``, ``STALLED_DIR``
and ``STALLED_LOOKUP``. Prints "serving" once mounted; SIGTERM unmounts and exits, which ends
the unanswered requests."""

from __future__ import annotations

import errno
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyfuse3
import trio

from mokkafs.testing import serve_bare

BDF = "0000:00:01.0"
FUNCTION = f"sys/devices/pci0000:00/{BDF}"
ATTRIBUTES = {"vendor": "0x1af4\n", "device": "0x1041\n", "class": "0x020000\n",
              "revision": "0x01\n", "irq": "11\n", "numa_node": "-1\n"}
CONFIG = bytes.fromhex("f41a4110") + bytes(60)
STALLED_FILE = f"{FUNCTION}/label"  # its read never answers
STALLED_DIR = "sys/devices/system/cpu"  # its listing never answers
STALLED_LOOKUP = "sys/class/dmi/id"  # its lookup never answers
PAGE = 4096  # the size sysfs gives every attribute


@dataclass
class Node:
    mode: int
    content: bytes | None = None  # a file's (None: its read never answers), a link's target
    children: dict[bytes, int] = field(default_factory=dict)
    stalls: bool = False  # a directory whose listing never answers
    lookup_stalls: bool = False


def tree() -> dict[int, Node]:
    """inode -> node: the function's attributes and config, the bus's link to it, and what
    stalls."""
    nodes = {pyfuse3.ROOT_INODE: Node(stat.S_IFDIR | 0o755)}

    def add(path: str, node: Node) -> None:
        parent = pyfuse3.ROOT_INODE
        *dirs, name = path.split("/")
        for part in dirs:
            children = nodes[parent].children
            if part.encode() not in children:
                children[part.encode()] = len(nodes) + 1
                nodes[len(nodes) + 1] = Node(stat.S_IFDIR | 0o755)
            parent = children[part.encode()]
        nodes[parent].children[name.encode()] = len(nodes) + 1
        nodes[len(nodes) + 1] = node

    for name, value in ATTRIBUTES.items():
        add(f"{FUNCTION}/{name}", Node(stat.S_IFREG | 0o444, value.encode()))
    add(f"{FUNCTION}/config", Node(stat.S_IFREG | 0o644, CONFIG))
    add(STALLED_FILE, Node(stat.S_IFREG | 0o444, None))
    add(f"sys/bus/pci/devices/{BDF}",
        Node(stat.S_IFLNK | 0o777, f"../../../devices/pci0000:00/{BDF}".encode()))
    add(STALLED_DIR, Node(stat.S_IFDIR | 0o755, stalls=True))
    add(STALLED_LOOKUP, Node(stat.S_IFDIR | 0o755, lookup_stalls=True))
    add("proc/sys/kernel/hostname", Node(stat.S_IFREG | 0o444, b"stalled\n"))
    return nodes


class Stalling(pyfuse3.Operations):
    """``tree()`` served read-only; handles are inodes."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes = tree()

    def _attributes(self, inode: int) -> pyfuse3.EntryAttributes:
        node = self.nodes[inode]
        a = pyfuse3.EntryAttributes()
        a.st_ino = inode
        a.st_mode = node.mode
        a.st_nlink = 1
        a.st_size = PAGE if stat.S_ISREG(node.mode) else len(node.content or b"")
        a.entry_timeout = a.attr_timeout = 1
        return a

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        inode = self.nodes[parent_inode].children.get(name)
        if inode is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if self.nodes[inode].lookup_stalls:
            await trio.sleep_forever()
        return self._attributes(inode)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self._attributes(inode)

    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        return self.nodes[inode].content or b""

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        return inode

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        if self.nodes[fh].stalls:
            await trio.sleep_forever()
        for name, inode in sorted(self.nodes[fh].children.items(), key=lambda c: c[1]):
            if inode > start_id and not pyfuse3.readdir_reply(
                    token, name, self._attributes(inode), inode):
                return

    async def releasedir(self, fh: int) -> None:
        pass

    async def open(self, inode: int, flags: int,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(fh=inode, direct_io=True)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        content = self.nodes[fh].content
        if content is None:
            await trio.sleep_forever()
        return (content or b"")[off:off + size]

    async def release(self, fh: int) -> None:
        pass

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        pass


def main() -> None:
    serve_bare(Stalling(), sys.argv[1], "stalling")


if __name__ == "__main__":
    main()
