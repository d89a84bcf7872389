"""A minimal inotify binding for trio: one fd, watches, and events read when the kernel has
some (no polling, no wake-ups while nothing changes)."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import trio

from mokkafs.linux import check, libc

IN_MODIFY = 0x0000_0002
IN_ATTRIB = 0x0000_0004
IN_CLOSE_WRITE = 0x0000_0008
IN_MOVED_FROM = 0x0000_0040
IN_MOVED_TO = 0x0000_0080
IN_CREATE = 0x0000_0100
IN_DELETE = 0x0000_0200
IN_DELETE_SELF = 0x0000_0400
IN_MOVE_SELF = 0x0000_0800
IN_IGNORED = 0x0000_8000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

_EVENT = struct.Struct("iIII")


@dataclass(frozen=True)
class Event:
    wd: int
    mask: int
    name: str


class Inotify:
    def __init__(self) -> None:
        self.fd = check(libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")

    def add_watch(self, path: str, mask: int) -> int:
        return check(libc.inotify_add_watch(self.fd, os.fsencode(path), mask),
                     f"inotify_add_watch {path}")

    async def read(self) -> list[Event]:
        """Wait until the kernel queues events, then return all of them."""
        while True:
            await trio.lowlevel.wait_readable(self.fd)
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                continue
            events = []
            offset = 0
            while offset < len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset:offset + length].rstrip(b"\0").decode(errors="replace")
                offset += length
                events.append(Event(wd, mask, name))
            return events

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
