"""sysfs as a caller's network namespace sees it.

sysfs shows the network devices of the namespace of whoever mounted it, so the daemon mounts
one sysfs instance per caller namespace, from a thread that has entered that namespace
(``setns`` moves only the calling thread), under ``runtime_dir``. Instances pin their
namespace, so at most ``limit`` are kept; the least recently used is detached first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from mokkafs import linux

log = logging.getLogger(__name__)

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
                linux.umount_lazily(old)
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
                    linux.setns(theirs.fileno(), linux.CLONE_NEWNET, f"the netns of {pid}")
                    try:
                        linux.mount("sysfs", str(target), "sysfs", linux.MS_RDONLY
                                    | linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
                    finally:
                        linux.setns(ours.fileno(), linux.CLONE_NEWNET, "the daemon's netns")
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
                linux.umount_lazily(path)
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            self.instances.clear()
