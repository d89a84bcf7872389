"""Sources of desired State. A source is a task that sends ``Update``s into a channel: a new
State, or an error that keeps the last good State in force. The daemon consumes any source the
same way, so a control-plane source can be added beside the file source without touching
surfaces, tree or FUSE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import trio

from mokkafs.errors import MokkafsError
from mokkafs.obs.status import Followable
from mokkafs.state import State


@dataclass(frozen=True)
class Update:
    """What a source observed at ``at`` (time.time()): a compiled State or an error."""

    state: State | None
    error: MokkafsError | None
    at: float


class Source(Followable, Protocol):
    """Where States come from; what health reads of it is ``Followable``'s."""

    async def initial(self) -> State:
        """Load the first State now; raise ``MokkafsError`` if there is none to serve."""
        ...

    async def run(self, out: trio.MemorySendChannel[Update]) -> None:
        """Send one update per change after the initial State, until cancelled. A source that
        can no longer observe its input sends an error update and returns."""
        ...

    def reload(self) -> None:
        """Ask for a fresh read even without a change notification (SIGHUP)."""
        ...


class Remote(Protocol):
    """Compiles elsewhere (``child.CompileChild``: in a child process)."""

    @property
    def pid(self) -> int | None: ...

    started: int  # processes started so far

    async def compile(self, text: str, filename: str) -> State: ...

    async def release(self) -> None: ...

    async def expire(self) -> None: ...

    async def aclose(self) -> None: ...
