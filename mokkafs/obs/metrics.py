"""The daemon's metrics, written in Prometheus's text format (version 0.0.4) by this module.

Facts the daemon keeps anyway (generation, inodes, counts of swaps and errors) are read from
its ``Status`` at scrape time; only what happens per event (request and swap durations) is
recorded here, in plain lists on the loop's thread, and turned into metric families at scrape
time. A scrape copies each list whole (one list copy under the GIL), so a histogram's counts
and buckets always agree and its sum lags by at most the observation in flight.

Not prometheus_client: its labelled Counter and Histogram take a lock and walk the buckets on
every request, a cost that was a tenth of a request's daemon CPU, and importing it imports
``ssl`` (``mokkafs.host.imports``): libssl in a daemon's memory for a page of text.
prometheus_client's parser reads what this writes in the tests.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Literal, get_args

from mokkafs.obs.status import Status
from mokkafs.state import FaultKind

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FUSE_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 1e-1)
FAULT_KINDS = get_args(FaultKind)
SWAP_BUCKETS = (1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5)

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    """One metric family: its samples are (name suffix, labels, value)."""

    name: str
    kind: Literal["counter", "gauge", "histogram"]
    doc: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, value: float, labels: Labels = (), suffix: str = "") -> Family:
        self.samples.append((suffix, labels, value))
        return self

    def add_histogram(self, row: Sequence[float], bounds: Sequence[float],
                      labels: Labels = ()) -> None:
        """``row``: the sum, then a count per bucket and one above the last bound."""
        cumulative = list(accumulate(row[1:]))
        les = [*map(_number, bounds), "+Inf"]
        for le, count in zip(les, cumulative, strict=True):
            self.add(count, (*labels, ("le", le)), "_bucket")
        self.add(cumulative[-1], labels, "_count")
        self.add(row[0], labels, "_sum")


def gauge(name: str, doc: str, value: float) -> Family:
    return Family(name, "gauge", doc).add(value)


def counter(name: str, doc: str, value: float | None = None) -> Family:
    family = Family(name, "counter", doc)
    return family if value is None else family.add(value)


class Histogram:
    """Durations in fixed buckets: the sum, then a count per bucket (``le``: the first bound
    at or above the duration) and one above the last bound."""

    def __init__(self, name: str, doc: str, buckets: Sequence[float]) -> None:
        self.name, self.doc, self.buckets = name, doc, tuple(buckets)
        self.row = [0.0] * (len(self.buckets) + 2)

    def observe(self, seconds: float) -> None:
        self.row[1 + bisect_left(self.buckets, seconds)] += 1
        self.row[0] += seconds

    def collect(self) -> Iterator[Family]:
        family = Family(self.name, "histogram", self.doc)
        family.add_histogram(self.row[:], self.buckets)
        yield family


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(families: Iterable[Family]) -> bytes:
    """The text exposition of ``families``."""
    lines: list[str] = []
    for f in families:
        name = f"{f.name}_total" if f.kind == "counter" else f.name
        doc = f.doc.replace("\\", "\\\\").replace("\n", "\\n")
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} {f.kind}"]
        for suffix, labels, value in f.samples:
            inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(labels))
            lines.append(f"{name}{suffix}{{{inner}}} {_number(value)}" if labels
                         else f"{name}{suffix} {_number(value)}")
    return ("\n".join(lines) + "\n").encode()


def status_families(s: Status) -> Iterator[Family]:
    """What the daemon's ``Status`` says, as metric families."""
    yield gauge("mokkafs_generation", "Generation of the State being served", s.generation)
    yield gauge("mokkafs_inodes", "Inodes in the view being served", s.inodes)
    yield gauge("mokkafs_last_successful_load_timestamp_seconds",
                "When the State being served was made: loaded, or changed at run time",
                s.last_success or 0)
    yield gauge("mokkafs_following",
                "1 while the source sees changes of its profile", int(s.following))
    yield gauge("mokkafs_serving", "1 while the mount serves", int(s.serving))
    yield Family("mokkafs_cache_mode_info", "gauge",
                 "1 for the cache mode the mount serves in").add(1, (("mode", s.cache_mode),))
    yield counter("mokkafs_swaps", "Views swapped in after a successful load", s.swaps)
    yield counter("mokkafs_source_reads", "Times the source read its profile",
                  s.watch.reads if s.watch is not None else 0)
    yield counter("mokkafs_compile_processes_started",
                  "Compiling processes started: the first compile's, and each change's that "
                  "found none running (--compile-idle)",
                  s.watch.compile_starts if s.watch is not None else 0)
    yield counter("mokkafs_source_errors",
                  "Loads that failed; the last good State stays in force", s.source_errors)
    failed = counter("mokkafs_apply_errors", "Failures while applying a loaded State, by stage")
    for stage in ("build", "invalidate", "publish", "persist"):
        failed.add(s.apply_errors.get(stage, 0), (("stage", stage),))
    yield failed
    yield counter("mokkafs_invalidations", "Kernel cache invalidations sent after swaps",
                  s.invalidations)
    active = Family("mokkafs_faults_active", "gauge", "Faults in effect, by kind")
    for kind in FAULT_KINDS:
        active.add(sum(1 for f in s.faults if f["kind"] == kind and f["state"] == "active"),
                   (("kind", kind),))
    yield active
    moved = counter("mokkafs_fault_transitions",
                    "Faults entering a state (active, ended), by kind")
    for (kind, to), count in sorted(s.fault_transitions.items()):
        moved.add(count, (("kind", kind), ("to", to)))
    yield moved
    yield gauge("mokkafs_faults_restored",
                "Faults the state file gave back when the daemon started", len(s.restored))
    yield gauge("mokkafs_state_file_refused",
                "1 if the state file was refused when the daemon started (see /readyz)",
                int(s.state_refused is not None))
    writes: dict[str, Any] = s.writes() if s.writes is not None else {
        "list": [], "taken": 0, "dropped": 0, "refused": {}}
    yield gauge("mokkafs_writes_active", "Sysfs writes the view serves (docs/writes.md)",
                len(writes["list"]))
    yield counter("mokkafs_writes_taken", "Sysfs writes that changed the view", writes["taken"])
    yield counter("mokkafs_writes_dropped", "Sysfs writes a profile swap ended (target gone)",
                  writes["dropped"])
    refused = counter("mokkafs_writes_refused", "Sysfs writes refused, by errno")
    for code, count in sorted(writes["refused"].items()):
        refused.add(count, (("errno", code),))
    yield refused
    kmsg = s.kmsg() if s.kmsg is not None else {"readers": 0, "waiting": 0, "refused": 0}
    yield gauge("mokkafs_kmsg_readers", "Opens of dev/kmsg (docs/kmsg.md)", kmsg["readers"])
    yield gauge("mokkafs_kmsg_reads_waiting", "Reads of dev/kmsg waiting for a record",
                kmsg["waiting"])
    yield counter("mokkafs_kmsg_opens_refused",
                  "Opens of dev/kmsg refused at its limit of readers (EBUSY)", kmsg["refused"])


