"""Faults as written (``faults:`` in a profile or a fault file) checked against the node they
will act on, and resolved into ``FaultSpec``s: which port, HCA or PCI function each names, the
fields its kind uses (a field another kind uses is an error), and whether this node is among
the ``fraction`` it picks.

Targets: ``mlx5_0/1`` (a port; ``mlx5_0`` alone: each of its ports) for the ``ib-*`` kinds;
a GPU as ``0000:1b:00.0`` or ``gpu0`` (its index) for ``gpu-*``, ``xid`` and ``ecc-errors``;
an HCA as ``mlx5_0`` or its PCI address for ``hca-removed``; a GPU or an HCA for ``pcie-
degraded``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from mokkafs.profile.gpu_faults import ecc_xids, gpu_problems
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import MAX_FAULTS, Fault
from mokkafs.profile.xid import MAX_XID_RECORDS, xid_problems
from mokkafs.state import IB_ERROR_COUNTERS, IB_HW_COUNTERS, FaultSpec, State

PORT_KINDS = ("ib-port-down", "ib-port-flap", "ib-errors", "ib-degraded")
GPU_KINDS = ("gpu-lost", "gpu-removed", "xid", "gpu-hot", "ecc-errors", "gpu-busy")
# the optional fields each kind uses (timing and fraction apply to every kind)
FIELDS = {
    "ib-port-down": {"cable", "duration"},
    "ib-port-flap": {"cable", "every", "count"},
    "ib-errors": {"rates", "duration"},
    "ib-degraded": {"width", "rate_gbps", "duration"},
    "pcie-degraded": {"gen", "width", "duration"},
    "gpu-lost": {"duration"},
    "gpu-removed": {"duration"},
    "hca-removed": {"duration"},
    "xid": {"every", "count", "xid", "text"},
    "gpu-hot": {"temperature", "clock_mhz", "duration"},
    "ecc-errors": {"rates", "duration"},
    "gpu-busy": {"pid", "process", "memory_mib", "utilization_gpu", "utilization_memory",
                 "duration"},
}
OPTIONAL: dict[str, object] = {"cable": False, "duration": None, "every": None, "count": None,
                               "rates": {}, "width": None, "rate_gbps": None, "gen": None,
                               "xid": None, "text": None, "temperature": None,
                               "clock_mhz": None, "pid": None, "process": None,
                               "memory_mib": None, "utilization_gpu": None,
                               "utilization_memory": None}
YAML_NAMES = {"duration": "for"}
COUNTER_NAMES = frozenset(IB_ERROR_COUNTERS) | frozenset(IB_HW_COUNTERS)
IB_WIDTHS = (1, 2, 4, 8, 12)
# The shortest half-period of a flap: what a real port can do. A link that went down trains
# again (Polling, then LinkUp) in about a second, and is ACTIVE again only once the subnet
# manager has swept it (opensm sweeps every 10 s unless told otherwise, opensm(8) -s). A
# faster flap shows nothing a node shows, and costs the daemon a view at every edge.
MIN_FLAP_SECONDS = 1.0
# Flap cycles of every fault a node holds together (the profile's and the control socket's):
# each cycle is a window every counter read of its port goes through.
MAX_FLAP_CYCLES = 10_000


def selected(node_name: str, fault_name: str, fraction: float) -> bool:
    """Whether a fault picking ``fraction`` of a fleet picks this node: a stable hash of the
    two names under the fraction, so every node agrees without talking to the others."""
    if fraction >= 1:
        return True
    digest = hashlib.sha256(f"{node_name}\0{fault_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def _gpu(state: State, target: str) -> str | None:
    for fn in state.gpus():
        if fn.bdf == target.lower() or (fn.gpu and target == f"gpu{fn.gpu.index}"):
            return fn.bdf
    return None


def _hca(state: State, target: str) -> tuple[str, str] | None:
    """(name, bdf) of the HCA a target names."""
    for hca in state.hcas:
        if target in (hca.name, hca.bdf) or target.lower() == hca.bdf:
            return hca.name, hca.bdf
    return None


def _ports(state: State, target: str) -> tuple[tuple[str, int], ...] | None:
    name, _, number = target.partition("/")
    for hca in state.hcas:
        if hca.name == name:
            ports = tuple((hca.name, p.number) for p in hca.ports
                          if not number or str(p.number) == number)
            return ports or None
    return None


def _resolve(fault: Fault, state: State, where: YamlPath, problems: Problems,
             ) -> FaultSpec | None:
    kind = fault.kind
    spec = FaultSpec(fault.name, kind, fault.target, "profile", after=fault.after,
                     duration=fault.duration, every=fault.every, count=fault.count,
                     cable=fault.cable, rates=tuple(sorted(fault.rates.items())),
                     width=fault.width, rate_gbps=fault.rate_gbps, gen=fault.gen,
                     xid=fault.xid, text=fault.text, temperature=fault.temperature,
                     clock_mhz=fault.clock_mhz, pid=fault.pid, process=fault.process,
                     memory_mib=fault.memory_mib, utilization_gpu=fault.utilization_gpu,
                     utilization_memory=fault.utilization_memory)
    bad = False
    for name, default in OPTIONAL.items():
        if name not in FIELDS[kind] and getattr(fault, name) != default:
            problems.add((*where, YAML_NAMES.get(name, name)),
                         f"{kind} does not use {YAML_NAMES.get(name, name)}; remove it")
            bad = True
    if kind in PORT_KINDS:
        ports = _ports(state, fault.target)
        if ports is None:
            names = ", ".join(f"{h.name}/{p.number}" for h in state.hcas for p in h.ports[:1])
            problems.add((*where, "target"), f"no InfiniBand port {fault.target!r} on this node; "
                         f"expected HCA/port such as {names or '(this node has no HCAs)'}")
            return None
        spec = replace(spec, ports=ports)
    elif kind in GPU_KINDS:
        bdf = _gpu(state, fault.target)
        if bdf is None:
            problems.add((*where, "target"), f"no GPU {fault.target!r} on this node; expected a "
                         "GPU's PCI address (0000:1b:00.0) or gpuN")
            return None
        spec = replace(spec, bdf=bdf)
    elif kind == "hca-removed":
        hca = _hca(state, fault.target)
        if hca is None:
            problems.add((*where, "target"), f"no HCA {fault.target!r} on this node; expected "
                         "mlx5_N or its PCI address")
            return None
        spec = replace(spec, hca=hca[0], bdf=hca[1])
    else:  # pcie-degraded: a GPU or an HCA's function
        hca = _hca(state, fault.target)
        bdf = _gpu(state, fault.target) or (hca[1] if hca else None)
        if bdf is None:
            problems.add((*where, "target"), f"no GPU or HCA {fault.target!r} on this node")
            return None
        link = state.function(bdf).link
        if fault.gen is None and fault.width is None:
            problems.add(where, "pcie-degraded needs gen, width or both: what the link "
                         "trained to")
        if fault.gen is not None and fault.gen > link.max_gen:
            problems.add((*where, "gen"), f"{fault.target} links at Gen{link.max_gen} at most")
        if fault.width is not None and fault.width > link.max_width:
            problems.add((*where, "width"), f"{fault.target} links at x{link.max_width} at most")
        spec = replace(spec, bdf=bdf)
    if kind == "ib-port-flap" and (fault.every is None or fault.count is None):
        problems.add(where, "ib-port-flap needs every (seconds down, then up) and count "
                     "(cycles)")
    if kind == "xid":
        xid_problems(fault, where, problems)
    elif kind in ("gpu-hot", "ecc-errors", "gpu-busy") and spec.bdf is not None:
        gpu_problems(fault, state.function(spec.bdf), where, problems)
    elif fault.every is not None and fault.every < MIN_FLAP_SECONDS:
        problems.add((*where, "every"), f"{fault.every:g} s is below the floor of "
                     f"{MIN_FLAP_SECONDS:g} s (a real port takes about a second to train its "
                     f"link again); use every: {MIN_FLAP_SECONDS:g} or more")
    if kind == "ib-errors":  # (ecc-errors' rates: gpu_problems)
        if not fault.rates:
            problems.add((*where, "rates"), "ib-errors needs rates: {counter: per second}, "
                         "e.g. {symbol_error: 10, port_rcv_errors: 1}")
        for name in fault.rates:
            if name not in COUNTER_NAMES:
                problems.add((*where, "rates", name), "not an error counter of counters/ or "
                             "hw_counters/ (see docs/faults.md)")
    if kind == "ib-degraded":
        if fault.width is None and fault.rate_gbps is None:
            problems.add(where, "ib-degraded needs width, rate_gbps or both")
        if fault.width is not None and fault.width not in IB_WIDTHS:
            problems.add((*where, "width"), "an InfiniBand link has 1, 2, 4, 8 or 12 lanes")
    return None if bad else spec


def over_bounds(specs: Sequence[Fault | FaultSpec]) -> str | None:
    """Why one node cannot hold all of ``specs`` together (whatever their state: pending,
    ended and ``off`` faults are held too), or None."""
    if len(specs) > MAX_FAULTS:
        return f"{len(specs)} faults, and a node holds {MAX_FAULTS} at most"
    logged = sum(s.count or 1 for s in specs if s.kind == "xid") + ecc_xids(specs)
    if logged > MAX_XID_RECORDS:
        return f"{logged} Xids (the xid faults' counts and the ecc-errors' uncorrectable " \
            "errors), and a node logs " \
            f"{MAX_XID_RECORDS} at most"
    cycles = sum(s.count or 0 for s in specs if s.kind == "ib-port-flap")
    if cycles > MAX_FLAP_CYCLES:
        return f"{cycles} flap cycles (the sum of their counts), and a node holds " \
            f"{MAX_FLAP_CYCLES} at most"
    return None


def compile_faults(faults: Sequence[Fault], state: State, where: YamlPath,
                   problems: Problems, source: Literal["profile", "control"] = "profile",
                   ) -> tuple[FaultSpec, ...]:
    """The faults' specs for ``state``'s node; problems (with their YAML paths below
    ``where``) are added to ``problems``, which the caller checks."""
    out: list[FaultSpec] = []
    seen: set[str] = set()
    for i, fault in enumerate(faults):
        path = (*where, i)
        if fault.name in seen:
            problems.add((*path, "name"), f"{fault.name} names another fault too; names are "
                         "how faults are listed and cleared")
            continue
        seen.add(fault.name)
        spec = _resolve(fault, state, path, problems)
        if spec is not None:
            out.append(replace(spec, source=source, selected=selected(
                state.node_name, fault.name, fault.fraction)))
    why = over_bounds(out)
    if why is not None:
        problems.add(where, f"{why}; use fewer faults or smaller counts")
    return tuple(out)
