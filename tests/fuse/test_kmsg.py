"""The view's kernel log on a real mount, read by util-linux ``dmesg`` (in a mount namespace
whose /dev/kmsg is the view's) and by a follower written to the log monitors' logic
(tests/helpers/kmsg_follow.py): each Xid a fault logs is one record, seen once by a reader
that follows from before the fault; an Xid storm leaves readers consistent and the daemon
answering. Deadlines are polled; how soon a follower sees a record is printed (the figure
bench/README.md keeps), never asserted."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mokkafs.fuse.stream import END
from tests.helpers.faults import START, fault_node
from tests.helpers.kmsg import (
    apply,
    dmesg,
    field,
    follower,
    kmsg_mount_of,
    kmsg_processes,
    node,
    running,
    xids,
)
from tests.helpers.live import profile_text, rename_over
from tests.helpers.mounts import REPO, wait_for


def test_dmesg_and_a_follower_see_each_xid_once(tmp_path: Path) -> None:
    with node(tmp_path) as (live, control):
        mnt = live.mount.path
        with follower(mnt) as follow, running(*dmesg(mnt, "--follow", "-r")) as watch:
            follow.until(lambda ls: "ready" in ls, "the follower seeked to the end")
            watch.until(lambda ls: any("NVRM: loading" in x for x in ls), "dmesg following")
            apply(control, tmp_path, "  - {name: lost, kind: gpu-lost, target: gpu0}\n"
                  "  - {name: ecc, kind: xid, target: gpu1, xid: 48, every: 0.01, count: 5}\n")
            for lines in (follow, watch):
                lines.until(lambda ls: len(xids(ls)) >= 6, "six Xids")
            # A marker after them: nothing more of the first six may come before it.
            apply(control, tmp_path, "  - {name: mark, kind: xid, target: gpu2, xid: 13}\n")
            for lines in (follow, watch):
                got = xids(lines.until(lambda ls: (13 in [x for _, x in xids(ls)]), "marker"))
                assert got == [("0000:1b:00", 79), *[("0000:43:00", 48)] * 5,
                               ("0000:52:00", 13)], got
        records = [line.split(" ", 1) for line in follow.lines if line[:1].isdigit()]
        seqs = [field(r, 1) for _, r in records]
        assert seqs == list(range(seqs[0], seqs[0] + 7))
        lags = [float(seen) - field(r, 2) / 1e6 for seen, r in records]
        assert min(lags) >= 0, lags  # never before its time
        print(f"kmsg: a follower saw each Xid {max(lags) * 1000:.1f} ms after its time at "
              "most")
        once = subprocess.run(dmesg(mnt, "-r"), capture_output=True, text=True, timeout=60)
        assert once.returncode == 0, once.stderr
        printed = once.stdout.splitlines()
        assert printed[0].startswith("<6>[") and "NVRM: loading NVIDIA" in printed[0]
        assert len(xids(printed)) == 7 and all(x.startswith("<3>[") for x in printed[1:])
        listing = subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control",
                                  str(control), "list"], capture_output=True, text=True,
                                 cwd=REPO, timeout=60).stdout
        assert re.search(r"^ecc\txid\tgpu1\tactive\t", listing, re.M), listing
        ready = live.ready()["faults"]
        assert isinstance(ready, list)
        assert {(f["name"], f["kind"]) for f in ready} == {
            ("lost", "gpu-lost"), ("ecc", "xid"), ("mark", "xid")}
        # Cleared, a fault's Xids stay logged, under the same numbers.
        cleared = subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control",
                                  str(control), "clear", "ecc", "lost"], capture_output=True,
                                 text=True, cwd=REPO, timeout=60)
        assert cleared.returncode == 0, cleared.stderr
        again = subprocess.run(dmesg(mnt, "-r"), capture_output=True, text=True, timeout=60)
        assert again.stdout == once.stdout
        faults = live.ready()["faults"]
        assert isinstance(faults, list)
        assert {f["name"] for f in faults} == {"mark"}


def test_an_xid_storm_leaves_readers_consistent_and_the_daemon_answering(
        tmp_path: Path) -> None:
    with node(tmp_path) as (live, control):
        mnt = live.mount.path
        gpu = mnt / "proc/driver/nvidia/gpus/0000:1b:00.0/information"
        before = gpu.read_text()
        with follower(mnt) as follow:
            follow.until(lambda ls: "ready" in ls, "the follower seeked to the end")
            apply(control, tmp_path, "  - {name: storm, kind: xid, target: gpu3, xid: 94, "
                  "every: 0.001, count: 1000}\n")
            answered = 0
            while len(xids(follow.lines)) < 1000:  # the daemon answers while it storms
                assert gpu.read_text() == before
                assert live.get("/readyz")[0] == 200
                answered += 1
                follow.until(lambda ls: True, "")
            follow.until(lambda ls: len(xids(ls)) >= 1000, "a thousand Xids")
        assert answered > 0 and "EPIPE" not in follow.lines
        seqs = [field(line.split(" ", 1)[1], 1) for line in follow.lines if line[:1].isdigit()]
        assert seqs == list(range(seqs[0], seqs[0] + 1000))
        # A reader from the start, O_NONBLOCK, as dmesg reads: every record once, then EAGAIN.
        fd = os.open(mnt / "dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        try:
            got = []
            while True:
                try:
                    got.append(os.read(fd, 8192).decode())
                except BlockingIOError:
                    break
            assert [field(r, 1) for r in got] == list(range(len(got)))
            assert len(got) == 1001
            os.lseek(fd, 0, os.SEEK_END)  # the end: nothing until the next record
            with pytest.raises(BlockingIOError):
                os.read(fd, 8192)
            assert os.lseek(fd, 0, os.SEEK_SET) == 0
            assert os.read(fd, 8192).startswith(b"6,0,")
            assert os.fstat(fd).st_size == END
            with pytest.raises(OSError) as caught:
                os.pread(fd, 8192, 5)
            assert caught.value.errno == errno.ESPIPE
        finally:
            os.close(fd)


def first_record(path: Path) -> bytes:
    """The oldest record, read as dmesg reads: O_NONBLOCK, from the start."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, 8192)
    finally:
        os.close(fd)