REQUEST_SECONDS = ("mokkafs_fuse_request_duration_seconds",
                   "Time to answer a FUSE request, by operation")


class Requests:
    """FUSE requests by operation, a histogram of durations each (the count of requests is
    their sum), recorded on the FUSE loop's thread."""

    def __init__(self) -> None:
        self.ops: dict[str, Histogram] = {}

    def observe(self, op: str, seconds: float) -> None:
        histogram = self.ops.get(op)
        if histogram is None:
            histogram = self.ops[op] = Histogram(*REQUEST_SECONDS, FUSE_BUCKETS)
        histogram.observe(seconds)

    def collect(self) -> Iterator[Family]:
        count = counter("mokkafs_fuse_requests", "FUSE requests by operation")
        hist = Family(REQUEST_SECONDS[0], "histogram", REQUEST_SECONDS[1])
        for op, row in sorted((op, h.row[:]) for op, h in list(self.ops.items())):
            count.add(sum(row[1:]), (("op", op),))
            hist.add_histogram(row, FUSE_BUCKETS, (("op", op),))
        yield count
        yield hist


class Metrics:
    def __init__(self, status: Status) -> None:
        self.status = status
        self.swap_seconds = Histogram("mokkafs_swap_duration_seconds",
                                      "Build, swap and kernel invalidation of a new view",
                                      SWAP_BUCKETS)
        self.invalidation_seconds = Histogram(
            "mokkafs_invalidation_duration_seconds",
            "Sending one swap's kernel cache invalidations (a worker thread)", SWAP_BUCKETS)
        self.requests = Requests()
        self.observe_request = self.requests.observe

    def families(self) -> Iterator[Family]:
        yield from status_families(self.status)
        yield from self.swap_seconds.collect()
        yield from self.invalidation_seconds.collect()
        yield from self.requests.collect()

    def exposition(self) -> bytes:
        """Every metric, as a scrape gets them."""
        return render(self.families())
