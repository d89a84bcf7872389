"""sysfs as a caller's network namespace sees it.

sysfs shows the network devices of the namespace of whoever mounted it, so the daemon mounts
one sysfs instance per caller namespace, from a thread that has entered that namespace
(``setns`` moves only the calling thread), under ``runtime_dir``. Instances pin their
namespace, so at most ``limit`` are kept; the least recently used is detached first.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

log = logging.getLogger(__name__)

CLONE_NEWNET = 0x4000_0000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def netns_of(pid: int) -> int:
    """The inode of a process's network namespace, or 0 when it cannot be seen."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return 0


class NetnsSysfs:
    def __init__(self, host_sysfs: str, runtime_dir: Path, limit: int = 64) -> None:
        self.host_sysfs = host_sysfs
        self.runtime_dir = runtime_dir
        self.limit = limit
        self.own = netns_of(os.getpid())
        self.instances: OrderedDict[int, str] = OrderedDict()
        self.lock = threading.Lock()

    def root(self, pid: int) -> tuple[int, str]:
        """(namespace id, sysfs root) for requests of ``pid``; (0, host sysfs) for the
        daemon's own namespace or a caller it cannot see. May mount: call from a worker."""
        ns = netns_of(pid) if pid > 0 else 0
        if ns in (0, self.own):
            return 0, self.host_sysfs
        with self.lock:
            path = self.instances.get(ns)
            if path is not None:
                self.instances.move_to_end(ns)
                return ns, path
            path = self._mount(pid, ns)
            self.instances[ns] = path
            while len(self.instances) > self.limit:
                _, old = self.instances.popitem(last=False)
                _libc.umount2(os.fsencode(old), MNT_DETACH)
            return ns, path

    def known(self, ns: int) -> str | None:
        """The sysfs root of a namespace already mounted (no I/O)."""
        return self.host_sysfs if ns == 0 else self.instances.get(ns)

    def _mount(self, pid: int, ns: int) -> str:
        target = self.runtime_dir / f"netns-{ns}"
        target.mkdir(parents=True, exist_ok=True)
        errors: list[BaseException] = []

        def work() -> None:
            try:
                with open(f"/proc/{pid}/ns/net") as theirs, open("/proc/self/ns/net") as ours:
                    _check(_libc.setns(theirs.fileno(), CLONE_NEWNET), "setns")
                    try:
                        _check(_libc.mount(b"sysfs", os.fsencode(target), b"sysfs",
                                           MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
                               f"mount sysfs on {target}")
                    finally:
                        _check(_libc.setns(ours.fileno(), CLONE_NEWNET), "setns back")
            except BaseException as exc:  # reported in the calling thread
                errors.append(exc)

        thread = threading.Thread(target=work, name=f"netns-{ns}")
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        log.info("mounted sysfs of network namespace %d (pid %d) at %s", ns, pid, target)
        return str(target)

    def close(self) -> None:
        with self.lock:
            for path in self.instances.values():
                _libc.umount2(os.fsencode(path), MNT_DETACH)
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            self.instances.clear()
