"""The host's sysfs beneath the simulated nodes, read at request time, never copied.

A ``HostNode`` is a host path (relative to the sysfs root) the kernel has been told about. Its
inode hashes the path and, for the network-namespace-scoped subtrees (``class/net``,
``devices/virtual/net``), the caller's namespace, whose sysfs instance it is read from. Those
subtrees get no kernel caching at all (timeouts 0): one dentry serves every caller, and a
container must never see another's interfaces. Everything else is cached for a second, as
hotplug may change it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

import pyfuse3

from mokkafs.fuse.netns import NetnsSysfs
from mokkafs.fuse.snapshots import Snapshot

SCOPED = ("class/net", "devices/virtual/net")
HOST_TIMEOUT = 1.0
# sysfs reports 4096 for every text attribute whatever its length; files up to this size are
# read whole to learn their real one (binary attributes larger than this report theirs).
SNAPSHOT_LIMIT = 64 * 1024


def is_scoped(rel: str) -> bool:
    return any(rel == s or rel.startswith(s + "/") for s in SCOPED)


def host_inode(rel: str, ns: int, target: str = "") -> int:
    """A symlink's number includes its target: a link re-made to point elsewhere is another
    inode, so a kernel that caches link targets never serves the old one."""
    digest = hashlib.blake2b(f"h:{ns}:{rel}:{target}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) | 2


@dataclass(frozen=True, slots=True)
class HostNode:
    inode: int
    rel: str
    ns: int  # 0: the host's own sysfs

    @property
    def timeout(self) -> float:
        return 0.0 if is_scoped(self.rel) else HOST_TIMEOUT


class HostView:
    def __init__(self, netns: NetnsSysfs) -> None:
        self.netns = netns
        self.nodes: dict[int, HostNode] = {}

    def path(self, node: HostNode) -> str | None:
        root = self.netns.known(node.ns)
        return None if root is None else os.path.join(root, node.rel)

    def _root(self, rel: str, pid: int) -> tuple[int, str]:
        """(namespace id, sysfs root) ``rel`` is read from for ``pid``. May mount a namespace's
        sysfs: call from a worker thread."""
        return self.netns.root(pid) if is_scoped(rel) else (0, self.netns.host_sysfs)

    def node(self, rel: str, pid: int) -> tuple[HostNode, os.stat_result] | None:
        """The host entry at ``rel`` as ``pid`` sees it, or None (worker thread)."""
        return self._node(rel, *self._root(rel, pid))

    def node_in(self, rel: str, ns: int) -> tuple[HostNode, os.stat_result] | None:
        """The host entry at ``rel`` in the sysfs instance of ``ns`` (known already), or None.
        Scoped entries below an unscoped directory get their namespace on lookup."""
        ns = ns if is_scoped(rel) else 0
        root = self.netns.known(ns)
        return None if root is None else self._node(rel, ns, root)

    def _node(self, rel: str, ns: int, root: str) -> tuple[HostNode, os.stat_result] | None:
        path = os.path.join(root, rel)
        try:
            st = os.lstat(path)
            target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
        except OSError:
            return None
        node = HostNode(host_inode(rel, ns, target), rel, ns)
        self.nodes[node.inode] = node
        return node, st

    def lstat(self, node: HostNode) -> os.stat_result | None:
        path = self.path(node)
        try:
            return None if path is None else os.lstat(path)
        except OSError:
            return None

    def listdir(self, rel: str, pid: int) -> list[str]:
        return self.listdir_in(rel, self._root(rel, pid)[1])

    @staticmethod
    def listdir_in(rel: str, root: str) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(root, rel)))
        except OSError:
            return []

    @staticmethod
    def attributes(node: HostNode, st: os.stat_result,
                   snap: Snapshot | None = None) -> pyfuse3.EntryAttributes:
        """Attributes from ``st``; with ``snap``, the size and mtime of that content."""
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = node.inode
        attrs.generation = 0
        attrs.entry_timeout = attrs.attr_timeout = node.timeout
        attrs.st_mode = st.st_mode
        attrs.st_nlink = st.st_nlink
        attrs.st_uid = st.st_uid
        attrs.st_gid = st.st_gid
        attrs.st_rdev = st.st_rdev
        attrs.st_size = st.st_size if not stat.S_ISDIR(st.st_mode) else 0
        attrs.st_blksize = 4096
        attrs.st_blocks = st.st_blocks
        attrs.st_atime_ns, attrs.st_mtime_ns = st.st_atime_ns, st.st_mtime_ns
        attrs.st_ctime_ns = st.st_ctime_ns
        if snap is not None:
            if stat.S_ISREG(st.st_mode):
                attrs.st_size = len(snap.content)
            attrs.st_mtime_ns = attrs.st_ctime_ns = snap.mtime_ns
        return attrs

    def snapshot_source(self, node: HostNode, st: os.stat_result) -> bytes | None:
        """What a no-open snapshot of ``node`` holds: a small file's bytes, a directory's
        names; None when it has none (a large or unreadable file, a link). Worker thread."""
        root = self.netns.known(node.ns)
        if root is None:
            return None
        if stat.S_ISDIR(st.st_mode):
            return "\0".join(self.listdir_in(node.rel, root)).encode()
        path = os.path.join(root, node.rel)
        if not stat.S_ISREG(st.st_mode) or st.st_size > SNAPSHOT_LIMIT:
            return None
        try:
            with open(path, "rb", buffering=0) as f:
                return f.read(SNAPSHOT_LIMIT + 1)[:SNAPSHOT_LIMIT]
        except OSError:
            return None
