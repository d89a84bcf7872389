"""The capture's reader processes: the confined walk (``mokkafs.capture.reader``) runs in a
forked child, so a read that a FUSE daemon never answers blocks that child, never the capture.

A request is a method of ``Walk`` and its arguments; an answer is its value, an
``Unreadable``, or an error. Each goes over a socket pair as a length-prefixed pickle; both
ends are this program. The parent waits for an answer until a deadline. Past it, it kills the
child (SIGKILL through a pidfd, so never another process), and the next request starts a fresh
child. Every child inherits the root directory the first one opened.

A killed child may not die at once: the kernel waits out a FUSE request its daemon has already
read until the daemon answers or goes away, even for a killed process. So killed children are
reaped without waiting on them: whenever a child starts, and for at most ``GRACE`` seconds at
``close``. One the kernel still holds then is left to init.

Forking is safe here: a capture is a plain synchronous command, and nothing in it threads.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import socket
import struct
import time
from typing import Any

from mokkafs.capture.reader import DIR_FLAGS, Unreadable, Walk

HEADER = struct.Struct("!Q")  # the length of the pickle that follows
GRACE = 0.5  # seconds ``close`` gives the children it ends to go
KILLED = 0.1  # seconds a killed child is given to go before it is reaped later
METHODS = frozenset({"resolve", "readlink", "kind", "listdir", "read"})
TIMEVAL = struct.Struct("@ll")  # struct timeval, for SO_RCVTIMEO
FIRST = 1 << 16  # bytes the first read of an answer asks for
CHUNK = 1 << 20


class Late(Exception):
    """No answer before the deadline; the child was killed."""


class Lost(Exception):
    """The child went away without answering (killed by someone else, or out of memory)."""


def _send(sock: socket.socket, message: object, fds: list[int] | None = None) -> None:
    data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    if fds:  # the descriptors ride on the header
        socket.send_fds(sock, [HEADER.pack(len(data))], fds)
        sock.sendall(data)
    else:
        sock.sendall(HEADER.pack(len(data)) + data)


def _chunk(sock: socket.socket, size: int, deadline: float | None,
           fds: list[int] | None = None) -> bytes:
    """At most ``size`` bytes, as soon as some came (and into ``fds`` the descriptors they
    carry). The socket blocks; a deadline is the kernel's receive timeout, so waiting costs no
    more system calls than reading. Raises Late past ``deadline`` (None: no deadline), Lost
    when the other end has gone."""
    if deadline is not None:
        left = int((deadline - time.monotonic()) * 1e6)
        if left <= 0:
            raise Late
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, TIMEVAL.pack(*divmod(left, 10**6)))
    try:
        if fds is not None:
            data, new, _, _ = socket.recv_fds(sock, size, 1)
            fds.extend(new)
        else:
            data = sock.recv(size)
    except BlockingIOError:  # EAGAIN: the receive timeout
        raise Late from None
    except OSError:
        raise Lost from None
    if not data:
        raise Lost
    return data


def _receive(sock: socket.socket, deadline: float | None, fds: list[int] | None = None
             ) -> Any:
    """One message (an answer usually comes whole in one read)."""
    data = _chunk(sock, FIRST, deadline, fds)
    while len(data) < HEADER.size:
        data += _chunk(sock, HEADER.size - len(data), deadline)
    end = HEADER.size + HEADER.unpack_from(data)[0]
    if len(data) < end:
        parts = [data]
        got = len(data)
        while got < end:
            parts.append(_chunk(sock, min(end - got, CHUNK), deadline))
            got += len(parts[-1])
        data = b"".join(parts)
    return pickle.loads(memoryview(data)[HEADER.size:end])


def _serve(sock: socket.socket, root_fd: int | None, limit: int) -> None:
    """The child: answer requests until the parent closes its end."""
    walk = None if root_fd is None else Walk(root_fd, limit)
    while True:
        try:
            method, args = _receive(sock, None)
        except Lost:
            return
        fds: list[int] = []
        answer: tuple[Any, ...]
        try:
            if method == "open":
                fd = os.open(args[0], DIR_FLAGS)
                walk, fds, answer = Walk(fd, limit), [fd], ("ok", None)
            elif walk is not None and method in METHODS:
                answer = ("ok", getattr(walk, method)(*args))
            else:
                answer = ("error", f"no request {method!r} before the root is open")
        except Unreadable as exc:
            answer = ("unreadable", exc.path, exc.reason)
        except OSError as exc:
            answer = ("oserror", exc.errno, exc.strerror)
        except Exception as exc:  # a bug: the parent raises it
            answer = ("error", f"{type(exc).__name__}: {exc}")
        _send(sock, answer, fds)


def _alone(keep: set[int]) -> None:
    """Hold nothing of the parent's but ``keep``: above all not its standard streams, which a
    child the kernel holds would keep open for whoever reads the capture's output."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the child quietly
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:  # no /dev/null (a bare chroot): no standard streams then
        os.closerange(0, 3)
    else:
        for fd in (0, 1, 2):
            if fd != null:
                os.dup2(null, fd)
    low = 3
    for fd in sorted(k for k in keep if k >= low):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


