"""The host's sysfs beneath the simulated nodes, read at request time, never copied.

A ``HostNode`` is a host path (relative to the sysfs root) the kernel has been told about. Its
inode hashes the path and, for the network-namespace-scoped subtrees (``class/net``,
``devices/virtual/net``), the key of the sysfs instance of the caller's namespace it is read
from. Those subtrees get no kernel caching at all (timeouts 0): one dentry serves every caller,
and a container must never see another's interfaces. Everything else is cached for a second,
as hotplug may change it.

The kernel counts its references to every inode it was told of (one per LOOKUP reply and per
READDIRPLUS entry) and gives them back with FORGET; a host node is kept exactly as long as the
kernel holds it, so walking the whole host sysfs does not grow the daemon.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from typing import Protocol

from mokkafs.host.netns import OWN
from mokkafs.host.sysfs import Sysfs
from mokkafs.tree.build import Inode, hash_inode

SCOPED = ("class/net", "devices/virtual/net")
HOST_TIMEOUT = 1.0


def is_scoped(rel: str) -> bool:
    return any(rel == s or rel.startswith(s + "/") for s in SCOPED)


def host_inode(rel: str, key: int, target: str = "") -> Inode:
    """A symlink's number includes its target: a link re-made to point elsewhere is another
    inode, so a kernel that caches link targets never serves the old one."""
    return hash_inode(f"h:{key}:{rel}:{target}")


@dataclass(frozen=True, slots=True)
class HostNode:
    inode: Inode
    rel: str
    key: int  # the sysfs instance it is read from (``OWN``: the daemon's)

    @property
    def timeout(self) -> float:
        return 0.0 if is_scoped(self.rel) else HOST_TIMEOUT


class Instances(Protocol):
    """The sysfs instances host entries are read from (``mokkafs.host.netns.NetnsSysfs``)."""

    def key_of(self, pid: int) -> int: ...

    def sysfs(self, key: int) -> Sysfs | None: ...


class HostView:
    """Host nodes the kernel holds, and their I/O (blocking: call from worker threads, except
    the registry methods ``node``, ``remember`` and ``forget``)."""

    def __init__(self, netns: Instances) -> None:
        self.netns = netns
        self._nodes: dict[int, tuple[HostNode, int]] = {}  # inode -> (node, kernel lookups)
        self._lock = threading.Lock()

    def key_for(self, rel: str, pid: int) -> int:
        """The instance ``rel`` is read from for ``pid``; may mount one."""
        return self.netns.key_of(pid) if is_scoped(rel) else OWN

    def sysfs(self, key: int) -> Sysfs | None:
        return self.netns.sysfs(key)

    def find(self, rel: str, key: int) -> tuple[HostNode, os.stat_result] | None:
        """The entry at ``rel`` in instance ``key`` (scoped entries below an unscoped
        directory are read from it as well), or None when there is none."""
        key = key if is_scoped(rel) else OWN
        sysfs = self.netns.sysfs(key)
        if sysfs is None:
            return None
        try:
            st = sysfs.lstat(rel)
            target = sysfs.readlink(rel) if stat.S_ISLNK(st.st_mode) else ""
        except OSError:
            return None
        return HostNode(host_inode(rel, key, target), rel, key), st

    def remember(self, node: HostNode) -> None:
        """The kernel was told of ``node`` once more (a LOOKUP or READDIRPLUS reply)."""
        with self._lock:
            _, count = self._nodes.get(node.inode, (node, 0))
            self._nodes[node.inode] = (node, count + 1)

    def forget(self, inode: int, count: int) -> None:
        with self._lock:
            found = self._nodes.get(inode)
            if found is None:
                return
            if found[1] <= count:
                del self._nodes[inode]
            else:
                self._nodes[inode] = (found[0], found[1] - count)

    def node(self, inode: int) -> HostNode | None:
        found = self._nodes.get(inode)
        return found[0] if found else None

    @property
    def held(self) -> int:
        """How many host nodes the kernel holds."""
        return len(self._nodes)

    def _sysfs(self, node: HostNode) -> Sysfs:
        sysfs = self.netns.sysfs(node.key)
        if sysfs is None:  # its namespace went; so did the instance
            raise FileNotFoundError(node.rel)
        return sysfs

    def lstat(self, node: HostNode) -> os.stat_result:
        return self._sysfs(node).lstat(node.rel)

    def readlink(self, node: HostNode) -> str:
        return self._sysfs(node).readlink(node.rel)

    def listdir(self, rel: str, key: int) -> list[str]:
        """Names in a host directory. Raises OSError: an unreadable directory is never
        answered as an empty one."""
        sysfs = self.netns.sysfs(key if is_scoped(rel) else OWN)
        if sysfs is None:
            raise FileNotFoundError(rel)
        return sysfs.listdir(rel)

    def listdir_merged(self, rel: str, key: int) -> list[str]:
        """Names the host adds to a tree directory merged with ``rel``: none when the host
        has no such directory (the tree's entries alone), the rest as ``listdir``."""
        try:
            return self.listdir(rel, key)
        except FileNotFoundError:
            if self.netns.sysfs(key if is_scoped(rel) else OWN) is None:
                raise
            return []

    def open(self, node: HostNode) -> int:
        return self._sysfs(node).open(node.rel)

    def read(self, node: HostNode, size: int, offset: int) -> bytes:
        return self._sysfs(node).read(node.rel, size, offset)

    def content(self, node: HostNode, st: os.stat_result) -> bytes | None:
        """What no-open mode tells the kernel ``node`` holds (``mokkafs.fuse.told``): a
        directory's names, a text attribute's bytes; None when it has none."""
        sysfs = self.netns.sysfs(node.key)
        if sysfs is None:
            return None
        if stat.S_ISDIR(st.st_mode):
            try:
                return "\0".join(sysfs.listdir(node.rel)).encode()
            except OSError:
                return None
        return sysfs.text_attribute(node.rel, st)
