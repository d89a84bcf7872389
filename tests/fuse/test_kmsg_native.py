"""The kmsg mount's process (``mokkafs-kmsg``, native/mokkafs_kmsg.c) on a real mount, the
daemon's side of its socket played here to relay.py's formats: its root is one read-only
file of the stream size; each open, read and release reaches the daemon with the opener's
flags and PID, the handle and the offset (a read: the file's flags at that read); replies
are taken in any order, errors pass as their errno; a killed reader's waiting read reaches
the daemon as INTERRUPT; its mount has the options the view's has; a stop signal answers a
waiting read ENOTCONN and unmounts; the daemon's end closing ends it without unmounting; a
mount that fails is an error and exit status 1. The daemon's own use of it:
tests/fuse/test_kmsg.py and tests/fuse/test_kmsg_followers.py."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mokkafs.fuse import attrs, relay
from mokkafs.fuse.mount import options
from mokkafs.host import linux
from mokkafs.host.mountinfo import FSTYPE, fsname, mounted_at
from mokkafs.serve.kmsg import BINARY
from tests.helpers.kmsg import forked_reader
from tests.helpers.mounts import wait_for


class Daemon:
    """The daemon's end: requests in, replies out."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def next(self) -> tuple[int, int, int, int, int, int]:
        message = self.sock.recv(relay.LARGEST)
        assert len(message) == relay.REQUEST.size, message
        return relay.REQUEST.unpack(message)

    def answer(self, number: int, error: int = 0, value: int = 0, data: bytes = b"") -> None:
        self.sock.send(relay.reply(number, error, value, data))


