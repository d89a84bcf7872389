"""The daemon's time, as its parts see it: a clock to read, and a way to wait until it reads a
given time. The daemon runs on ``time.monotonic`` and ``real_sleep_until``; a test hands in a
clock it drives, with its own way to wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

Clock = Callable[[], float]  # the time dynamic content and fault transitions follow (seconds)
SleepUntil = Callable[[float], Awaitable[None]]  # wait until the clock reads that time


async def real_sleep_until(clock: Clock, when: float) -> None:
    """Sleep until ``clock()`` (a time.monotonic() clock) reaches ``when``."""
    await trio.sleep(max(0.0, when - clock()))
