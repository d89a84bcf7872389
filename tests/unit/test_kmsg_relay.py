"""The stream relay (mokkafs.fuse.relay) between the kmsg mount's process and the daemon's
Streams, over a real socket pair, with no FUSE mount: what the process gets is what the
daemon's Streams answer, a waiting read wakes at a swap, errors
pass as their errno, and the handles a process opened are released when its end closes.
The process's side is played by ``Process``, written here to relay.py's formats (the real
one, native/mokkafs_kmsg.c, is proven on a mount by tests/fuse/test_kmsg_native.py)."""

from __future__ import annotations

import errno
import itertools
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from mokkafs.faults.effects import applied
from mokkafs.fuse import relay
from mokkafs.fuse.stream import END, Streams
from tests.helpers.faults import with_faults
from tests.helpers.profiles import tree_of
from tests.unit.test_kmsg import LOST, NONBLOCK, Clock, parsed, streams_of


class Process:
    """The kmsg mount's side of the socket: numbered requests, replies matched by number."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self._numbers = itertools.count(1)
        self._replies: dict[int, tuple[int, int, bytes]] = {}
        self._arrived: dict[int, trio.Event] = {}
        self.notified: list[int] = []  # the files of the daemon's NOTIFY replies
        self.notice = trio.Event()  # set at each NOTIFY

    async def call(self, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0
                   ) -> tuple[int, bytes]:
        """The daemon's answer: (value, data); its errno raised as OSError."""
        return await self.result(await self.send(op, a, b, c, d))

    async def send(self, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
        """A request sent: its number."""
        number = next(self._numbers)
        self._arrived[number] = trio.Event()
        await self.sock.send(relay.request(number, op, a, b, c, d))
        return number

    async def result(self, number: int) -> tuple[int, bytes]:
        await self._arrived[number].wait()
        error, value, data = self._replies.pop(number)
        if error:
            raise OSError(error, os.strerror(error))
        return value, data

    async def receive(self) -> None:
        while len(message := await self.sock.recv(relay.LARGEST)) >= relay.REPLY.size:
            number, error, value = relay.REPLY.unpack_from(message)
            if number == relay.NOTIFY:
                self.notified.append(value)
                self.notice.set()
                continue
            self._replies[number] = (error, value, message[relay.REPLY.size:])
            self._arrived.pop(number).set()


def test_the_relay_answers_with_the_daemons_streams(tmp_path: Path) -> None:
    quiet = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 500")), 0.0)
    faulty = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 0")), 1.0)
    streams, inode = streams_of(quiet, Clock(1.0))
    mounted: list[bool] = []

    async def exchange(child: Process, nursery: trio.Nursery) -> None:
        await child.sock.send(relay.request(0, relay.MOUNTED))
        fh, _ = await child.call(relay.OPEN, NONBLOCK, os.getpid())
        assert streams.owns(fh) and mounted == [True]
        first = (await child.call(relay.READ, fh, 0, 8192, NONBLOCK))[1]
        assert parsed(first)[1] == 0
        with pytest.raises(OSError) as caught:
            await child.call(relay.READ, fh, len(first), 8192, NONBLOCK)
        assert caught.value.errno == errno.EAGAIN
        with pytest.raises(OSError) as caught:
            await child.call(relay.READ, fh, 7, 8192, NONBLOCK)
        assert caught.value.errno == errno.ESPIPE
        with pytest.raises(OSError) as caught:
            await child.call(relay.OPEN, os.O_WRONLY, os.getpid())
        assert caught.value.errno == errno.EROFS
        blocking, _ = await child.call(relay.OPEN, os.O_RDONLY, os.getpid())
        got: list[bytes] = []
        arrived = trio.Event()

        async def follow() -> None:
            got.append((await child.call(relay.READ, blocking, END, 8192, os.O_RDONLY))[1])
            arrived.set()
        nursery.start_soon(follow)
        await trio.testing.wait_all_tasks_blocked()
        assert not got and streams.waiting == 1
        streams.holder.tree = tree_of(faulty)  # a fault applied now: a swap
        with trio.fail_after(10):
            await arrived.wait()
        assert parsed(got[0])[3].endswith("GPU has fallen off the bus.")
        await child.call(relay.RELEASE, fh)
        assert not streams.owns(fh) and streams.owns(blocking)
        child.sock.shutdown(socket.SHUT_RDWR)  # the process ends: its handles go
        await trio.testing.wait_all_tasks_blocked(cushion=0.2)
        assert not streams.owns(blocking)

    relayed(streams, inode, exchange, lambda: mounted.append(True))


def test_an_interrupted_read_ends_eintr_and_takes_no_record(tmp_path: Path) -> None:
    """INTERRUPT with a read's number (the kernel interrupted it: its reader got a signal,
    or was killed) ends that read, EINTR; the record that comes later is the next read's.
    An INTERRUPT for a read no longer under way changes nothing."""
    quiet = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 500")), 0.0)
    faulty = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 0")), 1.0)
    streams, inode = streams_of(quiet, Clock(1.0))

    async def exchange(child: Process, nursery: trio.Nursery) -> None:
        fh, _ = await child.call(relay.OPEN, os.O_RDONLY, os.getpid())
        number = await child.send(relay.READ, fh, END, 8192, os.O_RDONLY)
        await trio.testing.wait_all_tasks_blocked()
        assert streams.waiting == 1
        await child.sock.send(relay.request(number, relay.INTERRUPT))
        with pytest.raises(OSError) as caught:
            await child.result(number)
        assert caught.value.errno == errno.EINTR and streams.waiting == 0
        await child.sock.send(relay.request(number, relay.INTERRUPT))  # answered: nothing
        streams.holder.tree = tree_of(faulty)  # a fault applied now: a swap
        record = (await child.call(relay.READ, fh, END, 8192, os.O_RDONLY))[1]
        assert parsed(record)[3].endswith("GPU has fallen off the bus.")
        child.sock.shutdown(socket.SHUT_RDWR)

    relayed(streams, inode, exchange)


def relayed(streams: Streams, inode: int,
            exchange: Callable[[Process, trio.Nursery], Awaitable[None]],
            mounted: Callable[[], None] = lambda: None) -> None:
    """``exchange`` played by the process's side against ``serve_relay`` over ``streams``."""
    async def main() -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        daemon = trio.socket.from_stdlib_socket(ours)
        child = Process(trio.socket.from_stdlib_socket(theirs))
        with daemon, child.sock:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(relay.serve_relay, daemon, streams, lambda: inode, mounted)
                nursery.start_soon(child.receive)
                await exchange(child, nursery)

    trio.run(main)
