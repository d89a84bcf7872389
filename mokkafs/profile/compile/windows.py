"""Addresses: every endpoint's BARs, and the windows each bridge forwards to its subtree."""

from __future__ import annotations

from collections.abc import Container, Iterable

from mokkafs.model.bdf import Bdf
from mokkafs.profile import devices
from mokkafs.profile.compile.endpoints import Endpoint
from mokkafs.state import Bar


def allocate(depth_first: Iterable[Bdf], bridges: Container[Bdf],
              endpoints: dict[Bdf, Endpoint]) -> dict[Bdf, tuple[Bar, ...]]:
    """Every endpoint's BARs, taken in the hierarchy's depth-first order with each bridge's
    subtree starting on a window boundary, so the subtree's ranges are contiguous."""
    allocator = devices.BarAllocator()
    out: dict[Bdf, tuple[Bar, ...]] = {}
    for bdf in depth_first:
        if bdf in bridges:
            allocator.align()
        else:
            out[bdf] = tuple(allocator.take(*bar) for bar in endpoints[bdf].bars)
    return out


Window = tuple[int, int] | None


def bridge_windows(below: list[Bar]) -> tuple[Window, Window]:
    """The address windows a bridge forwards, given the BARs of its subtree: the span of each
    kind (non-prefetchable, prefetchable), in the 1 MiB granules bridges decode."""

    def span(selected: list[Bar]) -> Window:
        if not selected:
            return None
        base = min(b.address for b in selected) & ~(devices.MIB - 1)
        end = max(b.address + b.size for b in selected)
        return base, -(-end // devices.MIB) * devices.MIB - 1

    return (span([b for b in below if not b.prefetchable]),
            span([b for b in below if b.prefetchable]))
