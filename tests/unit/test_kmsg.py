"""The kernel log of a State (mokkafs.surfaces.kmsg), the Xid lines its faults log
(mokkafs.faults.xid), and a reader's position at the FUSE edge (mokkafs.fuse.stream), driven
with a clock the test sets."""

from __future__ import annotations

import errno
import logging
import os
import re
from pathlib import Path

import pyfuse3
import pytest
import trio
import trio.testing

from mokkafs.errors import ProfileError
from mokkafs.faults import kernel_log
from mokkafs.faults.book import FaultBook
from mokkafs.faults.effects import applied, carry
from mokkafs.fuse.stream import END, MAX_READERS, Streams
from mokkafs.fuse.view import TreeHolder
from mokkafs.layers.registry import Layers
from mokkafs.profile.schema import Fault
from mokkafs.profile.xid import MAX_XID_RECORDS
from mokkafs.serve.record import record, restore, restored_state
from mokkafs.state import State
from mokkafs.surfaces import kmsg
from mokkafs.tree.nodes import File
from tests.helpers.faults import with_faults
from tests.helpers.profiles import H100_GPU0, tree_of

# Documentation/ABI/testing/dev-kmsg: "prio,seq,usec,flags;text\n"
RECORD = re.compile(rb"(\d+),(\d+),(\d+),([-c]);([ -~]*)\n")
STORM = "  - {name: storm, kind: xid, target: gpu1, xid: 48, after: 10, every: 0.001, " \
    "count: 1000}\n"
LOST = "  - {name: lost, kind: gpu-lost, target: gpu0, after: 5}\n"


def log_of(state: State) -> kernel_log.Log:
    entry = tree_of(state).resolve(kmsg.PATH)
    assert entry is not None and isinstance(entry.node, File) and entry.node.stream
    log = entry.node.stream.records
    assert isinstance(log, kernel_log.Log)
    return log


def parsed(data: bytes) -> tuple[int, int, int, str]:
    m = RECORD.fullmatch(data)
    assert m, data
    return int(m[1]), int(m[2]), int(m[3]), m[5].decode()


def test_gpu_lost_logs_xid_79_in_the_drivers_format(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, LOST), 100.0)
    log = log_of(state)
    assert log.count(104.9) == 1  # the driver's load line alone
    prio, seq, usec, text = parsed(log.record(0))
    assert (prio, seq) == (kernel_log.LOAD_LEVEL, 0) and text.startswith("NVRM: loading NVIDIA")
    assert log.count(105.0) == 2 and log.next_at(104.0) == 105.0 and log.next_at(105.0) is None
    prio, seq, usec, text = parsed(log.record(1))
    assert (prio, seq, usec) == (kernel_log.XID_LEVEL, 1, 105_000_000)
    assert text == f"NVRM: Xid (PCI:{H100_GPU0[:-2]}): 79, pid='<unknown>', name=<unknown>, " \
        "GPU has fallen off the bus."


def test_an_xid_storm_is_numbered_in_time_order_and_the_ring_keeps_the_newest(
        tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, STORM + LOST), 0.0)
    log = log_of(state)
    assert log.count(9.9995) == 2  # the load line and Xid 79 at 5 s
    assert log.count(10.5) == 2 + 501
    assert log.count(11.0) == 2 + 1000
    stamps = [parsed(log.record(seq))[2] for seq in range(log.count(11.0))]
    assert stamps == sorted(stamps)
    assert {parsed(log.record(s))[3].split(": ")[2].split(",")[0] for s in range(2, 1002)} \
        == {"48"}
    assert log.first(11.0) == 0
    big = applied(with_faults(tmp_path, STORM.replace("1000}", "9000}")), 0.0)
    log = log_of(big)
    assert log.count(20.0) == 9001 and log.first(20.0) == 9001 - kernel_log.RING


@pytest.mark.parametrize(("fault", "where", "says"), [
    ("{name: x, kind: xid, target: gpu0}", "faults[0].xid", "xid needs xid"),
    ("{name: x, kind: xid, target: gpu0, xid: 48, every: 0.0001, count: 5}",
     "faults[0].every", "below the floor"),
    ("{name: x, kind: xid, target: gpu0, xid: 48, count: 5}", "faults[0]", "needs every"),
    ("{name: x, kind: xid, target: gpu9, xid: 48}", "faults[0].target", "no GPU"),
    ("{name: x, kind: xid, target: gpu0, xid: 48, for: 3}", "faults[0].for", "does not use"),
])
def test_a_bad_xid_fault_is_refused_naming_its_field(tmp_path: Path, fault: str, where: str,
                                                     says: str) -> None:
    with pytest.raises(ProfileError) as caught:
        with_faults(tmp_path, f"  - {fault}\n")
    assert where in str(caught.value) and says in str(caught.value), str(caught.value)


