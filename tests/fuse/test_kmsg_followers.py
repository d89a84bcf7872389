"""Followers of the view's kernel log, in the suite's cache mode (in both, ``dev/kmsg`` is the
kmsg mount, docs/kmsg.md): the daemon's stop is bounded while a follower waits; a killed
follower that reads its parent's open file ends; the file's flags at each read decide
whether it waits; many ``dmesg --follow`` all follow, and an open past the limit of readers
fails loudly. Deadlines are polled, never asserted as durations."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.fuse.stream import MAX_READERS
from tests.helpers.kmsg import (
    apply,
    blocked_in_read,
    dmesg,
    follower,
    forked_reader,
    kmsg_mount_of,
    kmsg_processes,
    node,
    running,
    xids,
)
from tests.helpers.mounts import wait_for

LOST = "  - {name: lost, kind: gpu-lost, target: gpu0}\n"
FOLLOWERS = 70  # more than the 64 reads that could once wait at once


def test_at_the_daemons_stop_a_waiting_read_gets_enotconn_and_no_process_is_left(
        tmp_path: Path) -> None:
    """SIGTERM ends the daemon while a follower still waits in its read, whatever that
    follower does: the ordered stop ends the kmsg mount first (SIGTERM to its process, which
    answers its waiting reads ENOTCONN and unmounts), then the view."""
    with node(tmp_path) as (live, _):
        mnt, daemon = live.mount.path, live.mount.process
        processes = kmsg_processes(daemon.pid)
        with follower(mnt) as follow:
            follow.until(lambda ls: "ready" in ls, "the follower seeked to the end")
            wait_for(lambda: blocked_in_read(follow.process.pid), 30, "the follower in read")
            daemon.send_signal(signal.SIGTERM)
            wait_for(lambda: daemon.poll() is not None, 60,
                     "the daemon's exit, its follower left waiting")
            follow.until(lambda ls: "ENOTCONN" in ls, "the follower's read ended ENOTCONN")
        assert daemon.returncode == 0
        assert processes
        wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in processes), 30,
                 "the kmsg process gone")
        assert kmsg_mount_of(mnt) is None


def test_a_killed_reader_of_its_parents_open_file_ends(tmp_path: Path) -> None:
    """A parent opens dev/kmsg and forks; the child reads, and is killed while its read
    waits: it ends with no record logged (the kernel interrupts the read, whoever reads it).
    The interrupted read took nothing: the parent's next read gets the next record."""
    with node(tmp_path) as (live, control):
        fd = os.open(live.mount.path / "dev/kmsg", os.O_RDONLY)
        child = 0
        try:
            assert b"NVRM: loading" in os.read(fd, 8192)  # the newest: the next one waits
            child = forked_reader(fd)
            wait_for(lambda: blocked_in_read(child), 30, "the child in read")
            os.kill(child, signal.SIGKILL)
            wait_for(lambda: os.waitpid(child, os.WNOHANG)[0] == child, 30,
                     "the killed child's end, with no record logged")
            child = 0
            apply(control, tmp_path, LOST)
            assert xids([os.read(fd, 8192).decode()]) == [("0000:1b:00", 79)]
        finally:
            if child:  # stuck in its read: a record answers it
                apply(control, tmp_path, "  - {name: free, kind: xid, target: gpu2, xid: 13}\n")
                os.waitpid(child, 0)
            os.close(fd)


NONBLOCK_AFTER_OPEN = """import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.lseek(fd, 0, os.SEEK_END)
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
try:
    os.read(fd, 8192)
except BlockingIOError:
    print("EAGAIN")
"""


def test_o_nonblock_set_after_the_open_makes_a_read_at_the_end_eagain(tmp_path: Path) -> None:
    """Open, seek to the end, make the descriptor non-blocking (fcntl, as an event loop does
    with a descriptor it is given), read: EAGAIN, as /dev/kmsg answers, not a wait."""
    with node(tmp_path) as (live, _):
        out = subprocess.run([sys.executable, "-c", NONBLOCK_AFTER_OPEN,
                              str(live.mount.path / "dev/kmsg")], capture_output=True,
                             text=True, timeout=60)
        assert (out.returncode, out.stdout) == (0, "EAGAIN\n"), out


def test_many_dmesg_followers_all_follow(tmp_path: Path) -> None:
    """util-linux ``dmesg --follow``, FOLLOWERS of them: each prints the log and waits for
    more; none ends; each prints the Xid a fault logs next."""
    with node(tmp_path) as (live, control), contextlib.ExitStack() as stack:
        mnt = live.mount.path
        watches = [stack.enter_context(running(*dmesg(mnt, "--follow", "-r")))
                   for _ in range(FOLLOWERS)]
        for watch in watches:
            watch.until(lambda ls: any("NVRM: loading" in x for x in ls), "dmesg following",
                        timeout=60)
        wait_for(lambda: all(w.process.poll() is not None or blocked_in_read(w.process.pid)
                             for w in watches), 60, "each dmesg waiting, or ended")
        ended = [w.process.returncode for w in watches if w.process.poll() is not None]
        assert not ended, f"{len(ended)} dmesg --follow ended: {ended}"
        apply(control, tmp_path, LOST)
        for watch in watches:
            watch.until(lambda ls: len(xids(ls)) == 1, "Xid 79 in each dmesg", timeout=60)


@contextlib.contextmanager
def open_files(needed: int) -> Iterator[None]:
    """The soft limit of open files raised to ``needed`` more than this process holds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(os.listdir("/proc/self/fd")) + needed
    if soft >= want:
        yield
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_open_past_the_limit_of_readers_fails_ebusy_and_says_so(tmp_path: Path) -> None:
    """MAX_READERS opens at once are served; one more fails EBUSY (where a follower sees it,
    never as an end of the log), and the daemon logs it and counts it; a close makes room."""
    with node(tmp_path, expect=["its limit: refusing opens"]) as (live, _), \
            open_files(MAX_READERS + 8):
        path = live.mount.path / "dev/kmsg"
        fds: list[int] = []
        try:
            for _ in range(MAX_READERS):
                fds.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
            with pytest.raises(OSError) as caught:
                os.open(path, os.O_RDONLY)
            assert caught.value.errno == errno.EBUSY
            assert live.metric("mokkafs_kmsg_opens_refused_total") == 1
            assert live.metric("mokkafs_kmsg_readers") == MAX_READERS
            assert f"has {MAX_READERS} readers, its limit" in live.mount.log_text()
            os.close(fds.pop())
            fds.append(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
            assert os.read(fds[-1], 8192).startswith(b"6,0,")
        finally:
            for fd in fds:
                os.close(fd)
