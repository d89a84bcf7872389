"""A GPU's ECC errors as arithmetic of time, as the IB counters are (``mokkafs.counters``):
what it counted before (``kept``, carried across changes of State) and the bursts of an
``ecc-errors`` fault, each growing at its rates from its start to its end. No writer runs in
the background: a read at any instant computes the counts. What follows the uncorrectable
errors is the driver's: a row remapped for each on Ampere and later (pending until a reset,
which never comes), a page retired for each before (at most 64). docs/faults.md, docs/nvml.md.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass

REMAPPING_FROM = 7  # NVML_DEVICE_ARCH_AMPERE: row remapping replaces page retirement
MAX_RETIRED_PAGES = 64  # the driver retires 64 pages at most (dynamic page retirement)
PAGE = 4096
EPSILON = 1e-9  # the i-th error of a rate r falls at start + i / r, and counts there


def _errors(rate: float, seconds: float) -> int:
    return int(rate * seconds + EPSILON) if seconds > 0 and rate > 0 else 0


@dataclass(frozen=True, slots=True)
class EccBurst:
    """Errors per second, corrected and uncorrected, from ``start`` to ``end`` (clock times;
    ``math.inf``: until cleared)."""

    corrected: float
    uncorrected: float
    start: float
    end: float = math.inf

    def counts(self, now: float) -> tuple[int, int]:
        seconds = min(now, self.end) - self.start
        return _errors(self.corrected, seconds), _errors(self.uncorrected, seconds)

    def uncorrected_times(self) -> list[float]:
        """When each uncorrectable error comes (a finite burst's; an endless one: none)."""
        if self.uncorrected <= 0 or math.isinf(self.end):
            return []
        n = _errors(self.uncorrected, self.end - self.start)
        return [self.start + i / self.uncorrected for i in range(1, n + 1)]


@dataclass(frozen=True, slots=True)
class Ecc:
    """A GPU's errors: ``kept`` (corrected, uncorrected) counted before, and its bursts."""

    kept: tuple[int, int] = (0, 0)
    bursts: tuple[EccBurst, ...] = ()

    def counts(self, now: float) -> tuple[int, int]:
        corrected, uncorrected = self.kept
        for burst in self.bursts:
            c, u = burst.counts(now)
            corrected, uncorrected = corrected + c, uncorrected + u
        return corrected, uncorrected


def kept_over(kept: tuple[int, int], before: tuple[EccBurst, ...],
              after: tuple[EccBurst, ...], now: float) -> tuple[int, int]:
    """What a GPU keeps at ``now`` when its bursts change from ``before`` to ``after``: so
    its counts go on from where they are (a cleared burst's errors stay counted)."""
    old = Ecc(kept, before).counts(now)
    new = Ecc((0, 0), after).counts(now)
    return max(0, old[0] - new[0]), max(0, old[1] - new[1])


@functools.lru_cache(maxsize=256)
def _pages(bdf: str, memory: int | None) -> tuple[int, ...]:
    """A GPU's ``MAX_RETIRED_PAGES`` page addresses, made once: a read of its file only
    counts how many are retired (memoized: a pure function, its result immutable)."""
    pages = (memory or 1 << 34) // PAGE
    return tuple(int.from_bytes(hashlib.sha256(f"{bdf}\0{i}".encode()).digest()[:8], "big")
                 % pages * PAGE for i in range(MAX_RETIRED_PAGES))


def page_addresses(bdf: str, count: int, memory: int | None) -> list[int]:
    """The addresses of ``count`` retired pages (``MAX_RETIRED_PAGES`` at most): spread over
    the framebuffer by a digest of the GPU and the page's number, the same at every read."""
    return list(_pages(bdf, memory)[:count])


def ecc_values(architecture: int | None, bdf: str, memory: int | None,
               counts: tuple[int, int]) -> list[tuple[str, object]]:
    """The keys of NVML's own place for a GPU with ECC on and these counts: the totals, and
    the remapped rows (Ampere and later) or the retired pages (before)."""
    corrected, uncorrected = counts
    out: list[tuple[str, object]] = [
        ("ecc_volatile_corrected", corrected), ("ecc_volatile_uncorrected", uncorrected),
        ("ecc_aggregate_corrected", corrected), ("ecc_aggregate_uncorrected", uncorrected)]
    if architecture is None:
        return out
    if architecture >= REMAPPING_FROM:
        return [*out, ("remapped_rows_correctable", 0),
                ("remapped_rows_uncorrectable", uncorrected),
                ("remapped_rows_pending", int(uncorrected > 0)), ("remapped_rows_failure", 0)]
    retired = min(uncorrected, MAX_RETIRED_PAGES)
    addresses = ",".join(f"0x{a:x}" for a in page_addresses(bdf, retired, memory))
    return [*out, ("retired_pages_sbe", 0), ("retired_pages_dbe", retired),
            ("retired_pages_dbe_addresses", addresses or None),
            ("retired_pages_pending", int(retired > 0))]
