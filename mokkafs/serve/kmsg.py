"""The kmsg mount, in both cache modes: a process of the daemon's that mounts a second FUSE
connection over the view's ``dev/kmsg`` and relays its readers' requests to the daemon's
``Streams`` (``mokkafs.fuse.relay``; docs/kmsg.md says why). The process is ``mokkafs-kmsg``
(``BINARY``), a C program built from native/ into the package (setup.py).

- Started in the daemon's nursery once the view's loop answers (mounting there looks up
  ``dev/kmsg`` through it); readiness waits for its first attempt (``first``).
- A process that ends while the daemon serves is logged, its dead mount detached, and it is
  started again (after ``RESTART_SECONDS``, doubled up to ``RESTART_MAX`` while it keeps
  failing to mount). The view's mount never depends on it.
- The ordered stop (``stop``) runs before the view's loop ends: SIGTERM to the process, by
  its own PID, which answers its waiting reads ENOTCONN and unmounts; past ``STOP_SECONDS``,
  SIGKILL and a lazy unmount. So no reader, however long it waits, holds the daemon. The process
  has a session of its own, so a terminal's SIGINT reaches the daemon alone, which stops it
  in that order.
- Cancelled without a stop (the loop ended some other way), the process is killed; the
  view's own unmount detaches what it leaves.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from pathlib import Path

import trio

from mokkafs.errors import MountError
from mokkafs.fuse.relay import serve_relay
from mokkafs.fuse.stream import Streams
from mokkafs.fuse.view import TreeHolder
from mokkafs.host import linux
from mokkafs.host.mountinfo import FSTYPE, fsname, mounted_at
from mokkafs.surfaces.kmsg import PATH

log = logging.getLogger(__name__)

BINARY = Path(__file__).resolve().parents[1] / "bin" / "mokkafs-kmsg"  # built by setup.py

RESTART_SECONDS = 0.2
RESTART_MAX = 10.0
STOP_SECONDS = 2.0


class KmsgMount:
    """The process serving ``<mountpoint>/dev/kmsg``, for as long as the daemon serves."""

    def __init__(self, mountpoint: Path, streams: Streams, holder: TreeHolder) -> None:
        self.path = mountpoint / PATH
        self.streams = streams
        self.holder = holder
        self.first = trio.Event()  # the first process mounted, or failed to
        self.started = 0  # processes started so far
        self.mounted = False  # the current process's mount is in place
        self.process: trio.Process | None = None
        self._stopping = False
        self._scope = trio.CancelScope()
        self._done = trio.Event()

    def _inode(self) -> int | None:
        entry = self.holder.tree.resolve(PATH)
        return None if entry is None else int(entry.inode)

    async def run(self) -> None:
        delay = RESTART_SECONDS
        try:
            with self._scope:
                while not self._stopping:
                    mounted = await self._once()
                    self.first.set()
                    if self._stopping:
                        break
                    delay = RESTART_SECONDS if mounted else min(delay * 2, RESTART_MAX)
                    await trio.sleep(delay)
        finally:
            self.first.set()
            process = self.process
            if process is not None and process.returncode is None:
                process.kill()  # cancelled without a stop
            self._done.set()

    async def _once(self) -> bool:
        """Run one process until it ends; whether it had mounted."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await trio.lowlevel.open_process(
                [str(BINARY), str(theirs.fileno()), str(self.path)],
                pass_fds=(theirs.fileno(),),
                start_new_session=True)  # a terminal's ^C is the daemon's to act on
        finally:
            theirs.close()
        self.process, self.mounted = process, False
        self.started += 1
        sock = trio.socket.from_stdlib_socket(ours)

        def on_mounted() -> None:
            self.mounted = True
            self.first.set()
            log.info("serving the kernel log at %s (process %d)", self.path, process.pid)

        try:
            await serve_relay(sock, self.streams, self._inode, on_mounted)
        finally:
            sock.close()
        with trio.CancelScope(shield=True):
            with trio.move_on_after(STOP_SECONDS):
                await process.wait()
            if process.returncode is None:
                process.kill()  # its socket closed, yet it lives on: by its own PID
                await process.wait()
        mounted = self.mounted
        self.mounted = False
        if not self._stopping:
            log.warning("the kernel log's process %d ended (%s)%s; starting another",
                        process.pid, linux.ended(process.returncode),
                        "" if mounted else " before it mounted")
            await trio.to_thread.run_sync(self._detach)
        return mounted

    def _detach(self) -> bool:
        """Detach a mount of ours at ``path`` a process left (dead, or past its stop)."""
        stack = mounted_at(os.path.abspath(self.path))
        if stack and stack[-1].fstype == FSTYPE and stack[-1].source == fsname(self.path):
            return linux.umount_lazily(str(self.path))
        return False

    async def stop(self) -> None:
        """The ordered stop: SIGTERM (the process unmounts), bounded by ``STOP_SECONDS``."""
        self._stopping = True
        process = self.process
        try:
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(STOP_SECONDS):
                    await process.wait()
                if process.returncode is None:
                    log.warning("the kernel log's process %d did not stop within %.1fs; "
                                "killing it", process.pid, STOP_SECONDS)
                    process.kill()
                    await process.wait()
            if await trio.to_thread.run_sync(self._detach):
                log.warning("detached the kernel log's mount at %s", self.path)
        finally:
            if process is not None and process.returncode is None:
                process.kill()  # the stop's own bound ran out
            self._scope.cancel()
        await self._done.wait()


def kmsg_for(mountpoint: Path, streams: Streams, holder: TreeHolder) -> KmsgMount | None:
    """The kmsg mount a daemon needs, in either cache mode: none for a view without
    ``dev/kmsg``."""
    if holder.tree.resolve(PATH) is None:
        return None
    if not os.access(BINARY, os.X_OK):
        raise MountError(f"{BINARY} is not built; reinstall mokkafs (pip install . compiles "
                         "native/)")
    return KmsgMount(mountpoint, streams, holder)