def test_readers_of_the_kmsg_mount_get_kmsg_semantics(tmp_path: Path) -> None:
    """dev/kmsg is served by a mount of its own, whose opens reach the daemon, in either
    mode (docs/kmsg.md; in no-open mode the view's connection sends no OPEN). Each reader
    keeps its own position; O_NONBLOCK at the end is EAGAIN; the seeks hold."""
    with node(tmp_path) as (live, _):
        mnt = live.mount.path
        (mnt / "proc/devices").read_bytes()  # no-open mode: the first open, ENOSYS for good
        own = kmsg_mount_of(mnt)
        assert own is not None and own.fstype == "fuse.mokkafs", own
        assert first_record(mnt / "dev/kmsg").startswith(b"6,0,")
        one = os.open(mnt / "dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        two = os.open(mnt / "dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert os.read(one, 8192).startswith(b"6,0,")
            with pytest.raises(BlockingIOError):
                os.read(one, 8192)  # one record so far: the next is not there
            assert os.read(two, 8192).startswith(b"6,0,")  # a position of its own
            assert os.lseek(two, 0, os.SEEK_END) == END
            with pytest.raises(BlockingIOError):
                os.read(two, 8192)
            assert os.lseek(one, 0, os.SEEK_SET) == 0
            assert os.read(one, 8192).startswith(b"6,0,")
            with pytest.raises(OSError) as caught:
                os.pread(one, 8192, 5)
            assert caught.value.errno == errno.ESPIPE
        finally:
            os.close(one)
            os.close(two)
        once = subprocess.run(dmesg(mnt, "-r"), capture_output=True, text=True, timeout=60)
        assert once.returncode == 0, once.stderr
        printed = once.stdout.splitlines()
        assert len(printed) == 1 and "NVRM: loading NVIDIA" in printed[0], printed


def test_a_swap_wakes_a_blocked_read_and_leaves_the_kmsg_mount(tmp_path: Path) -> None:
    """A read waiting at the end gets the Xid a fault applied later logs; a profile swap that
    adds names under dev/ (a MIG layout: the kernel hears of each) leaves dev/kmsg served."""
    with node(tmp_path) as (live, control):
        mnt = live.mount.path
        before = kmsg_mount_of(mnt)
        fd = os.open(mnt / "dev/kmsg", os.O_RDONLY)
        got: list[bytes] = []
        try:
            os.lseek(fd, 0, os.SEEK_END)
            reader = threading.Thread(target=lambda: got.append(os.read(fd, 8192)))
            reader.start()
            apply(control, tmp_path, "  - {name: lost, kind: gpu-lost, target: gpu0}\n")
            reader.join(timeout=30)
            assert not reader.is_alive(), "the waiting read was not woken"
        finally:
            os.close(fd)
        assert xids([got[0].decode()]) == [("0000:1b:00", 79)], got
        caps = set(os.listdir(mnt / "dev/nvidia-caps"))
        generation = live.generation()
        rename_over(live, profile_text("h100-mig"))
        live.wait_generation(generation + 1)
        assert set(os.listdir(mnt / "dev/nvidia-caps")) > caps, "no MIG instance's node"
        assert kmsg_mount_of(mnt) == before  # still mounted: no entry invalidation took it
        assert first_record(mnt / "dev/kmsg").startswith(b"6,0,")


def test_the_kmsg_mount_is_started_again_when_its_process_dies(tmp_path: Path) -> None:
    """Its process killed, the daemon logs it and starts another; the view's own mount
    serves throughout."""
    with node(tmp_path, expect=[r"the kernel log's process \d+ ended"]) as (
            live, _):
        mnt = live.mount.path
        devices = (mnt / "proc/devices").read_bytes()
        [first] = kmsg_processes(live.mount.process.pid)
        os.kill(first, signal.SIGKILL)

        def again() -> bool:
            now = kmsg_processes(live.mount.process.pid)
            if not now or now == [first]:
                return False
            try:
                return first_record(mnt / "dev/kmsg").startswith(b"6,0,")
            except OSError:
                return False  # its mount not yet in place
        wait_for(again, 30, "a kmsg mount process started again")
        assert (mnt / "proc/devices").read_bytes() == devices
        assert "the kernel log's process" in live.mount.log_text()
        assert live.get("/readyz")[0] == 200


def test_the_kmsg_mount_logs_on_the_daemons_clock(tmp_path: Path) -> None:
    """On a clock the test drives: a record is there exactly from its time on the daemon's
    clock, with that time as its usec (the kmsg mount's process keeps no clock of its
    own)."""
    with fault_node(tmp_path) as clocked:
        path = clocked.live.mount.path / "dev/kmsg"
        faults = tmp_path / "later.yaml"
        faults.write_text("faults:\n  - {name: lost, kind: gpu-lost, target: gpu0, after: 50}\n")
        assert clocked.fault("apply", str(faults)).returncode == 0
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert field(os.read(fd, 8192).decode(), 2) == int(START * 1e6)
            clocked.at(49.5)
            with pytest.raises(BlockingIOError):
                os.read(fd, 8192)
            clocked.at(50.0)
            record = os.read(fd, 8192).decode()
        finally:
            os.close(fd)
        assert field(record, 2) == int((START + 50) * 1e6)
        assert xids([record]) == [("0000:1b:00", 79)]
