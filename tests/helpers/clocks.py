"""A fake clock for tasks that wait for a time on the daemon's clock."""

from __future__ import annotations

import trio
import trio.lowlevel


class JumpingClock:
    """Every sleep jumps time to just after its deadline (recorded in ``slept``), then awaits
    ``reached(when)``, where a test can act (move the clock further, say)."""

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
