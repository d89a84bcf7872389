"""What the daemon knows about itself: one record, read by /readyz and by the metrics
collector at request time (so both always report the same facts)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Followable(Protocol):
    """A source, as far as health goes: can it still see changes of its input?
    (``mokkafs.source.Source`` is one.)"""

    following: bool  # False when the source can no longer see changes of its input
    follow_error: str | None  # why, when it cannot
    reads: int  # times it read its input

    @property
    def compile_pid(self) -> int | None:
        """The process that compiles its changes, when it is not this one."""
        ...

    @property
    def compile_starts(self) -> int:
        """Compiling processes started so far: each one a compile that waited for it."""
        ...


@dataclass
class Status:
    """``serving`` is true from readiness until shutdown begins. ``following`` is false when
    the source can no longer see changes of its profile (``follow_error`` says why)."""

    cache_mode: str = ""
    serving: bool = False
    generation: int = 0
    source: str = ""
    last_success: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    watch: Followable | None = None  # the source, read when asked
    surfaces: dict[str, int] = field(default_factory=dict)  # surface -> nodes it serves
    inodes: int = 0
    swaps: int = 0
    source_errors: int = 0  # updates that were errors (the profile could not be loaded)
    apply_errors: dict[str, int] = field(default_factory=dict)  # stage -> failures
    invalidations: int = 0
    # every fault of the State served: name, kind, target, state (pending|active|ended|off),
    # source (profile|control), restored (kept from a daemon before); transitions counted
    # by (kind, state entered)
    faults: list[dict[str, str | bool]] = field(default_factory=list)
    fault_states: dict[str, str] = field(default_factory=dict)
    fault_transitions: dict[tuple[str, str], int] = field(default_factory=dict)
    # the state file (run-time changes kept across restarts): where, which faults it gave
    # back at the start, and why it was refused, if it was
    state_file: str | None = None
    restored: list[str] = field(default_factory=list)
    state_refused: str | None = None
    # the sysfs writes taken (mokkafs.serve.writes.Writer.report), read when asked
    writes: Callable[[], dict[str, Any]] | None = None
    # dev/kmsg's readers, their reads waiting, and the opens refused at the limit
    # (mokkafs.fuse.stream.Streams.report), read when asked
    kmsg: Callable[[], dict[str, int]] | None = None

    @property
    def following(self) -> bool:
        return self.watch.following if self.watch is not None else True

    @property
    def follow_error(self) -> str | None:
        return self.watch.follow_error if self.watch is not None else None

    @property
    def ready(self) -> bool:
        return self.serving and self.following

    def failed(self, message: str, at: float | None = None) -> None:
        self.last_error = message
        self.last_error_at = time.time() if at is None else at

    def report(self) -> dict[str, object]:
        return {
            "ready": self.ready,
            "serving": self.serving,
            "generation": self.generation,
            "source": self.source,
            "following": self.following,
            "follow_error": self.follow_error,
            "last_success": self.last_success,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "cache_mode": self.cache_mode,
            "compile_pid": self.watch.compile_pid if self.watch is not None else None,
            "faults": [f for f in self.faults if f["state"] == "active"],
            "writes": self.writes()["list"] if self.writes is not None else [],
            "state": {"file": self.state_file, "restored": self.restored,
                      "refused": self.state_refused},
            "surfaces": {name: {"status": "ok" if self.serving else "not serving",
                                "nodes": nodes, "generation": self.generation}
                         for name, nodes in self.surfaces.items()},
            "now": time.time(),
        }
