"""Stream files (``dev/kmsg``) at the FUSE edge: each open keeps its reader's position, and
every read gives one record, as /dev/kmsg does (kernel/printk/printk.c, ``devkmsg_read``,
``devkmsg_llseek``).

- Opened ``direct_io``: every read reaches the daemon with the file position, and the kernel
  moves the position by what the read gave.
- Seeks, told by that position: the file's size is ``END`` (``lseek(SEEK_END)`` puts the
  position there, and the next read starts after the newest record); a read at 0 starts at
  the oldest (``SEEK_SET`` 0, and ``SEEK_DATA``, which without FUSE_LSEEK the kernel answers
  itself: no ``dmesg -c`` clears this log, so it means the oldest too). Any other position
  than where the last read left it is ESPIPE, as kmsg answers such a seek.
- A read the next record is not there for waits for it (``O_NONBLOCK``: EAGAIN), in its own
  task: never the FUSE loop. It wakes when the record's time comes or the view is swapped.
- A reader whose next record the ring dropped gets EPIPE once, then the oldest kept.
- A buffer too small for the record: EINVAL.

pyfuse3 passes no FUSE_INTERRUPT to a handler, so a waiting read looks at its opener
every ``CHECK_SECONDS``: one with a signal pending (killed, or interrupted) gets EINTR, so
its process is not held in the kernel until the next record. At most ``MAX_WAITING`` reads
wait at once (each holds one of pyfuse3's worker tasks); one more gets EAGAIN.
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass

import pyfuse3
import trio

from mokkafs.fuse.view import TreeHolder
from mokkafs.tree.nodes import File
from mokkafs.tree.stream import Records

END = 1 << 62  # the size a stream file shows: where SEEK_END puts a reader
FIRST_HANDLE = 1 << 48  # stream handles, apart from any other handle or inode number
MAX_WAITING = 64
CHECK_SECONDS = 0.2


@dataclass
class Reader:
    inode: int
    pid: int
    nonblocking: bool
    seq: int | None = None  # the next record's number (None: the oldest, at the first read)
    expect: int = 0  # the file position a read continues at


class Streams:
    def __init__(self, holder: TreeHolder, clock: Callable[[], float]) -> None:
        self.holder = holder
        self.clock = clock
        self.readers: dict[int, Reader] = {}
        self.waiting = 0
        self._next = itertools.count(FIRST_HANDLE)

    def owns(self, fh: int) -> bool:
        return fh in self.readers

    def open(self, inode: int, flags: int, pid: int) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)  # (kmsg's writers inject records: not here)
        fh = next(self._next)
        self.readers[fh] = Reader(inode, pid, bool(flags & os.O_NONBLOCK))
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    def release(self, fh: int) -> None:
        self.readers.pop(fh, None)

    def _records(self, inode: int) -> Records:
        entry = self.holder.tree.get(inode)
        node = entry.node if entry is not None else None
        if not isinstance(node, File) or node.stream is None:
            raise pyfuse3.FUSEError(errno.ENODEV)  # a swap removed it
        return node.stream.records

    async def read(self, fh: int, off: int, size: int) -> bytes:
        reader = self.readers[fh]
        records = self._records(reader.inode)
        now = self.clock()
        if off != reader.expect or reader.seq is None:
            if off == 0:
                reader.seq = records.first(now)
            elif off == END:
                reader.seq = records.count(now)
            else:
                raise pyfuse3.FUSEError(errno.ESPIPE)
            reader.expect = off
        while True:
            records = self._records(reader.inode)
            now = self.clock()
            if reader.seq < records.first(now):
                reader.seq = records.first(now)
                raise pyfuse3.FUSEError(errno.EPIPE)
            if reader.seq < records.count(now):
                data = records.record(reader.seq)
                if len(data) > size:
                    raise pyfuse3.FUSEError(errno.EINVAL)
                reader.seq += 1
                reader.expect = off + len(data)
                return data
            if reader.nonblocking or self.waiting >= MAX_WAITING:
                raise pyfuse3.FUSEError(errno.EAGAIN)
            await self._wait(reader, records.next_at(now))

    async def _wait(self, reader: Reader, when: float | None) -> None:
        """Until ``when`` (None: no record is due), a swap, or the next look at the opener."""
        swapped = self.holder.swapped
        self.waiting += 1
        try:
            step = CHECK_SECONDS if when is None else min(CHECK_SECONDS,
                                                         max(0.0, when - self.clock()))
            with trio.move_on_after(step):
                await swapped.wait()
        finally:
            self.waiting -= 1
        if signalled(reader.pid):
            raise pyfuse3.FUSEError(errno.EINTR)


def signalled(pid: int) -> bool:
    """Whether process ``pid`` has a signal pending that it does not block, or is gone.
    Pid 0 (an opener outside the daemon's PID namespace) cannot be looked at: never."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
    except OSError:
        return True
    pending = int(fields.get("SigPnd", "0"), 16) | int(fields.get("ShdPnd", "0"), 16)
    return bool(pending & ~int(fields.get("SigBlk", "0"), 16))