def test_the_xids_a_node_logs_are_bounded(tmp_path: Path) -> None:
    count = MAX_XID_RECORDS // 10000 + 1
    faults = "".join(f"  - {{name: s{i}, kind: xid, target: gpu0, xid: 48, every: 1, "
                     f"count: 10000}}\n" for i in range(count))
    with pytest.raises(ProfileError, match="Xids"):
        with_faults(tmp_path, faults)


NONBLOCK = os.O_RDONLY | os.O_NONBLOCK  # a read's flags: the file's, as they are then


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    async def sleep_until(self, when: float) -> None:
        while self.now < when:  # noqa: ASYNC110 (the test sets the time; no event)
            await trio.sleep(0.001)


def streams_of(state: State, clock: Clock) -> tuple[Streams, int]:
    tree = tree_of(state)
    entry = tree.resolve(kmsg.PATH)
    assert entry is not None
    return Streams(TreeHolder(tree), clock, clock.sleep_until), entry.inode


def test_a_reader_gets_one_record_per_read_and_seeks_as_kmsg_does(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, STORM + LOST), 0.0)
    clock = Clock(10.0025)  # the load line, Xid 79, three of the storm
    streams, inode = streams_of(state, clock)
    fh = streams.open(inode, os.O_RDONLY | os.O_NONBLOCK, os.getpid()).fh

    async def reads() -> None:
        off, seqs = 0, []
        for _ in range(5):
            data = await streams.read(fh, off, 8192, NONBLOCK)
            seqs.append(parsed(data)[1])
            off += len(data)
        assert seqs == [0, 1, 2, 3, 4]
        with pytest.raises(pyfuse3.FUSEError) as caught:  # O_NONBLOCK, nothing new
            await streams.read(fh, off, 8192, NONBLOCK)
        assert caught.value.errno == errno.EAGAIN
        clock.now = 10.004
        assert parsed(await streams.read(fh, off, 8192, NONBLOCK))[1] == 5
        assert parsed(await streams.read(fh, 0, 8192, NONBLOCK))[1] == 0  # SEEK_SET, SEEK_DATA
        clock.now = 10.5
        with pytest.raises(pyfuse3.FUSEError) as caught:  # SEEK_END: after the newest
            await streams.read(fh, END, 8192, NONBLOCK)
        assert caught.value.errno == errno.EAGAIN
        clock.now = 10.501
        assert parsed(await streams.read(fh, END, 8192, NONBLOCK))[1] == 2 + 501
        with pytest.raises(pyfuse3.FUSEError) as caught:  # kmsg seeks nowhere else
            await streams.read(fh, 7, 8192, NONBLOCK)
        assert caught.value.errno == errno.ESPIPE
        with pytest.raises(pyfuse3.FUSEError) as caught:  # a buffer too small for it
            await streams.read(fh, 0, 10, NONBLOCK)
        assert caught.value.errno == errno.EINVAL

    trio.run(reads)
    streams.release(fh)
    assert not streams.owns(fh)


def test_a_reader_the_ring_overtook_gets_epipe_then_the_oldest_kept(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, STORM.replace("1000}", "9000}")), 0.0)
    clock = Clock(10.0)
    streams, inode = streams_of(state, clock)
    fh = streams.open(inode, os.O_RDONLY | os.O_NONBLOCK, os.getpid()).fh

    async def reads() -> None:
        data = await streams.read(fh, 0, 8192, NONBLOCK)
        clock.now = 20.0  # 9000 logged since: the ring dropped the next one
        with pytest.raises(pyfuse3.FUSEError) as caught:
            await streams.read(fh, len(data), 8192, NONBLOCK)
        assert caught.value.errno == errno.EPIPE
        oldest = await streams.read(fh, len(data), 8192, NONBLOCK)
        assert parsed(oldest)[1] == 9001 - kernel_log.RING

    trio.run(reads)


def test_a_blocking_read_waits_for_the_next_record_and_a_swap_wakes_it(
        tmp_path: Path) -> None:
    quiet = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 500")), 0.0)
    clock = Clock(1.0)
    streams, inode = streams_of(quiet, clock)
    fh = streams.open(inode, os.O_RDONLY, os.getpid()).fh
    faulty = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 0")), 1.0)

    async def reads() -> None:
        first = await streams.read(fh, 0, 8192, os.O_RDONLY)
        got: list[bytes] = []
        async with trio.open_nursery() as nursery:
            async def follow() -> None:
                got.append(await streams.read(fh, len(first), 8192, os.O_RDONLY))
            nursery.start_soon(follow)
            await trio.testing.wait_all_tasks_blocked()
            assert not got and streams.waiting == 1
            streams.holder.tree = tree_of(faulty)  # a fault applied now: a swap
        assert parsed(got[0])[3].endswith("GPU has fallen off the bus.")

    trio.run(reads)