class Child:
    """One forked reader: its PID, a pidfd for it, and the parent's end of its socket."""

    def __init__(self, root_fd: int | None, limit: int) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the child never returns into the capture
            status = 1
            try:
                _alone({theirs.fileno()} | ({root_fd} if root_fd is not None else set()))
                _serve(theirs, root_fd, limit)
                status = 0
            finally:
                os._exit(status)
        theirs.close()
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.sock = ours

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)


class Readers:
    """The live reader (started when a request needs it) and the ended ones not yet reaped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.root_fd: int | None = None
        self._live: Child | None = None
        self._ending: list[Child] = []

    def open(self, path: str, seconds: float) -> None:
        """Open the root directory (in a reader, which passes its descriptor back). Raises
        OSError, Late or Lost."""
        fds: list[int] = []
        try:
            self._ask(("open", (path,)), seconds, fds)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self.root_fd = fds[0]

    def live_pid(self) -> int | None:
        return None if self._live is None else self._live.pid

    def call(self, method: str, args: tuple[Any, ...], seconds: float) -> Any:
        """``Walk.method(*args)`` in the reader: its value, or the Unreadable it raised.
        Raises Late past ``seconds``, Lost when the reader died."""
        return self._ask((method, args), seconds)

    def _ask(self, request: tuple[str, tuple[Any, ...]], seconds: float,
             fds: list[int] | None = None) -> Any:
        if self._live is None:
            self._reap(0)
            self._live = Child(self.root_fd, self.limit)
        child = self._live
        try:
            try:
                _send(child.sock, request)
            except OSError:
                raise Lost from None
            answer = _receive(child.sock, time.monotonic() + seconds, fds)
        except (Late, Lost):
            self._end(child, KILLED)
            raise
        if answer[0] == "ok":
            return answer[1]
        if answer[0] == "unreadable":
            raise Unreadable(answer[1], answer[2])
        if answer[0] == "oserror":
            raise OSError(answer[1], answer[2])
        raise RuntimeError(f"the capture's reader failed: {answer[1]}")

    def _end(self, child: Child, seconds: float) -> None:
        self._live = None
        child.sock.close()
        child.kill()
        self._ending.append(child)
        self._reap(seconds)

    def _reap(self, seconds: float) -> None:
        """Reap the ended children that are gone, waiting at most ``seconds`` for the rest."""
        deadline = time.monotonic() + seconds
        while self._ending:
            poller = select.poll()
            for child in self._ending:
                poller.register(child.pidfd, select.POLLIN)
            left = deadline - time.monotonic()
            gone = {fd for fd, _ in poller.poll(max(0.0, left) * 1000)}
            for child in [c for c in self._ending if c.pidfd in gone]:
                os.waitpid(child.pid, 0)  # it has exited: this does not block
                os.close(child.pidfd)
                self._ending.remove(child)
            if left <= 0:
                return

    def close(self) -> None:
        """End the live reader (it reads the end of its requests and exits) and reap what
        goes within ``GRACE``; kill and leave to init what the kernel still holds."""
        if self._live is not None:
            live, self._live = self._live, None
            live.sock.close()
            self._ending.append(live)
        self._reap(GRACE)
        for child in self._ending:
            child.kill()
            os.close(child.pidfd)
        self._ending = []
        if self.root_fd is not None:
            os.close(self.root_fd)
            self.root_fd = None
