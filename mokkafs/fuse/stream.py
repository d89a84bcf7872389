"""Stream files (``dev/kmsg``): each open keeps its reader's position, and every read gives
one record, as /dev/kmsg does (kernel/printk/printk.c, ``devkmsg_read``, ``devkmsg_llseek``).
They are served through the kmsg mount (``mokkafs.fuse.relay``, docs/kmsg.md).

- Opened ``direct_io``: every read reaches the daemon with the file position, and the kernel
  moves the position by what the read gave.
- Seeks, told by that position: the file's size is ``END`` (``lseek(SEEK_END)`` puts the
  position there, and the next read starts after the newest record); a read at 0 starts at
  the oldest (``SEEK_SET`` 0, and ``SEEK_DATA``, which without FUSE_LSEEK the kernel answers
  itself: no ``dmesg -c`` clears this log, so it means the oldest too). Any other position
  than where the last read left it is ESPIPE, as kmsg answers such a seek.
- A read the next record is not there for waits for it, in its own task. ``O_NONBLOCK`` in
  the file's flags at that read (set at the open or by ``fcntl`` since): EAGAIN instead. It
  wakes when the record's time comes (on the daemon's clock) or the view is swapped; the
  relay cancels it when the kernel interrupts it.
- A reader whose next record the ring dropped gets EPIPE once, then the oldest kept.
- A buffer too small for the record: EINVAL.
- At most ``MAX_READERS`` opens at once. One more fails EBUSY, logged and counted
  (``refused``): a follower must never take a refusal for the end of the log.
- ``poll`` answers as ``devkmsg_poll``: readable when a read would not wait. A poller that
  will sleep leaves a notify; a task of the daemon's calls it once when the next record's
  time comes (checked again at each swap). The poller waits in the kernel, not in the
  daemon: no request is held, and nothing wakes while no record is due.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import select
from collections.abc import Callable
from dataclasses import dataclass

import pyfuse3
import trio

from mokkafs.clock import Clock, SleepUntil
from mokkafs.fuse.view import TreeHolder
from mokkafs.tree.nodes import File
from mokkafs.tree.stream import Records

log = logging.getLogger(__name__)

END = 1 << 62  # the size a stream file shows: where SEEK_END puts a reader
FIRST_HANDLE = 1 << 48  # stream handles, apart from any other handle or inode number
MAX_READERS = 1024
READABLE = select.POLLIN | select.POLLRDNORM
DROPPED = select.POLLERR | select.POLLPRI  # devkmsg_poll: the ring passed the reader
Notify = Callable[[], None]  # wakes a poller (the relay's NOTIFY)


@dataclass
class Reader:
    inode: int
    seq: int | None = None  # the next record's number (None: the oldest, at the first read)
    expect: int = 0  # the file position a read continues at
    watch: trio.CancelScope | None = None  # the task that will notify its poller


class Streams:
    def __init__(self, holder: TreeHolder, clock: Clock, sleep_until: SleepUntil) -> None:
        self.holder = holder
        self.clock = clock
        self.sleep_until = sleep_until
        self.readers: dict[int, Reader] = {}
        self.waiting = 0
        self.refused = 0  # opens refused at MAX_READERS, since the start
        self._full = False  # refusing, since the last refusal was logged
        self._next = itertools.count(FIRST_HANDLE)

    def owns(self, fh: int) -> bool:
        return fh in self.readers

    def open(self, inode: int, flags: int, pid: int) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)  # (kmsg's writers inject records: not here)
        if len(self.readers) >= MAX_READERS:
            self.refused += 1
            if not self._full:
                log.warning("the kernel log has %d readers, its limit: refusing opens (EBUSY; "
                            "process %d first) until one closes", MAX_READERS, pid)
            self._full = True
            raise pyfuse3.FUSEError(errno.EBUSY)
        fh = next(self._next)
        self.readers[fh] = Reader(inode)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    def release(self, fh: int) -> None:
        reader = self.readers.pop(fh, None)
        if reader is not None and reader.watch is not None:
            reader.watch.cancel()
        if reader is not None and self._full:
            self._full = False
            log.info("the kernel log has room for readers again (%d opens refused so far)",
                     self.refused)

    def report(self) -> dict[str, int]:
        """For the metrics: the readers and their reads waiting now, the opens refused since
        the start."""
        return {"readers": len(self.readers), "waiting": self.waiting, "refused": self.refused}

    def _records(self, inode: int) -> Records:
        entry = self.holder.tree.get(inode)
        node = entry.node if entry is not None else None
        if not isinstance(node, File) or node.stream is None:
            raise pyfuse3.FUSEError(errno.ENODEV)  # a swap removed it
        return node.stream.records

    async def read(self, fh: int, off: int, size: int, flags: int) -> bytes:
        """Read at file position ``off``; ``flags``: the file's, as they are at this read."""
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
            if flags & os.O_NONBLOCK:
                raise pyfuse3.FUSEError(errno.EAGAIN)
            await self._wait(records.next_at(now))

    def poll(self, fh: int, notify: Notify | None) -> int:
        """``READABLE`` when a read would not wait (and ``DROPPED`` too when it would get
        EPIPE), else 0. With ``notify`` and nothing to read, ``notify`` is called once when
        there is; a later poll of the same reader replaces it, its release drops it."""
        reader = self.readers[fh]
        if reader.watch is not None:
            reader.watch.cancel()
            reader.watch = None
        mask = self._mask(reader)
        if not mask and notify is not None:
            reader.watch = trio.CancelScope()
            trio.lowlevel.spawn_system_task(self._notify_when_readable, reader, reader.watch,
                                            notify)
        return mask

    def _mask(self, reader: Reader) -> int:
        records = self._records(reader.inode)
        now = self.clock()
        first = records.first(now)
        seq = first if reader.seq is None else reader.seq  # unread: a read at 0 takes the oldest
        if seq < first:
            return READABLE | DROPPED
        return READABLE if seq < records.count(now) else 0

    async def _notify_when_readable(self, reader: Reader, scope: trio.CancelScope,
                                    notify: Notify) -> None:
        """Sleep until the next record's time or a swap, until the reader has a record; then
        wake its poller. A system task: nothing may escape it."""
        with scope:
            try:
                while not self._mask(reader):
                    await self._sleep(self._records(reader.inode).next_at(self.clock()))
            except pyfuse3.FUSEError:
                pass  # the file left the view: a read answers its error now
            except Exception:  # a bug: wake the poller, whose read will tell
                log.exception("watching the kernel log for a poller failed")
            if reader.watch is scope:
                reader.watch = None
            try:
                notify()
            except Exception:  # the process is gone: nobody waits
                log.debug("a kernel log poller could not be woken", exc_info=True)

    async def _wait(self, when: float | None) -> None:
        """A read's wait: ``_sleep``, counted in ``waiting``."""
        self.waiting += 1
        try:
            await self._sleep(when)
        finally:
            self.waiting -= 1

    async def _sleep(self, when: float | None) -> None:
        """Until the daemon's clock reads ``when`` (None: no record is due), or a swap."""
        swapped = self.holder.swapped
        if when is None:
            await swapped.wait()
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._until, when, nursery.cancel_scope)
            await swapped.wait()
            nursery.cancel_scope.cancel()

    async def _until(self, when: float, scope: trio.CancelScope) -> None:
        await self.sleep_until(when)
        scope.cancel()
