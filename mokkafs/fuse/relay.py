"""The stream relay: how the kmsg mount's process (``mokkafs-kmsg``, native/mokkafs_kmsg.c)
hands its readers' opens, reads, polls and releases to the daemon's ``Streams``, over a
socket pair.

``dev/kmsg`` is served by a second FUSE connection mounted over it, in a process of its own,
in both cache modes (docs/kmsg.md): the view's connection cannot (no-open mode sends it no
OPEN; pyfuse3 hands a read neither its FUSE_INTERRUPT nor the file's flags). That process
keeps no State and no clock: every request is answered here, by the daemon's ``Streams`` over
its current tree, so its readers see exactly the records the daemon's State logs, on the
daemon's clock, and a swap wakes a waiting read.

The socket is ``SOCK_SEQPACKET``: one message a request, one a reply, in any order (a waiting
read does not hold up the others). A request is ``REQUEST`` (its number, the operation, four
arguments); a reply is ``REPLY`` (the request's number, an errno or 0, a value) and the data
read. The process sends ``MOUNTED`` (number 0) once its mount is in place, and ``INTERRUPT``
with a read's number when the kernel interrupts that read: the read ends (EINTR). ``POLL``
asks whether a read would wait (its value: the poll mask); when the process holds the kernel's
poll handle (``b`` 1), the daemon later sends a reply numbered ``NOTIFY`` (0), whose value is
the handle's file: the process then wakes that poller. The C program keeps its own copy of
these formats; tests/unit/test_kmsg_native.py checks they agree.

| operation | a | b | c | d |
|---|---|---|---|---|
| OPEN | the open's flags | the opener's PID | | |
| READ | the handle | the file position | the size | the file's flags at this read |
| RELEASE | the handle | | | |
| POLL | the handle | 1: notify when readable | | |
"""

from __future__ import annotations

import errno
import logging
import struct
from collections.abc import Callable

import pyfuse3
import trio

from mokkafs.fuse.stream import Streams

log = logging.getLogger(__name__)

REQUEST = struct.Struct("<QBqqqq")  # number, operation, arguments
REPLY = struct.Struct("<Qiq")  # number, errno (0: done), value; then the bytes read
MOUNTED, OPEN, READ, RELEASE, INTERRUPT, POLL = 0, 1, 2, 3, 4, 5
NOTIFY = 0  # the number of a reply no request asked for: wake the poller of its value's file
LARGEST = 1 << 20  # the largest message (a read asks for at most libfuse's 256 pages)


def request(number: int, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> bytes:
    return REQUEST.pack(number, op, a, b, c, d)


def reply(number: int, error: int = 0, value: int = 0, data: bytes = b"") -> bytes:
    return REPLY.pack(number, error, value) + data


async def serve_relay(sock: trio.socket.SocketType, streams: Streams,
                      inode: Callable[[], int | None], mounted: Callable[[], None]) -> None:
    """Answer the kmsg mount's requests with ``streams`` until its end of ``sock`` closes;
    then every handle it opened is released. ``inode()``: the stream file's inode in the
    current tree (None: the tree has none). ``mounted`` is called at ``MOUNTED``."""
    opened: set[int] = set()
    reads: dict[int, trio.CancelScope] = {}  # the reads under way, by request number
    sending = trio.Lock()  # one send at a time on a trio socket

    async def send(message: bytes) -> None:
        try:
            async with sending:
                await sock.send(message)
        except (OSError, trio.ClosedResourceError):
            pass  # the process is gone: nobody waits for this

    def notifier(fh: int) -> Callable[[], None]:
        return lambda: nursery.start_soon(send, reply(NOTIFY, 0, fh))

    async def answer(number: int, op: int, a: int, b: int, c: int, d: int,
                     scope: trio.CancelScope) -> None:
        data, value, error = b"", 0, 0
        try:
            if op == OPEN:
                node = inode()
                if node is None:
                    raise pyfuse3.FUSEError(errno.ENODEV)
                value = streams.open(node, a, b).fh
                opened.add(value)
            elif op == READ:
                if a not in opened:
                    raise pyfuse3.FUSEError(errno.EBADF)
                with scope:
                    data = await streams.read(a, b, c, d)
                if scope.cancelled_caught:
                    raise pyfuse3.FUSEError(errno.EINTR)  # interrupted: its reader went on
            elif op == RELEASE:
                opened.discard(a)
                streams.release(a)
            elif op == POLL:
                if a not in opened:
                    raise pyfuse3.FUSEError(errno.EBADF)
                value = streams.poll(a, notifier(a) if b else None)
            else:
                raise pyfuse3.FUSEError(errno.ENOSYS)
        except pyfuse3.FUSEError as exc:
            error = exc.errno
        except Exception:  # a bug: that request fails, the relay goes on
            log.exception("the kmsg relay failed a request; answering EIO")
            error = errno.EIO
        finally:
            reads.pop(number, None)
        await send(reply(number, error, value, data))

    try:
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    message = await sock.recv(LARGEST)
                except OSError:
                    message = b""
                if len(message) < REQUEST.size:
                    nursery.cancel_scope.cancel()  # its end closed: its readers are gone
                    return
                number, op, a, b, c, d = REQUEST.unpack_from(message)
                if op == MOUNTED:
                    mounted()
                elif op == INTERRUPT:
                    if number in reads:  # (none: answered already)
                        reads[number].cancel()
                else:
                    # The scope exists before the task runs: an INTERRUPT may come first.
                    scope = trio.CancelScope()
                    if op == READ:
                        reads[number] = scope
                    nursery.start_soon(answer, number, op, a, b, c, d, scope)
    finally:
        for fh in opened:
            streams.release(fh)
