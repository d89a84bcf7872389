"""poll on the kernel log at the FUSE edge (mokkafs.fuse.stream ``Streams.poll``) and through
the stream relay (mokkafs.fuse.relay ``POLL``/``NOTIFY``), with a clock the test sets: readable
only when a read would not wait (as ``devkmsg_poll``); a sleeping poller's notify is called
once when the next record's time comes, or at the swap that logs one; while no record is due
the daemon keeps no timer for it; a release drops it."""

from __future__ import annotations

import errno
import math
import os
import select
from functools import partial
from pathlib import Path

import pyfuse3
import pytest
import trio
import trio.testing

from mokkafs.clock import real_sleep_until
from mokkafs.faults.effects import applied
from mokkafs.fuse import relay
from mokkafs.fuse.stream import DROPPED, END, READABLE, Streams
from mokkafs.fuse.view import TreeHolder
from mokkafs.state import State
from mokkafs.surfaces import kmsg
from tests.helpers.faults import with_faults
from tests.helpers.profiles import tree_of
from tests.unit.test_kmsg import LOST, STORM, Clock
from tests.unit.test_kmsg_relay import Process, relayed

LATER = LOST.replace("after: 5", "after: 500")
SLOW = "  - {name: slow, kind: pcie-degraded, target: gpu1, gen: 3}\n"


def streams_of(state: State, clock: Clock) -> tuple[Streams, int]:
    """As the daemon's: a wait sleeps on trio's clock until the time the test's clock names."""
    tree = tree_of(state)
    entry = tree.resolve(kmsg.PATH)
    assert entry is not None
    return Streams(TreeHolder(tree), clock, partial(real_sleep_until, clock)), entry.inode


async def at_the_end(streams: Streams, fh: int) -> None:
    """A read at the end (after lseek SEEK_END): EAGAIN, and the reader's place is known."""
    with pytest.raises(pyfuse3.FUSEError) as caught:
        await streams.read(fh, END, 8192, os.O_NONBLOCK)
    assert caught.value.errno == errno.EAGAIN


def test_a_poller_is_notified_when_a_record_comes(tmp_path: Path) -> None:
    quiet = applied(with_faults(tmp_path, LATER), 0.0)
    faulty = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 0")), 1.0)
    streams, inode = streams_of(quiet, Clock(1.0))
    fh = streams.open(inode, os.O_RDONLY | os.O_NONBLOCK, os.getpid()).fh
    woken: list[int] = []

    async def main() -> None:
        assert streams.poll(fh, None) == READABLE  # unread: a read at 0 takes the load line
        await at_the_end(streams, fh)
        assert streams.poll(fh, None) == 0
        assert streams.poll(fh, lambda: woken.append(1)) == 0
        await trio.testing.wait_all_tasks_blocked()
        # The record is due at 500 s: one timer then, none sooner (nothing polls meanwhile).
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline > 400
        assert not woken
        streams.holder.tree = tree_of(faulty)  # a fault applied now: a swap
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [1]
        assert streams.poll(fh, lambda: woken.append(2)) == READABLE  # no watch: readable
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [1]

    trio.run(main)


def test_nothing_due_keeps_no_timer_and_a_release_drops_the_poller(tmp_path: Path) -> None:
    quiet = applied(with_faults(tmp_path, SLOW), 0.0)  # a fault that logs nothing
    streams, inode = streams_of(quiet, Clock(1.0))
    fh = streams.open(inode, os.O_RDONLY | os.O_NONBLOCK, os.getpid()).fh
    woken: list[int] = []

    async def main() -> None:
        await at_the_end(streams, fh)
        assert streams.poll(fh, lambda: woken.append(1)) == 0
        await trio.testing.wait_all_tasks_blocked()
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
        streams.release(fh)
        await trio.testing.wait_all_tasks_blocked()
        streams.holder.tree = streams.holder.tree  # a swap: no poller is left to wake
        await trio.testing.wait_all_tasks_blocked()
        assert not woken

    trio.run(main)


def test_a_reader_the_ring_passed_polls_dropped(tmp_path: Path) -> None:
    storm = applied(with_faults(tmp_path, STORM.replace("1000}", "9000}")), 0.0)
    clock = Clock(10.0)
    streams, inode = streams_of(storm, clock)
    fh = streams.open(inode, os.O_RDONLY | os.O_NONBLOCK, os.getpid()).fh

    async def main() -> None:
        await streams.read(fh, 0, 8192, os.O_NONBLOCK)  # the load line: next is the first Xid
        assert streams.poll(fh, None) == READABLE
        clock.now = 20.0  # 9000 Xids since: the ring kept the newest 4096
        assert streams.poll(fh, None) == READABLE | DROPPED
        assert select.POLLIN & READABLE and select.POLLERR & DROPPED

    trio.run(main)


def test_the_relay_polls_and_notifies_by_file(tmp_path: Path) -> None:
    quiet = applied(with_faults(tmp_path, LATER), 0.0)
    faulty = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 0")), 1.0)
    streams, inode = streams_of(quiet, Clock(1.0))

    async def exchange(child: Process, nursery: trio.Nursery) -> None:
        fh, _ = await child.call(relay.OPEN, os.O_RDONLY | os.O_NONBLOCK, os.getpid())
        with pytest.raises(OSError):  # EAGAIN: at the end
            await child.call(relay.READ, fh, END, 8192, os.O_NONBLOCK)
        assert (await child.call(relay.POLL, fh, 1))[0] == 0
        await trio.testing.wait_all_tasks_blocked()
        assert not child.notified
        streams.holder.tree = tree_of(faulty)  # a fault applied now: a swap
        with trio.fail_after(10):
            await child.notice.wait()
        assert child.notified == [fh]
        assert (await child.call(relay.POLL, fh, 0))[0] == READABLE
        nursery.cancel_scope.cancel()

    relayed(streams, inode, exchange)