def test_the_file_flags_at_each_read_decide_whether_it_waits(tmp_path: Path) -> None:
    """O_NONBLOCK as the file has it at the read (an fcntl after the open counts), as
    devkmsg_read looks at file->f_flags; not as it was opened."""
    quiet = applied(with_faults(tmp_path, LOST.replace("after: 5", "after: 500")), 0.0)
    streams, inode = streams_of(quiet, Clock(1.0))
    blocking = streams.open(inode, os.O_RDONLY, os.getpid()).fh
    nonblocking = streams.open(inode, NONBLOCK, os.getpid()).fh

    async def reads() -> None:
        with pytest.raises(pyfuse3.FUSEError) as caught:  # made non-blocking since
            await streams.read(blocking, END, 8192, NONBLOCK)
        assert caught.value.errno == errno.EAGAIN
        async with trio.open_nursery() as nursery:  # made blocking since: it waits
            nursery.start_soon(streams.read, nonblocking, END, 8192, os.O_RDONLY)
            await trio.testing.wait_all_tasks_blocked()
            assert streams.waiting == 1
            nursery.cancel_scope.cancel()
        assert streams.waiting == 0

    trio.run(reads)


def test_an_open_past_the_readers_limit_fails_ebusy_logged_and_counted(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, expected_logs: list[str]) -> None:
    """Never the look of an end of the log: the open fails (a follower sees it), the daemon
    logs it once while the readers stay at the limit, and counts each refusal."""
    expected_logs.append("its limit: refusing opens")
    streams, inode = streams_of(applied(with_faults(tmp_path, LOST), 0.0), Clock(1.0))
    handles = [streams.open(inode, os.O_RDONLY, 1).fh for _ in range(MAX_READERS)]
    with caplog.at_level(logging.INFO, logger="mokkafs.fuse.stream"):
        for _ in range(2):
            with pytest.raises(pyfuse3.FUSEError) as caught:
                streams.open(inode, os.O_RDONLY, 4242)
            assert caught.value.errno == errno.EBUSY
        assert streams.report() == {"readers": MAX_READERS, "waiting": 0, "refused": 2}
        streams.release(handles[0])
        assert streams.owns(streams.open(inode, os.O_RDONLY, 1).fh)
    [full, room] = [r.getMessage() for r in caplog.records]
    assert f"{MAX_READERS} readers, its limit" in full and "process 4242" in full
    assert "room for readers again (2 opens refused" in room


def test_what_was_logged_stays_logged_across_changes_of_state(tmp_path: Path) -> None:
    """A new State takes over the records logged before it (faults.effects.carry): a cleared
    fault's Xids stay, an unchanged fault's are logged once, numbers never shift."""
    both = applied(with_faults(tmp_path, STORM + LOST), 0.0)
    before = log_of(both)
    lines = [before.record(s) for s in range(before.count(10.5005))]
    cleared = carry(both, with_faults(tmp_path, LOST), 10.5005)  # the storm cleared mid-way
    after = log_of(cleared)
    assert len(lines) == 2 + 501
    assert [after.record(s) for s in range(after.count(10.5005))] == lines
    assert after.count(100.0) == len(lines) and after.next_at(10.5005) is None
    again = carry(cleared, with_faults(tmp_path, STORM + LOST), 20.0)  # applied anew at 20
    log = log_of(again)
    assert [log.record(s) for s in range(len(lines))] == lines
    assert log.count(19.9) == len(lines) and log.count(31.0) == len(lines) + 1000
    assert parsed(log.record(len(lines)))[2] == 30_000_000
    kept = log_of(carry(again, with_faults(tmp_path, STORM + LOST), 30.5))  # no change
    assert [kept.record(s) for s in range(log.count(31.0))] == \
        [log.record(s) for s in range(log.count(31.0))]


def test_an_xid_fault_applied_at_run_time_outlives_the_daemon(tmp_path: Path) -> None:
    """Kept in the state file as written (its Xid and text too), and applied again."""
    profile = with_faults(tmp_path, LOST)
    fault = Fault.model_validate({"name": "gsp", "kind": "xid", "target": "gpu1", "xid": 119,
                                  "text": "Timeout after 6s"})
    book = FaultBook()
    book.apply([fault], profile, "faults.yaml")
    state = applied(book.merge(profile), 50.0)
    back = restore(record(Layers(book), state, "boot", 60.0, 1e9), "boot", 70.0, 1e9 + 10)
    assert back.layers.faults.control["gsp"] == fault and back.origins["gsp"] == 50.0
    log = log_of(restored_state(profile, back, 70.0))
    assert parsed(log.record(log.count(70.0) - 1))[3].endswith("119, pid='<unknown>', "
                                                                "name=<unknown>, Timeout after 6s")
