"""The daemon's metrics, in a registry of its own (no process-global state).

Facts the daemon keeps anyway (generation, inodes, counts of swaps and errors) are read from
its ``Status`` at scrape time by a collector; only what happens per event (request and swap
durations) is recorded here. FUSE requests are counted in plain lists on the loop's thread
(``Requests``) and turned into metric families at scrape time: prometheus_client's labelled
Counter and Histogram take a lock and walk the buckets on every request, a cost that was a
tenth of a request's daemon CPU.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate
from typing import get_args

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from mokkafs.obs.status import Status
from mokkafs.state import FaultKind

FUSE_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 1e-1)
FAULT_KINDS = get_args(FaultKind)
SWAP_BUCKETS = (1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)


class StatusCollector(Collector):
    def __init__(self, status: Status) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        s = self.status

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        yield gauge("mokkafs_generation", "Generation of the State being served", s.generation)
        yield gauge("mokkafs_inodes", "Inodes in the view being served", s.inodes)
        yield gauge("mokkafs_last_successful_load_timestamp_seconds",
                    "When the State being served was loaded", s.last_success or 0)
        yield gauge("mokkafs_following",
                    "1 while the source sees changes of its profile", int(s.following))
        yield gauge("mokkafs_serving", "1 while the mount serves", int(s.serving))
        mode = GaugeMetricFamily("mokkafs_cache_mode_info",
                                 "1 for the cache mode the mount serves in", labels=["mode"])
        mode.add_metric([s.cache_mode], 1)
        yield mode
        yield CounterMetricFamily("mokkafs_swaps", "Views swapped in after a successful load",
                                  value=s.swaps)
        yield CounterMetricFamily("mokkafs_source_reads", "Times the source read its profile",
                                  value=s.watch.reads if s.watch is not None else 0)
        yield CounterMetricFamily("mokkafs_source_errors",
                                  "Loads that failed; the last good State stays in force",
                                  value=s.source_errors)
        failed = CounterMetricFamily("mokkafs_apply_errors",
                                     "Failures while applying a loaded State, by stage",
                                     labels=["stage"])
        for stage in ("build", "invalidate", "publish"):
            failed.add_metric([stage], s.apply_errors.get(stage, 0))
        yield failed
        yield CounterMetricFamily("mokkafs_invalidations",
                                  "Kernel cache invalidations sent after swaps",
                                  value=s.invalidations)
        active = GaugeMetricFamily("mokkafs_faults_active", "Faults in effect, by kind",
                                   labels=["kind"])
        for kind in FAULT_KINDS:
            active.add_metric([kind], sum(1 for f in s.faults
                                          if f["kind"] == kind and f["state"] == "active"))
        yield active
        moved = CounterMetricFamily("mokkafs_fault_transitions",
                                    "Faults entering a state (active, ended), by kind",
                                    labels=["kind", "to"])
        for (kind, to), count in sorted(s.fault_transitions.items()):
            moved.add_metric([kind, to], count)
        yield moved


class Requests(Collector):
    """FUSE requests by operation: seconds in all, and a count per duration bucket (the
    count of requests is their sum). Recorded on the FUSE loop's thread; collected from the
    scrape's worker thread, which copies each row whole (one list copy under the GIL), so
    counts and buckets always agree and the sum lags by at most the request in flight."""

    def __init__(self) -> None:
        self.ops: dict[str, list[float]] = {}  # op -> [seconds, per bucket..., above the last]

    def observe(self, op: str, seconds: float) -> None:
        row = self.ops.get(op)
        if row is None:
            row = self.ops[op] = [0.0] * (len(FUSE_BUCKETS) + 2)
        row[1 + bisect_left(FUSE_BUCKETS, seconds)] += 1  # le: the first bound >= seconds
        row[0] += seconds

    def collect(self) -> Iterator[Metric]:
        count = CounterMetricFamily("mokkafs_fuse_requests", "FUSE requests by operation",
                                    labels=["op"])
        hist = HistogramMetricFamily("mokkafs_fuse_request_duration_seconds",
                                     "Time to answer a FUSE request, by operation",
                                     labels=["op"])
        bounds = [*map(str, FUSE_BUCKETS), "+Inf"]
        for op, row in sorted((op, row[:]) for op, row in list(self.ops.items())):
            cumulative = list(accumulate(row[1:]))
            count.add_metric([op], cumulative[-1])
            hist.add_metric([op], list(zip(bounds, cumulative, strict=True)), sum_value=row[0])
        yield count
        yield hist


class Metrics:
    def __init__(self, status: Status) -> None:
        r = self.registry = CollectorRegistry()
        r.register(StatusCollector(status))
        self.swap_seconds = Histogram("mokkafs_swap_duration_seconds",
                                      "Build, swap and kernel invalidation of a new view",
                                      buckets=SWAP_BUCKETS, registry=r)
        self.invalidation_seconds = Histogram(
            "mokkafs_invalidation_duration_seconds",
            "Sending one swap's kernel cache invalidations (a worker thread)",
            buckets=SWAP_BUCKETS, registry=r)
        self.requests = Requests()
        r.register(self.requests)
        self.observe_request = self.requests.observe
