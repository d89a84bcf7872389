"""``python -m mokkafs.fuse.kmsg_mount FD PATH``: the kmsg mount's process. It mounts a
FUSE connection whose root is one file, over the view's ``dev/kmsg`` at ``PATH`` (libfuse
takes the root's mode from the mountpoint: a regular file), and answers that file's opens,
reads and releases through the daemon, over the socket ``FD`` (``mokkafs.fuse.relay``).

Its opens are answered (this connection is not the view's no-open one), ``direct_io``, so
every reader keeps a position of its own and every read reaches the daemon: /dev/kmsg's
semantics (docs/kmsg.md) in every cache mode.

It ends, unmounting, at SIGTERM or SIGINT (the daemon's ordered stop, ``serve.kmsg``); a
read still waiting then gets ENOTCONN. When the daemon's end of the socket closes (the daemon
is gone), it ends without unmounting: the view's own mount is gone or dead, and detaching it
detaches this one too. (No PR_SET_PDEATHSIG: it follows the thread that started the process,
and trio starts processes from worker threads.)
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import signal
import socket
import stat
import sys
import time
from pathlib import Path

import pyfuse3
import trio

from mokkafs.fuse import attrs, relay
from mokkafs.fuse.mount import options
from mokkafs.fuse.stream import MAX_WAITING

log = logging.getLogger(__name__)

TIMEOUT = 3600.0  # the root's attributes never change


class Relayed(pyfuse3.Operations):
    """One file, the root; its opens, reads and releases answered by the daemon."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        super().__init__()
        self.enable_symlink_cache = False  # read by patched pyfuse3
        self.sock = sock
        self.mtime_ns = time.time_ns()
        self.gone = False  # the daemon's end closed
        self._numbers = itertools.count(1)
        self._sending = trio.Lock()  # one send at a time on a trio socket
        self._waiting: dict[int, tuple[trio.Event, list[tuple[int, int, bytes]]]] = {}

    async def call(self, op: int, a: int = 0, b: int = 0, c: int = 0) -> tuple[int, bytes]:
        """The daemon's answer: (value, data); its errno raised as FUSEError."""
        if self.gone:
            raise pyfuse3.FUSEError(errno.ENOTCONN)
        number = next(self._numbers)
        done: tuple[trio.Event, list[tuple[int, int, bytes]]] = (trio.Event(), [])
        self._waiting[number] = done
        try:
            try:
                async with self._sending:
                    await self.sock.send(relay.request(number, op, a, b, c))
            except OSError:
                raise pyfuse3.FUSEError(errno.ENOTCONN) from None
            await done[0].wait()
        finally:
            self._waiting.pop(number, None)
        if not done[1]:
            raise pyfuse3.FUSEError(errno.ENOTCONN)
        error, value, data = done[1][0]
        if error:
            raise pyfuse3.FUSEError(error)
        return value, data

    async def receive(self) -> None:
        """Hand each reply to its request, until the daemon's end closes."""
        while True:
            try:
                message = await self.sock.recv(relay.LARGEST)
            except OSError:
                message = b""
            if len(message) < relay.REPLY.size:
                break
            number, error, value = relay.REPLY.unpack_from(message)
            waiting = self._waiting.get(number)
            if waiting is not None:
                waiting[1].append((error, value, message[relay.REPLY.size:]))
                waiting[0].set()
        self.abandon()

    def abandon(self) -> None:
        """Answer every request still waiting, and every later one, ENOTCONN: the daemon is
        gone, or this mount stops (pyfuse3's loop ends only once its handlers have)."""
        self.gone = True
        for event, _ in list(self._waiting.values()):
            event.set()

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if inode != pyfuse3.ROOT_INODE:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return attrs.make(inode, stat.S_IFREG | 0o444, size=attrs.STREAM_SIZE,
                          mtime_ns=self.mtime_ns, timeout=TIMEOUT)

    async def open(self, inode: int, flags: int,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        fh, _ = await self.call(relay.OPEN, flags, ctx.pid)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return (await self.call(relay.READ, fh, off, size))[1]

    async def release(self, fh: int) -> None:
        with contextlib.suppress(pyfuse3.FUSEError):  # the daemon gone, and with it the handle
            await self.call(relay.RELEASE, fh)


async def serve(sock: trio.socket.SocketType, path: Path) -> bool:
    """Mount at ``path`` and serve until a stop signal (True: unmount) or the daemon's end
    closes (False)."""
    ops = Relayed(sock)
    stopped = False
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        pyfuse3.init(ops, str(path), options(path))
        await sock.send(relay.request(0, relay.MOUNTED))

        async def on_signal() -> None:
            nonlocal stopped
            async for _ in signals:
                stopped = True
                pyfuse3.terminate()
                ops.abandon()
                return

        async def on_receive() -> None:
            await ops.receive()
            pyfuse3.terminate()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_signal)
            nursery.start_soon(on_receive)
            await pyfuse3.main(max_tasks=8 + MAX_WAITING)
            nursery.cancel_scope.cancel()
    return stopped


def main(fd: int, path: Path) -> None:
    logging.basicConfig(level=logging.INFO,
                        format="mokkafs: %(levelname)s %(name)s: %(message)s")
    sock = trio.socket.from_stdlib_socket(socket.socket(fileno=fd))
    try:
        unmount = trio.run(serve, sock, path)
    except RuntimeError as exc:  # pyfuse3.init: the mount failed
        log.error("cannot mount the kernel log at %s: %s", path, exc)
        sys.exit(1)
    pyfuse3.close(unmount=unmount)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
