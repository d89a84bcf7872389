"""The file source: a profile file, watched with inotify, compiled on every change.

It watches the profile's directory, which catches the three ways a file changes under a reader:
an in-place write (IN_CLOSE_WRITE on the name), an editor's write-then-rename (IN_MOVED_TO on
the name), and a Kubernetes ConfigMap volume's ``..data`` symlink swap (IN_MOVED_TO on
``..data``, the name itself being a link through it). Each change is read at once: those events
mark a file that is whole. Only the removal of the name waits ``REMOVAL_GRACE`` for the
replacement an editor writes next, so a save does not flash an error.

An update is emitted only when the file's bytes changed (or on ``reload()``), and a failed read
forgets the bytes last seen, so restoring the same bytes is a change. Reading and compiling run
as one step in a worker thread (one hop off the loop per change, not two); a newer change
abandons a step still running, so one slow compile never holds back the next edit, and
shutdown never waits for one. Whether a step's bytes are news is judged when it is about to
send them, one step at a time, and they count as seen only once sent: so an abandoned step
cannot hide the change that superseded it, and two steps that read the same save send it once.

A profile that is a link to a file in another directory is followed there too: that
directory is watched as well, the target's name in it read like the profile's, and the watch
moves when the link is pointed elsewhere. Only inside the places it led to when the source was
made, though (``resolve.trusted_places``: the profile's directory and the target's): a link
pointed anywhere else is an error update, and nothing there is opened.

When the profile's directory goes (deleted, renamed, an unmounted volume), the source watches
its nearest existing ancestor until the directory comes back, then follows it again by itself.
``following`` says whether it can follow the file at all; when no watch can be set (the
kernel's inotify limits), it is False with ``follow_error`` saying why, and SIGHUP retries.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import trio

from mokkafs.errors import InternalError, MokkafsError, ProfileError, internal_error
from mokkafs.profile.resolve import read_text, trusted_places
from mokkafs.source import Remote, Update
from mokkafs.source.inotify import Event, Watches
from mokkafs.state import Generation, State

log = logging.getLogger(__name__)

REMOVAL_GRACE = 0.05  # seconds an editor takes between moving the old file away and the new in
CONFIGMAP_DATA = "..data"  # the link a kubelet renames to swap a ConfigMap volume's content

Compile = Callable[[str, str], State]  # (text, file name) -> State; raises ProfileError


class FileSource:
    """Send an Update for every change of ``path``'s content.

    ``compile(text, filename)`` turns the file's text into a State: at start, and for each
    change in a worker thread, unless ``remote`` is given: then changes are read in a worker
    thread and compiled by it (in a child process, off this process's GIL). Generations count
    successful loads from ``first_generation``.
    """

    def __init__(self, path: Path, compile: Compile, first_generation: int = 1,
                 clock: Callable[[], float] = time.time,
                 watches: Callable[[], Watches] = Watches, remote: Remote | None = None) -> None:
        self.path = path
        # Where the profile may lead from now on: its directory and where its links lead now.
        self.within = trusted_places(path)
        self.compile = compile
        self.remote = remote
        self.watches = watches
        self.generation = first_generation
        self.clock = clock
        self.following = True
        self.follow_error: str | None = None
        self.reads = 0
        self._digest: bytes | None = None  # of the bytes whose update was sent last
        self._wake = trio.Event()
        self._forced = 0  # reloads asked for; a step started after the last is forced
        self._forced_done = 0  # the reloads the updates sent so far answered
        self._rewatch = False
        self._retarget = False  # the profile's name changed: it may link elsewhere now
        self._target = ""  # the name the link points to in the other directory watched
        self._loading: trio.CancelScope | None = None
        self._delivering = trio.Lock()

    async def initial(self) -> State:
        """Read and compile the file now (before anything is mounted). With ``remote``, the
        compile is its, and its process ends after it unless ``remote`` keeps it: a node whose
        profile stays put holds none, and this process never loads the compiler."""
        text = read_text(self.path, self.within)
        self._digest = _digest(text)
        if self.remote is None:
            compiled = self.compile(text, str(self.path))
        else:
            try:
                compiled = await self.remote.compile(text, str(self.path))
            except BaseException as exc:
                await self.remote.aclose()
                if isinstance(exc, MokkafsError) and not isinstance(exc, ProfileError):
                    raise InternalError(f"{exc}; at start: nothing is mounted") from None
                raise
            await self.remote.release()
        state = self._numbered(compiled)
        self.generation += 1
        return state

    def reload(self) -> None:
        """Re-read even if nothing changed, and set the watches again (SIGHUP). Call from the
        trio thread."""
        self._forced += 1
        self._rewatch = True
        self._wake.set()

    def _numbered(self, state: State) -> State:
        return replace(state, generation=Generation(self.generation))

    def _load(self) -> tuple[Update, bytes | None]:
        """In a worker thread: read the file and compile it. The Update and the digest of the
        bytes it is for (None after a failed read, so the same bytes next are a change).
        Whether those bytes are news is judged on the loop, when the update is to be sent:
        a thread cannot know what an earlier step is sending meanwhile."""
        text = self._read()
        if isinstance(text, Update):
            return text, None
        digest = _digest(text)
        try:
            state = self.compile(text, str(self.path))
        except MokkafsError as exc:
            return Update(None, exc, self.clock()), digest
        except Exception as exc:  # a bug in compiling: the last good view stays
            log.exception("compiling %s failed", self.path)
            return Update(None, internal_error(f"compiling {self.path}", exc),
                          self.clock()), digest
        return Update(state, None, self.clock()), digest

    def _read(self) -> str | Update:
        """In a worker thread: the file's text, or the error update of a failed read."""
        self.reads += 1
        try:
            return read_text(self.path, self.within)
        except ProfileError as exc:
            return Update(None, exc, self.clock())
        except Exception as exc:  # a bug in reading: never the end of the source
            log.exception("reading %s failed", self.path)
            return Update(None, internal_error(f"reading {self.path}", exc), self.clock())

    async def _load_remote(self, remote: Remote, forced: bool
                           ) -> tuple[Update | None, bytes | None]:
        """``_load``, with the compile in ``remote``: the read in a worker thread, the
        compile awaited (cancelling the step abandons it). No update (None) for the bytes last
        sent when no step is sending and no reload asks: nothing is compiled for them, so the
        read after the watches are set (at start) starts no compiling process."""
        text = await trio.to_thread.run_sync(self._read, abandon_on_cancel=True)
        if isinstance(text, Update):
            return text, None
        digest = _digest(text)
        if digest == self._digest and not forced and not self._delivering.locked():
            return None, digest
        try:
            state = await remote.compile(text, str(self.path))
        except ProfileError as exc:
            return Update(None, exc, self.clock()), digest
        except MokkafsError as exc:  # the compile failed, not the bytes: the same may succeed
            return Update(None, InternalError(f"{exc}; the last good profile stays in force"),
                          self.clock()), None
        except Exception as exc:  # a bug in compiling: the last good view stays
            log.exception("compiling %s failed", self.path)
            return Update(None, internal_error(f"compiling {self.path}", exc),
                          self.clock()), None
        return Update(state, None, self.clock()), digest

    @property
    def compile_pid(self) -> int | None:
        """The process that compiles changes, when it is not this one and runs."""
        return self.remote.pid if self.remote is not None else None

    @property
    def compile_starts(self) -> int:
        """Compiling processes started so far (none when compiles run in this one)."""
        return self.remote.started if self.remote is not None else 0

    async def _step(self, out: trio.MemorySendChannel[Update], scope: trio.CancelScope) -> None:
        asked = self._forced
        forced = asked > self._forced_done
        with scope:
            if self.remote is None:
                update, digest = await trio.to_thread.run_sync(self._load,
                                                               abandon_on_cancel=True)
            else:
                found, digest = await self._load_remote(self.remote, forced)
                if found is None:
                    return
                update = found
            # One step delivers at a time, and judges by the bytes sent last only then: a step
            # started while an earlier one was sending the same bytes must not send them again.
            async with self._delivering:
                if digest is not None and digest == self._digest and not forced:
                    return
                if update.state is not None:
                    update = replace(update, state=self._numbered(update.state))
                await out.send(update)
                # Only once sent: a send cancelled before it delivered changes nothing.
                self._digest = digest
                self._forced_done = max(self._forced_done, asked)
                if update.state is not None:
                    self.generation += 1

    def _on_events(self, events: list[Event], profile_wd: int | None,
                   beside_wd: int | None = None) -> float:
        """React to a batch of events: how long to wait before reading (0: now; -1: not at
        all, the events concern other files)."""
        delay = -1.0
        for event in events:
            if event.wd == beside_wd and event.name:  # the directory a link points into
                if event.name == self._target:
                    delay = max(delay, REMOVAL_GRACE if event.removed else 0.0)
            elif event.wd != profile_wd or event.name == "":
                self._rewatch = True  # the directory itself, or an ancestor, changed
                delay = max(delay, 0.0)
            elif event.name in (self.path.name, CONFIGMAP_DATA):
                self._retarget = True
                delay = max(delay, REMOVAL_GRACE if event.removed else 0.0)
        return delay

    async def run(self, out: trio.MemorySendChannel[Update]) -> None:
        try:
            await self._run(out)
        finally:
            if self.remote is not None:
                with trio.CancelScope(shield=True):
                    await self.remote.aclose()

    async def _run(self, out: trio.MemorySendChannel[Update]) -> None:
        with self.watches() as watches:
            self._set_watches(watches)
            self._wake.set()  # the file may have changed between initial() and the watch
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch, watches)
                if self.remote is not None:
                    nursery.start_soon(self.remote.expire)
                while True:
                    await self._wake.wait()
                    self._wake = trio.Event()
                    if self._rewatch:
                        self._rewatch = self._retarget = False
                        self._set_watches(watches)
                        self._forced += 1
                    elif self._retarget:
                        self._retarget = False
                        self._set_watches(watches)
                    if self._loading is not None:
                        self._loading.cancel()  # superseded: its result is not wanted
                    self._loading = trio.CancelScope()
                    nursery.start_soon(self._step, out, self._loading)

    async def _watch(self, watches: Watches) -> None:
        while True:
            events = await watches.read()
            delay = self._on_events(events, watches.profile_wd, watches.beside_wd)
            if delay < 0:
                continue
            if delay > 0:
                await trio.sleep(delay)  # more of the same save may arrive meanwhile
                self._on_events(watches.pending(), watches.profile_wd, watches.beside_wd)
            self._wake.set()

    def _set_watches(self, watches: Watches) -> None:
        # A link to a file elsewhere (not a ConfigMap's, whose ..data is in this directory):
        # that file's directory is watched too.
        target = Path(os.path.realpath(self.path))
        beside = None if target.parent.is_relative_to(self.path.parent) else target.parent
        self._target = target.name
        error = watches.follow(self.path.parent, beside)
        if error is None:
            if not self.following:
                log.info("following %s again", self.path)
            self.following, self.follow_error = True, None
            return
        if self.following or error != self.follow_error:
            log.error("cannot follow %s: %s", self.path, error)
        self.following, self.follow_error = False, error


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()
