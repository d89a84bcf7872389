"""A file read record by record, each open at a position of its own, as /dev/kmsg is: a
``Stream`` node carries its ``Records`` (what is logged, as a function of the time), and the
FUSE edge (``mokkafs.fuse.stream``) keeps each reader's position. Its bytes as a file (the
``File`` it is) are empty: nothing reads it but a stream's reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Records(Protocol):
    """Records numbered from 0 in the order they are logged; a ring keeps the newest."""

    def count(self, now: float) -> int:
        """How many records are logged by ``now``: the number the next one gets."""

    def first(self, now: float) -> int:
        """The number of the oldest record the ring still keeps at ``now``."""

    def record(self, seq: int) -> bytes:
        """Record ``seq`` as a reader gets it from one read."""

    def next_at(self, now: float) -> float | None:
        """When the first record after ``now`` is logged (None: none is known yet)."""


@dataclass(frozen=True, slots=True)
class Stream:
    """What a stream file logs. Held by the File node (``content`` empty, ``stream`` set)."""

    records: Records
