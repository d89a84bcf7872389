"""The daemon's metrics and health, in a registry of its own (no process-global state)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

FUSE_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 1e-1)
SWAP_BUCKETS = (1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.generation = Gauge("mokkafs_generation", "Generation of the State being served",
                                registry=r)
        self.swaps = Counter("mokkafs_swaps", "Views swapped in after a successful load",
                             registry=r)
        self.source_errors = Counter("mokkafs_source_errors",
                                     "Loads that failed; the last good State stays in force",
                                     registry=r)
        self.swap_seconds = Histogram("mokkafs_swap_duration_seconds",
                                      "Build, swap and kernel invalidation of a new view",
                                      buckets=SWAP_BUCKETS, registry=r)
        self.invalidations = Counter("mokkafs_invalidations",
                                     "Kernel cache invalidations sent after swaps", registry=r)
        self.invalidation_seconds = Histogram(
            "mokkafs_invalidation_duration_seconds",
            "Sending one swap's kernel cache invalidations (a worker thread)",
            buckets=SWAP_BUCKETS, registry=r)
        self.inodes = Gauge("mokkafs_inodes", "Inodes in the view being served", registry=r)
        self.last_success = Gauge("mokkafs_last_successful_load_timestamp_seconds",
                                  "When the State being served was loaded", registry=r)
        self.fuse_requests = Counter("mokkafs_fuse_requests", "FUSE requests by operation",
                                     ["op"], registry=r)
        self.fuse_seconds = Histogram("mokkafs_fuse_request_duration_seconds",
                                      "Time to answer a FUSE request, by operation", ["op"],
                                      buckets=FUSE_BUCKETS, registry=r)
        self.cache_mode = Gauge("mokkafs_cache_mode_info",
                                "1 for the cache mode the mount serves in", ["mode"], registry=r)
        self._per_op: dict[str, tuple[Counter, Histogram]] = {}

    def observe_request(self, op: str, seconds: float) -> None:
        children = self._per_op.get(op)
        if children is None:
            children = self._per_op[op] = (self.fuse_requests.labels(op),
                                           self.fuse_seconds.labels(op))
        children[0].inc()
        children[1].observe(seconds)


@dataclass
class Health:
    """What /readyz reports. ``serving`` is true from the mount until shutdown begins."""

    serving: bool = False
    generation: int = 0
    source: str = ""
    last_success: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    surfaces: dict[str, int] = field(default_factory=dict)  # surface -> nodes it serves

    def report(self) -> dict[str, object]:
        return {
            "ready": self.serving,
            "generation": self.generation,
            "source": self.source,
            "last_success": self.last_success,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "surfaces": {name: {"status": "ok" if self.serving else "not serving",
                                "nodes": nodes, "generation": self.generation}
                         for name, nodes in self.surfaces.items()},
            "now": time.time(),
        }
