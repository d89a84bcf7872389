"""inotify watches that follow a directory by its path, read through trio.

inotify_simple keeps the file descriptor; trio waits for it to be readable, so nothing polls
and nothing wakes up while nothing changes. ``Watches.follow`` watches a directory while it
exists and, while it does not, its nearest existing ancestor, so the caller learns when the
directory comes back.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import trio
from inotify_simple import INotify, flags

# What changes a file in the followed directory: writes that end, renames, links, removals.
DIRECTORY_MASK = (flags.CLOSE_WRITE | flags.MOVED_TO | flags.MOVED_FROM | flags.CREATE
                  | flags.DELETE | flags.ATTRIB | flags.DELETE_SELF | flags.MOVE_SELF
                  | flags.ONLYDIR)
# What on an ancestor may bring the followed directory back.
ANCESTOR_MASK = (flags.CREATE | flags.MOVED_TO | flags.DELETE_SELF | flags.MOVE_SELF
                 | flags.ONLYDIR)
REMOVALS = flags.DELETE | flags.MOVED_FROM


@dataclass(frozen=True, slots=True)
class Event:
    wd: int  # -1 for a queue overflow
    mask: int
    name: str

    @property
    def removed(self) -> bool:
        """The name went away (deleted, or renamed to another)."""
        return bool(self.mask & REMOVALS)


class Watches:
    """The watches of one followed directory. ``profile_wd`` is the directory's own watch while
    it exists, None while only an ancestor is watched."""

    def __init__(self) -> None:
        self._inotify: INotify | None = None  # made by the first ``follow`` that can
        self._made = trio.Event()
        self._live: set[int] = set()
        self.profile_wd: int | None = None
        self.beside_wd: int | None = None

    def __enter__(self) -> Watches:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._inotify is not None:
            self._inotify.close()

    def follow(self, directory: Path, beside: Path | None = None) -> str | None:
        """Watch ``directory`` (or its nearest existing ancestor), and ``beside`` where it
        exists (the directory of the file a profile that is a link points to, elsewhere); None,
        or why no watch could be set (then the next call tries again)."""
        if self._inotify is None:
            try:
                self._inotify = INotify(nonblocking=True)
            except OSError as exc:  # the user's inotify instances are used up
                hint = " (raise fs.inotify.max_user_instances)" if exc.errno == errno.EMFILE \
                    else ""
                return f"no inotify instance: {os.strerror(exc.errno or 0)}{hint}"
            self._made.set()
        target = directory
        while not target.is_dir() and target != target.parent:
            target = target.parent
        exists = target == directory
        try:
            wd: int = self._inotify.add_watch(target, DIRECTORY_MASK if exists else ANCESTOR_MASK)
            extra = self._inotify.add_watch(beside, DIRECTORY_MASK) \
                if beside is not None and beside.is_dir() else None
        except OSError as exc:
            self._drop(set())
            self.profile_wd = self.beside_wd = None
            hint = (" (raise fs.inotify.max_user_watches or max_user_instances)"
                    if exc.errno in (errno.ENOSPC, errno.EMFILE) else "")
            return f"no inotify watch on {target}: {os.strerror(exc.errno or 0)}{hint}"
        live = {wd} if extra is None else {wd, extra}
        self._drop(live)
        self._live = live
        self.profile_wd = wd if exists else None
        self.beside_wd = extra if extra != wd else None
        return None

    def _drop(self, keep: set[int]) -> None:
        if self._inotify is not None:
            for old in self._live - keep:
                with contextlib.suppress(OSError):  # already gone with its directory
                    self._inotify.rm_watch(old)
        self._live &= keep

    def pending(self) -> list[Event]:
        """The events queued now, of live watches (a removed watch's last IN_IGNORED is not
        news), without waiting."""
        if self._inotify is None:
            return []
        try:
            raw = self._inotify.read(timeout=0)
        except BlockingIOError:
            return []
        return [Event(e.wd, e.mask, e.name) for e in raw if e.wd in self._live or e.wd == -1]

    async def read(self) -> list[Event]:
        """Wait until the kernel queues events of live watches, and return them."""
        await self._made.wait()  # (until a ``follow`` could make the instance)
        assert self._inotify is not None
        while True:
            await trio.lowlevel.wait_readable(self._inotify.fd)
            events = self.pending()
            if events:
                return events