@contextmanager
def kmsg_mount(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Daemon, Path]]:
    """The process mounted over a file of ``tmp_path``, once it sent MOUNTED; afterwards
    killed, and its mount detached, if the test left either."""
    path = tmp_path / "kmsg"
    path.touch()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.settimeout(30)
    process = subprocess.Popen([str(BINARY), str(theirs.fileno()), str(path)],
                               pass_fds=(theirs.fileno(),))
    theirs.close()
    try:
        daemon = Daemon(ours)
        assert daemon.next()[:2] == (0, relay.MOUNTED)
        yield process, daemon, path
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        ours.close()
        if mounted_at(str(path)):
            linux.umount_lazily(str(path))


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """``work`` run in a thread of its own: its result, or the OSError it raised."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except OSError as exc:
            out.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def opened(daemon: Daemon, path: Path, fh: int, flags: int = os.O_RDONLY) -> int:
    """``path`` opened, the daemon answering handle ``fh``; checks what the OPEN carried."""
    thread, out = in_thread(lambda: os.open(path, flags))
    number, op, got_flags, pid, _, _ = daemon.next()
    assert op == relay.OPEN and got_flags & os.O_ACCMODE == flags & os.O_ACCMODE
    assert Path(f"/proc/{os.getpid()}/task/{pid}").exists(), pid  # the opener: this process
    daemon.answer(number, value=fh)
    thread.join(timeout=30)
    assert isinstance(out[0], int), out
    return out[0]


def test_requests_reach_the_daemon_and_replies_come_in_any_order(tmp_path: Path) -> None:
    with kmsg_mount(tmp_path) as (process, daemon, path):
        info = os.stat(path)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o444
        assert info.st_size == attrs.STREAM_SIZE
        [entry] = mounted_at(str(path))
        wanted = options(path)
        assert entry.fstype == FSTYPE and entry.source == fsname(path)
        assert f"fsname={entry.source}" in wanted and f"subtype={FSTYPE.split('.')[1]}" in wanted
        assert "ro" in wanted and "ro" in entry.options.split(",")
        assert wanted - {"ro", f"fsname={entry.source}", f"subtype={FSTYPE.split('.')[1]}"} \
            <= set(entry.super_options.split(",")), entry.super_options
        one, two = opened(daemon, path, 7), opened(daemon, path, 8, os.O_RDONLY | os.O_NONBLOCK)
        first, got_one = in_thread(lambda: os.read(one, 100))
        number_one, op, fh, off, size, flags = daemon.next()
        assert (op, fh, off, size, flags & os.O_NONBLOCK) == (relay.READ, 7, 0, 100, 0)
        second, got_two = in_thread(lambda: os.read(two, 100))
        number_two, op, fh, off, size, flags = daemon.next()  # the first read waits: it came
        assert (op, fh, off, size) == (relay.READ, 8, 0, 100) and flags & os.O_NONBLOCK
        daemon.answer(number_two, data=b"two\n")
        second.join(timeout=30)
        assert got_two == [b"two\n"] and first.is_alive()
        daemon.answer(number_one, data=b"one\n")
        first.join(timeout=30)
        assert got_one == [b"one\n"]
        _, again = in_thread(lambda: os.read(two, 100))
        number, op, fh, off, _, _ = daemon.next()
        assert (op, fh, off) == (relay.READ, 8, 4)  # direct_io: the position moved by 4
        daemon.answer(number, error=errno.EAGAIN)
        wait_for(lambda: bool(again), 30, "the read answered")
        assert isinstance(again[0], BlockingIOError), again
        for fd, fh in ((one, 7), (two, 8)):
            os.close(fd)
            number, op, got, *_ = daemon.next()
            assert (op, got) == (relay.RELEASE, fh)
            daemon.answer(number)
        assert process.poll() is None


def test_a_read_carries_the_files_flags_as_they_are_at_that_read(tmp_path: Path) -> None:
    """O_NONBLOCK set by fcntl after the open reaches the daemon with the next read
    (fuse_read_in.flags), and so does clearing it: /dev/kmsg looks at the flags at each read."""
    with kmsg_mount(tmp_path) as (_, daemon, path):
        fd = opened(daemon, path, 5)
        try:
            for nonblocking in (True, False):
                flags = fcntl.fcntl(fd, fcntl.F_GETFL)
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK if nonblocking
                            else flags & ~os.O_NONBLOCK)
                reader, got = in_thread(lambda: os.read(fd, 100))
                number, op, fh, *_, read_flags = daemon.next()
                assert (op, fh, bool(read_flags & os.O_NONBLOCK)) == (relay.READ, 5, nonblocking)
                daemon.answer(number, error=errno.EAGAIN)
                reader.join(timeout=30)
                assert isinstance(got[0], BlockingIOError), got
        finally:
            os.close(fd)
            assert daemon.next()[1] == relay.RELEASE


def test_a_killed_reader_of_a_shared_file_has_its_read_interrupted(tmp_path: Path) -> None:
    """A child reads the file its parent opened (the daemon never saw its PID) and is killed
    while its read waits: the kernel's FUSE_INTERRUPT reaches the daemon as INTERRUPT with
    that read's number; the read's answer (EINTR) lets the child die."""
    with kmsg_mount(tmp_path) as (_, daemon, path):
        fd = opened(daemon, path, 6)
        child = forked_reader(fd)
        number, op, *_ = daemon.next()
        try:
            assert op == relay.READ
            os.kill(child, signal.SIGKILL)
            assert daemon.next()[:2] == (number, relay.INTERRUPT)
        finally:
            daemon.answer(number, error=errno.EINTR)  # (else the killed child waits for it)
            _, status = os.waitpid(child, 0)
            os.close(fd)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def waiting_read_ended(daemon: Daemon, path: Path, end: Callable[[], object]) -> None:
    """A read the daemon never answers, then ``end()``: the read gets ENOTCONN."""
    fd = opened(daemon, path, 9)
    try:
        reader, got = in_thread(lambda: os.read(fd, 100))
        assert daemon.next()[1] == relay.READ  # never answered
        end()
        reader.join(timeout=30)
        assert isinstance(got[0], OSError) and got[0].errno == errno.ENOTCONN, got
    finally:
        with contextlib.suppress(OSError):  # the connection is gone: its FLUSH fails
            os.close(fd)


def test_a_stop_signal_answers_a_waiting_read_enotconn_and_unmounts(tmp_path: Path) -> None:
    with kmsg_mount(tmp_path) as (process, daemon, path):
        waiting_read_ended(daemon, path, lambda: process.send_signal(signal.SIGTERM))
        assert process.wait(timeout=30) == 0
        assert not mounted_at(str(path))
        assert daemon.sock.recv(relay.LARGEST) == b""  # its end closed


def test_the_daemons_end_closing_ends_it_without_unmounting(tmp_path: Path) -> None:
    with kmsg_mount(tmp_path) as (process, daemon, path):
        # the daemon is gone
        waiting_read_ended(daemon, path, lambda: daemon.sock.shutdown(socket.SHUT_RDWR))
        assert process.wait(timeout=30) == 0
        assert [m.source for m in mounted_at(str(path))] == [fsname(path)]  # left, dead
        with pytest.raises(OSError) as caught:
            os.statvfs(path)  # reaches the connection (a stat is answered from the cache)
        assert caught.value.errno == errno.ENOTCONN


def test_a_mount_that_fails_is_an_error_and_exit_status_1(tmp_path: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    missing = tmp_path / "missing" / "kmsg"
    with ours, theirs:
        done = subprocess.run([str(BINARY), str(theirs.fileno()), str(missing)],
                              pass_fds=(theirs.fileno(),), capture_output=True, text=True,
                              timeout=30)
    assert done.returncode == 1
    assert f"cannot mount the kernel log at {missing}" in done.stderr, done.stderr
    assert not mounted_at(str(missing))
