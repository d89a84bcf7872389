"""The kernel log's records, as State arithmetic: the driver's load line when the daemon
started, then every Xid the faults log (``mokkafs.faults.xid``) once its time has come.
Numbered from 0; a ring keeps the newest ``RING``, as the kernel's ring keeps what fits. Each
record reads ``prio,seq,usec,flags;text`` (kernel/printk/printk.c, ``info_print_ext_header``
and ``msg_print_ext_body``; Documentation/ABI/testing/dev-kmsg). ``surfaces.kmsg`` serves
it; ``faults.effects.carry`` keeps what was logged across a change of State.
"""

from __future__ import annotations

import bisect

from mokkafs.faults.xid import events
from mokkafs.state import KeptLog, State

RING = 4096  # records kept; older ones are gone, and a reader still on them gets EPIPE
KERN_ERR, KERN_INFO = 3, 6  # printk levels; facility 0 (kernel), so prio is the level
XID_LEVEL = KERN_ERR  # assumed: the driver's Xid report is an error-level printk
LOAD_LEVEL = KERN_INFO


def load_line(state: State) -> str:
    """The driver's banner at load (nv.c; the open module's as field logs show it)."""
    version = state.driver.version
    if state.driver.kernel_modules == "open":
        return f"NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  {version}  " \
            "Release Build"
    return f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {version}  Release Build"


def escaped(text: str) -> str:
    """As ``msg_print_ext_body`` writes text: a byte below ' ', above '~', or a backslash
    as ``\\xNN``."""
    return "".join(c if " " <= c <= "~" and c != "\\" else f"\\x{ord(c):02x}"
                   for c in text)


class Log:
    """The records of one State, numbered in time order (``tree.stream.Records``): those
    it took over (``State.kernel_log``), then its own."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._times: list[float] | None = None
        self._lines: list[tuple[int, str]] = []
        kept = state.kernel_log
        self.base = kept.next_seq - len(kept.records)  # the number of the first held

    def _key(self) -> tuple[object, ...]:
        state = self._state
        return (state.faults, state.started_at, state.driver, state.kernel_log)

    def __eq__(self, other: object) -> bool:
        """Equal for States that log the same: a swap that changes nothing else keeps it."""
        return isinstance(other, Log) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _built(self) -> list[float]:
        if self._times is None:  # at the first read, not at every build of the tree
            state, kept = self._state, self._state.kernel_log
            own = [(state.started_at, LOAD_LEVEL, load_line(state))]
            own += [(t, XID_LEVEL, line) for t, line in events(state)]
            if kept.since is not None:
                since = kept.since
                own = [r for r in own if r[0] >= since]
            records = [*kept.records, *own]
            self._times = [t for t, _, _ in records]
            self._lines = [(level, line) for _, level, line in records]
        return self._times

    def count(self, now: float) -> int:
        return self.base + bisect.bisect_right(self._built(), now)

    def first(self, now: float) -> int:
        return max(self.base, self.count(now) - RING)

    def record(self, seq: int) -> bytes:
        times = self._built()
        level, text = self._lines[seq - self.base]
        usec = max(0, int(times[seq - self.base] * 1_000_000))
        return f"{level},{seq},{usec},-;{escaped(text)}\n".encode()

    def next_at(self, now: float) -> float | None:
        times = self._built()
        i = bisect.bisect_right(times, now)
        return times[i] if i < len(times) else None

    def kept(self, now: float) -> KeptLog:
        """What a State taking over at ``now`` keeps: the records logged before it."""
        times = self._built()
        n = bisect.bisect_left(times, now)
        held = max(0, n - RING)
        return KeptLog(tuple((times[i], *self._lines[i]) for i in range(held, n)),
                       self.base + n, now)


def kept(old: State, now: float) -> KeptLog:
    """The log a State that takes over from ``old`` at ``now`` keeps (``faults.effects.carry``):
    every record logged before ``now``, whatever the new State's faults are."""
    return Log(old).kept(now)
