"""poll(2) on the view's kernel log, in the suite's cache mode (both passes): as the kernel's
/dev/kmsg (``devkmsg_poll``), the file is readable only when a read would not wait, and a
poller sleeping in the kernel wakes when a fault logs an Xid. Deadlines are polled; no
duration is asserted."""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path

from tests.helpers.kmsg import RECORD, XID, apply, node


def test_a_poller_sleeps_until_an_xid_is_logged(tmp_path: Path) -> None:
    with node(tmp_path) as (live, control):
        fd = os.open(live.mount.path / "dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.lseek(fd, 0, os.SEEK_END)
            try:
                os.read(fd, 8192)
                raise AssertionError("a record after the end")
            except BlockingIOError:
                pass  # the daemon now knows this reader is at the end
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            assert poller.poll(0) == []  # nothing to read: not readable
            woken: list[list[tuple[int, int]]] = []
            sleeper = threading.Thread(target=lambda: woken.append(poller.poll(120_000)))
            sleeper.start()
            apply(control, tmp_path, "  - {name: lost, kind: gpu-lost, target: gpu0}\n")
            sleeper.join(timeout=120)
            assert woken and woken[0] and woken[0][0][1] & select.POLLIN, woken
            record = os.read(fd, 8192).decode()
            m = RECORD.fullmatch(record.rstrip("\n"))
            assert m and (x := XID.search(m[4])) and (x[1], x[2]) == ("0000:1b:00", "79"), record
            assert poller.poll(0) == []  # read: nothing more
        finally:
            os.close(fd)
