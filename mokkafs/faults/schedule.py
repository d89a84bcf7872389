"""When each fault is in effect, on the daemon's clock (seconds, the clock's own origin).

A fault applied at ``origin`` starts ``after`` seconds later and lasts ``for`` seconds (absent:
until cleared); an ``ib-port-flap`` is down ``every`` seconds, up ``every`` seconds, ``count``
times. Its status: ``pending`` before its first window, ``active`` from then to the end of its
last (between a flap's cycles too), ``ended`` after; ``off`` where its ``fraction`` did not
pick this node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from mokkafs.state import FaultSpec

Status = Literal["pending", "active", "ended", "off"]


def windows(spec: FaultSpec) -> tuple[tuple[float, float], ...]:
    """The (start, end) clock times the fault is in effect; none before it is applied."""
    if spec.origin is None or not spec.selected:
        return ()
    start = spec.origin + spec.after
    if spec.kind == "ib-port-flap" and spec.every is not None and spec.count is not None:
        return tuple((start + 2 * i * spec.every, start + (2 * i + 1) * spec.every)
                     for i in range(spec.count))
    return ((start, math.inf if spec.duration is None else start + spec.duration),)


def in_effect(spec: FaultSpec, now: float) -> bool:
    return any(a <= now < b for a, b in windows(spec))


def status(spec: FaultSpec, now: float) -> Status:
    if not spec.selected:
        return "off"
    spans = windows(spec)
    if not spans or now < spans[0][0]:
        return "pending"
    return "ended" if now >= spans[-1][1] else "active"


def next_change(specs: Iterable[FaultSpec], now: float) -> float | None:
    """The first time after ``now`` at which some fault starts or stops acting."""
    edges = [t for spec in specs for span in windows(spec) for t in span
             if now < t < math.inf]
    return min(edges, default=None)


def remaining(spec: FaultSpec, now: float) -> float | None:
    """Seconds from ``now`` until the fault's last window ends (None: it never does)."""
    spans = windows(spec)
    if not spans or math.isinf(spans[-1][1]):
        return None
    return max(0.0, spans[-1][1] - now)
