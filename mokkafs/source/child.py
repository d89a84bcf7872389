"""Compiles in a child process, so that they never hold the serving process's GIL.

The daemon's FUSE loop and a compile in one of its threads share one interpreter lock: a
storm of edits of a large profile held plain reads up for whole seconds. ``CompileChild``
keeps one child at a time (``python -m mokkafs.compile_process``) that compiles each text it
is sent and sends back the State, pickled, over a pipe. The child is bounded: in memory by
``RLIMIT_AS`` (set in the child before it reads anything) and in time by a deadline, past
which it is killed. A child that dies, is killed, or is abandoned (a newer change cancels the
request) is replaced at the next request; its error keeps the last good State. The child
holds the ``PciCache`` that lets a compile reuse the last one's PCI side (``profile.compile``),
for as long as it lives.

The child starts at the first change, not with the daemon, and ends once it has been idle
``idle`` seconds (``expire``): a node whose profile does not change holds no compiling
process, and so does not pay its memory (some 27 MiB of PSS: the compiler imported). A storm
of edits keeps one child, its cache warm; the first change after a quiet spell starts a new
one, and waits for it to import the compiler (a fifth of a second in the recorded
quick run). With ``idle`` infinite (``--compile-idle never``) the child of the first
compile is kept for the daemon's life instead: every change is compiled at once, for that
memory. The child gives its freed heap back after each compile, so what it keeps is what it
holds, not its largest compile's peak.

The child's side is ``mokkafs.compile_process``: it imports the compiler and nothing of the
daemon's (no trio), so a child starts in the time its compiler takes to import. Frames are an
8-byte little-endian length and a pickle. Only this process's own child speaks on the pipe, so
what is unpickled is what the daemon's own code pickled.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import subprocess
import sys
from collections.abc import Callable

import trio

from mokkafs.errors import InternalError, ProfileError
from mokkafs.frames import LENGTH
from mokkafs.host import linux
from mokkafs.profile.options import Options
from mokkafs.state import State

log = logging.getLogger(__name__)

COMPILE_SECONDS = 30.0  # the largest allowed profile compiles in well under a second
COMPILE_BYTES = 2 << 30  # address space of the child: the largest profile peaks far below
IDLE_SECONDS = 60.0  # a child unused this long ends; the next change starts another
# An answer up to this size is unpickled on the loop (about a millisecond at 8 HCAs); a worker
# thread would not spare the loop that time (it holds the same lock) and costs a hop.
LOOP_FRAME = 128 << 10


class CompileChild:
    """One child process that compiles profiles' texts with ``options()`` of each moment.
    ``compile`` is called from the trio thread, one request at a time."""

    def __init__(self, options: Callable[[], Options], seconds: float = COMPILE_SECONDS,
                 memory: int = COMPILE_BYTES, idle: float = IDLE_SECONDS) -> None:
        self.options = options
        self.seconds = seconds
        self.memory = memory
        self.idle = idle
        self.started = 0  # children started so far: each one a change waited for
        self._process: trio.Process | None = None
        self._lock = trio.Lock()
        self._used = trio.Event()  # set at the end of each request
        self._last = 0.0  # trio time of the end of the last request

    @property
    def pid(self) -> int | None:
        """The running child's process id, if one runs."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    async def compile(self, text: str, filename: str) -> State:
        """The State of ``text``; raises ``ProfileError`` for a bad profile and
        ``InternalError`` when the child fails (killed past its deadline, out of memory, a
        bug). Cancelled, it kills the child (its result is not wanted)."""
        async with self._lock:
            request = pickle.dumps((text, filename, self.options()), pickle.HIGHEST_PROTOCOL)
            try:
                process = await self._running()
                with trio.move_on_after(self.seconds) as deadline:
                    assert process.stdin is not None and process.stdout is not None
                    await process.stdin.send_all(LENGTH.pack(len(request)) + request)
                    frame = await _receive(process.stdout)
                if deadline.cancelled_caught:
                    await self._stop()
                    raise InternalError(
                        f"compiling {filename} took longer than {self.seconds:g} s: the "
                        "compiling process was killed (--compile-timeout)")
                if frame is None:
                    status = await self._stop()
                    raise InternalError(f"compiling {filename}: the compiling process ended "
                                        f"({_ended(status)})")
            except OSError as exc:  # it could not be started (EAGAIN, EMFILE, ...)
                raise InternalError(f"compiling {filename}: no compiling process could be "
                                    f"started ({exc.strerror or exc})") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                status = await self._stop()
                raise InternalError(f"compiling {filename}: the compiling process ended "
                                    f"({_ended(status)})") from None
            except BaseException:  # cancelled (abandoned) or worse: its answer is not wanted
                await self._stop()
                raise
            finally:
                self._last = trio.current_time()
                self._used.set()
        try:
            if len(frame) <= LOOP_FRAME:
                kind, payload = pickle.loads(frame)
            else:
                kind, payload = await trio.to_thread.run_sync(pickle.loads, frame)
        except Exception as exc:  # its mokkafs is not this one's (an upgrade in place)
            raise InternalError(f"compiling {filename}: the compiling process's answer could "
                                f"not be read ({type(exc).__name__}: is mokkafs being "
                                "upgraded?)") from None
        if kind == "state":
            assert isinstance(payload, State)
            return payload
        if kind == "problems":
            name, problems = payload
            raise ProfileError(name, problems)
        log.error("compiling %s failed in the compiling process:\n%s", filename, payload)
        raise InternalError(f"compiling {filename}: {str(payload).splitlines()[-1]} (a "
                            "mokkafs bug; the traceback is in the log)")

    async def _running(self) -> trio.Process:
        if self._process is not None and self._process.returncode is None:
            return self._process
        self._process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "mokkafs.compile_process", str(self.memory),
             str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.started += 1
        return self._process

    async def _stop(self) -> int | None:
        """Kill the child (ours, by its process) and reap it; its exit status."""
        process, self._process = self._process, None
        if process is None:
            return None
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()
        return process.returncode

    @property
    def kept(self) -> bool:
        """Whether the child is kept for the daemon's life (``idle`` infinite)."""
        return math.isinf(self.idle)

    async def release(self) -> None:
        """After the first compile: end its child, unless it is ``kept``."""
        if not self.kept:
            await self._stop()

    async def expire(self) -> None:
        """End the child each time it has been idle ``idle`` seconds; runs until cancelled
        (returns at once when the child is ``kept``)."""
        if self.kept:
            return
        while True:
            await self._used.wait()
            self._used = trio.Event()
            while True:
                with trio.move_on_after(self.idle) as quiet:
                    await self._used.wait()
                    self._used = trio.Event()
                if quiet.cancelled_caught:
                    break
            async with self._lock:  # never during a request
                if self._process is not None and \
                        trio.current_time() - self._last >= self.idle:
                    log.info("the compiling process %d was idle %g s; ending it",
                             self._process.pid, self.idle)
                    await self._stop()

    async def aclose(self) -> None:
        await self._stop()


def _ended(status: int | None) -> str:
    if not status:
        return "exited"
    hint = "; the log has its error output" if status > 0 else ""
    return linux.ended(status) + hint


async def _receive(stream: trio.abc.ReceiveStream) -> bytes | None:
    """One frame, or None at the end of the stream."""
    head = await _exactly(stream, LENGTH.size)
    if head is None:
        return None
    return await _exactly(stream, LENGTH.unpack(head)[0])


async def _exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = await stream.receive_some(min(size - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)
