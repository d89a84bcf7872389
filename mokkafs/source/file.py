"""The file source: a profile file, watched with inotify, compiled on every change.

It watches the profile's directory, which catches the three ways a file changes under a reader:
an in-place write (IN_CLOSE_WRITE on the name), an editor's write-then-rename (IN_MOVED_TO on
the name), and a Kubernetes ConfigMap volume's ``..data`` symlink swap (IN_MOVED_TO/IN_CREATE on
``..data``, the name itself being a link through it). Bursts of events are coalesced; an update
is emitted only when the file's bytes changed (or on ``reload()``). A directory that vanishes
is an error update, not silence.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import trio

from mokkafs.errors import MokkafsError, Problem, ProfileError
from mokkafs.source import Update
from mokkafs.source.inotify import (
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_MODIFY,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    Inotify,
)
from mokkafs.state import State

log = logging.getLogger(__name__)

WATCH_MASK = (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB
              | IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF)
SETTLE_SECONDS = 0.01  # coalesce an editor's burst (write, chmod, rename) into one read

Compile = Callable[[Path, int], State]


class FileSource:
    """Send an Update for every change of ``path``'s content.

    ``compile(path, generation)`` reads and compiles the file; it runs in a worker thread so a
    large profile never stalls the FUSE loop.
    """

    def __init__(self, path: Path, compile: Compile, first_generation: int = 1) -> None:
        self.path = path
        self.compile = compile
        self.generation = first_generation
        self._digest: bytes | None = None
        self._wake = trio.Event()
        self._forced = False

    def initial(self) -> State:
        self._changed()
        state = self.compile(self.path, self.generation)
        self.generation += 1
        return state

    def reload(self) -> None:
        """Re-read even if nothing changed (SIGHUP). Call from the trio thread."""
        self._forced = True
        self._wake.set()

    def _changed(self) -> bool:
        try:
            digest = hashlib.sha256(self.path.read_bytes()).digest()
        except OSError:
            return True  # let compile report the error
        if digest == self._digest:
            return False
        self._digest = digest
        return True

    async def _load(self) -> Update:
        generation = self.generation
        try:
            state = await trio.to_thread.run_sync(self.compile, self.path, generation)
        except MokkafsError as exc:
            return Update(None, exc, time.time())  # the swapper logs it
        self.generation += 1
        return Update(state, None, time.time())

    async def _watch(self, inotify: Inotify, dir_wd: int, out: trio.MemorySendChannel[Update],
                     done: trio.CancelScope) -> None:
        while True:
            for event in await inotify.read():
                if event.wd == dir_wd and event.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                    msg = f"{self.path.parent} was removed or moved; cannot watch it any more"
                    await out.send(Update(None, ProfileError(str(self.path), [Problem("", msg)]),
                                          time.time()))
                    done.cancel()
                    return
            self._wake.set()

    async def run(self, out: trio.MemorySendChannel[Update]) -> None:
        inotify = Inotify()
        try:
            dir_wd = inotify.add_watch(str(self.path.parent), WATCH_MASK)
            if self._changed():  # changed between initial() and the watch
                await out.send(await self._load())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch, inotify, dir_wd, out, nursery.cancel_scope)
                while True:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    await trio.sleep(SETTLE_SECONDS)
                    forced, self._forced = self._forced, False
                    if self._changed() or forced:
                        await out.send(await self._load())
        finally:
            inotify.close()
