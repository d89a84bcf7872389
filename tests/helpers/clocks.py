"""A fake clock, for code that reads the daemon's clock or waits for a time on it, and content
that follows it."""

from __future__ import annotations

import trio
import trio.lowlevel


class JumpingClock:
    """Reads ``now``, which a test sets. Every sleep jumps time to just after its deadline
    (recorded in ``slept``), then awaits ``reached(when)``, where a test can act (move the
    clock further, say)."""

    def __init__(self, start: float = 0.05) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def reached(self, when: float) -> None:
        await trio.lowlevel.checkpoint()

    async def sleep_until(self, when: float) -> None:
        self.slept.append(when)
        self.now = max(self.now, when + 0.001)
        await self.reached(when)


class Tenths:
    """Dynamic content: the clock's whole tenths. A new one is other content (a tree diff
    compares nodes, and so their content functions)."""

    def __call__(self, now: float) -> bytes:
        return f"{int(now * 10)}\n".encode()
