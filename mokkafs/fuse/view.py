"""What the handlers serve, whatever the cache mode: the current Tree, and beneath the
directories that merge the host's sysfs (``Dir.merge``), the host's entries.

A merged directory lists the tree's children and the host's names the tree does not have
(minus its hidden patterns), in inode order (``CachePolicy.listing``); a name the tree lacks is
looked up on the host.
Host I/O is blocking: it runs in worker threads, limited so that a host file that blocks cannot
take every thread the daemon has.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from typing import TypeVar

import pyfuse3
import trio

from mokkafs.fuse.passthrough import HostNode, HostView
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import Dir, hidden

T = TypeVar("T")
Item = tuple[str, pyfuse3.EntryAttributes, HostNode | None]  # a listing's entry

HOST_THREADS = 8
# How long the kernel keeps the tree's entries and attributes: its content changes only with a
# swap, which invalidates what it changes, so this is a backstop, not how freshness works.
STATIC_TIMEOUT = 3600.0


class TreeHolder:
    """The one reference a swap assigns. Readers take ``tree`` once per request; ``swapped``
    is set at the next swap (readers waiting for a stream's next record wake on it)."""

    def __init__(self, tree: Tree) -> None:
        self._tree = tree
        self.swapped = trio.Event()

    @property
    def tree(self) -> Tree:
        return self._tree

    @tree.setter
    def tree(self, tree: Tree) -> None:
        self._tree = tree
        swapped, self.swapped = self.swapped, trio.Event()
        swapped.set()


def fuse_error(exc: OSError) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(exc.errno or errno.EIO)


class View:
    def __init__(self, holder: TreeHolder, host: HostView | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 timeout: float = STATIC_TIMEOUT) -> None:
        self.holder = holder
        self.host = host
        self.clock = clock
        self.timeout = timeout
        self._threads = trio.CapacityLimiter(HOST_THREADS)

    async def on_host(self, fn: Callable[..., T], *args: object) -> T:
        """Run host I/O in a worker thread; an OSError becomes the FUSEError of its errno."""
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self._threads)
        except OSError as exc:
            raise fuse_error(exc) from None

    def hosted(self, inode: int, missing: int = errno.ENOENT) -> tuple[HostView, HostNode]:
        """The host view and its node for an inode the tree does not hold; the FUSEError
        ``missing`` when there is none (an inode a swap removed that the kernel still
        holds, with or without host sysfs)."""
        host = self.host
        node = host.node(inode) if host is not None else None
        if host is None or node is None:
            raise pyfuse3.FUSEError(missing)
        return host, node

    def host_node(self, inode: int) -> HostNode:
        return self.hosted(inode)[1]

    def merged(self, tree: Tree, inode: int) -> tuple[str, tuple[str, ...], int] | None:
        """(host path, hidden patterns, instance key) of a directory whose host entries show,
        or None."""
        if self.host is None:
            return None
        entry = tree.get(inode)
        if entry is not None:
            node = entry.node
            return (node.merge, node.hide, 0) if isinstance(node, Dir) and node.merge is not None \
                else None
        host = self.host.node(inode)
        return (host.rel, (), host.key) if host else None

    async def find(self, tree: Tree, parent: int, name: str,
                   pid: int) -> tuple[HostNode, os.stat_result] | None:
        """The host entry ``name`` in merged directory ``parent`` as ``pid`` sees it."""
        merged = self.merged(tree, parent)
        if merged is None or self.host is None or name in (".", ".."):
            return None
        base, hide, _ = merged
        if hidden(name, hide):
            return None
        rel = f"{base}/{name}".lstrip("/")
        host = self.host

        def find() -> tuple[HostNode, os.stat_result] | None:
            return host.find(rel, host.key_for(rel, pid))
        return await self.on_host(find)

    def host_entries(self, tree: Tree, inode: int,
                     key: int) -> list[tuple[str, HostNode, os.stat_result]]:
        """The host's entries a merged directory shows, read from instance ``key`` where
        they are network-namespace-scoped. Blocking; raises OSError when the host directory
        cannot be listed (never an empty listing instead)."""
        merged = self.merged(tree, inode)
        if merged is None or self.host is None:
            return []
        base, hide, own_key = merged
        entry = tree.get(inode)
        taken = set(entry.names) if entry else set()
        out = []
        names = self.host.listdir(base, own_key or key) if entry is None \
            else self.host.listdir_merged(base, own_key or key)
        for name in names:
            if name in taken or hidden(name, hide):
                continue
            found = self.host.find(f"{base}/{name}".lstrip("/"), own_key or key)
            if found is not None:  # gone between the listing and the lstat: not listed
                out.append((name, *found))
        return out
