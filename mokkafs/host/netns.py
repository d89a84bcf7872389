"""sysfs as a caller's network namespace sees it.

sysfs shows the network devices of the namespace it was mounted from, so the daemon keeps one
detached sysfs instance per network namespace its callers are in (``mokkafs.host.sysfs``).
An instance is found from the caller's pid by the inode of ``/proc/<pid>/ns/net``. The kernel
reuses a namespace's inode number once the namespace is gone, so the daemon holds every
namespace it keeps an instance for open: while held, its number cannot name another namespace.
Instances whose namespace no process is in any more are dropped when a new one is made (the
only moment one is needed), and at most ``limit`` are kept. Each instance gets a key of its own
that is never reused, so inode numbers derived from it never collide across instances.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from mokkafs.host.sysfs import Sysfs

log = logging.getLogger(__name__)

OWN = 0  # the key of the daemon's own namespace's instance


def netns_inode(pid: int | str, proc: Path = Path("/proc")) -> int:
    """The inode number of a process's network namespace, or 0 when it cannot be seen."""
    try:
        return os.stat(proc / str(pid) / "ns/net").st_ino
    except OSError:
        return 0


@dataclass
class _Instance:
    key: int
    inode: int
    nsfd: int  # held: the namespace, and so its inode number, lives while we do
    sysfs: Sysfs


class NetnsSysfs:
    """The daemon's own sysfs instance (key ``OWN``) and one per caller namespace."""

    def __init__(self, scratch: Path, *, limit: int = 64, proc: Path = Path("/proc")) -> None:
        self.scratch = scratch
        self.limit = limit
        self.proc = proc
        self.own_inode = netns_inode("self", proc)
        self.own = Sysfs.mount_detached(scratch, name="the daemon's sysfs")
        self._by_inode: OrderedDict[int, _Instance] = OrderedDict()
        self._by_key: dict[int, _Instance] = {}
        self._keys = itertools.count(1)
        self._lock = threading.Lock()

    def key_of(self, pid: int) -> int:
        """The instance key for requests of ``pid``: ``OWN`` for the daemon's namespace or a
        caller it cannot see. May mount an instance: call from a worker thread."""
        inode = netns_inode(pid, self.proc) if pid > 0 else 0
        if inode in (0, self.own_inode):
            return OWN
        with self._lock:
            found = self._by_inode.get(inode)
            if found is not None:
                self._by_inode.move_to_end(inode)
                return found.key
            self._prune()
            return self._add(pid, inode).key

    def sysfs(self, key: int) -> Sysfs | None:
        """The instance of ``key``, or None when it was dropped (no I/O)."""
        if key == OWN:
            return self.own
        found = self._by_key.get(key)
        return found.sysfs if found else None

    def _add(self, pid: int, inode: int) -> _Instance:
        nsfd = os.open(self.proc / str(pid) / "ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if os.fstat(nsfd).st_ino != inode:  # the caller moved on meanwhile
                raise OSError(f"the network namespace of pid {pid} changed while opening it")
            sysfs = Sysfs.mount_detached(self.scratch, nsfd, f"the netns of pid {pid}")
        except BaseException:
            os.close(nsfd)
            raise
        instance = _Instance(next(self._keys), inode, nsfd, sysfs)
        self._by_inode[inode] = instance
        self._by_key[instance.key] = instance
        log.debug("sysfs instance %d for network namespace %d (pid %d)", instance.key, inode, pid)
        while len(self._by_inode) > self.limit:
            self._drop(next(iter(self._by_inode.values())))
        return instance

    def _prune(self) -> None:
        """Drop the instances of namespaces no process is in any more."""
        if not self._by_inode:
            return
        live = set()
        for entry in os.scandir(self.proc):
            if entry.name.isdigit():
                live.add(netns_inode(entry.name, self.proc))
        for instance in [i for i in self._by_inode.values() if i.inode not in live]:
            self._drop(instance)

    def _drop(self, instance: _Instance) -> None:
        del self._by_inode[instance.inode]
        del self._by_key[instance.key]
        instance.sysfs.close()
        os.close(instance.nsfd)
        log.debug("dropped sysfs instance %d (network namespace %d)", instance.key,
                 instance.inode)

    @property
    def instances(self) -> int:
        return len(self._by_key)

    def close(self) -> None:
        with self._lock:
            for instance in list(self._by_inode.values()):
                self._drop(instance)
            self.own.close()
