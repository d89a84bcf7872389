"""What the node looks like under its faults at a given time: ``at(state, now)`` is the State
the surfaces render, every file of every surface agreeing. What each kind does, and what the
kernel does that it follows, is in docs/faults.md.

- ``ib-port-down`` / ``ib-port-flap``: the port is ``1: DOWN``, ``3: Disabled`` (``2:
  Polling`` with the cable out), ``10 Gb/sec (4X SDR)`` (a down mlx5 port's rate) while down
  (a RoCE port: ``3: Disabled``, ``40 Gb/sec (4X QDR)``); its counters stop for the time it
  is down and ``link_downed`` counts each time it goes down.
- ``ib-errors``: the named counters grow at their rates while it acts.
- ``ib-degraded``: the port's rate and width drop.
- ``pcie-degraded``: the function's link, and its port's, train below their maximum.
- ``gpu-lost``: config reads of the GPU complete with all ones (Xid 79, fallen off the bus),
  its port's link is down, the driver no longer reads its VBIOS.
- ``gpu-removed`` / ``hca-removed``: the function is gone, as after ``echo 1 > remove``, with
  its HCA (whose ports count nothing meanwhile: their link went down with it); its driver
  stays loaded; cleared, it comes back as a rescan finds it, identities unchanged.
- ``gpu-hot`` / ``gpu-busy`` / ``ecc-errors``: the GPU's NVML temperature and clocks, a
  process running with its memory and utilization, and its ECC errors growing at their rates
  (``mokkafs.faults.gpu``); each uncorrectable one logs an Xid 48.

Counter effects are in each port's ``Traffic.windows`` for all of the fault's windows (past and
future), so counters are right at any instant between two installed views; ``carry`` keeps
them monotonic when the faults or the profile change.
"""

from __future__ import annotations

from dataclasses import replace

from mokkafs.counters import carried
from mokkafs.faults import kernel_log
from mokkafs.faults.gpu import carried_ecc, heated
from mokkafs.faults.schedule import in_effect, windows
from mokkafs.state import FaultSpec, IbPort, PcieLink, PciFunction, State, Traffic, Windows

PortKey = tuple[str, int]
LOST_VBIOS = "??.??.??.??.??"  # what the driver prints when it cannot read it
DOWN_RATE, DOWN_WIDTH = 10, 4  # mlx5 reports a down port as 4X SDR
ROCE_DOWN_RATE = 40  # and a down RoCE port as 4X QDR
DOWN_KINDS = ("ib-port-down", "ib-port-flap")  # faults that take a port's link down


def port_windows(state: State, key: PortKey) -> Windows:
    """What the faults do to one port's counters, in seconds since the node started. The
    port is down while any fault downs it or removes its HCA (its link goes with it): one
    pause per stretch of such time, however many faults overlap in it, so no time is paused
    twice and ``link_downed`` counts each time the link really went down."""
    pauses: list[tuple[float, float]] = []
    bursts: list[tuple[str, float, float, float]] = []
    t0 = state.started_at
    for spec in state.faults:
        removed = spec.kind == "hca-removed" and spec.hca == key[0]
        if key not in spec.ports and not removed:
            continue
        spans = [(a - t0, b - t0) for a, b in windows(spec)]
        if spec.kind in DOWN_KINDS or removed:
            pauses += spans
        elif spec.kind == "ib-errors":
            bursts += [(name, rate, a, b) for a, b in spans for name, rate in spec.rates]
    return Windows(_merged(pauses), tuple(sorted(bursts)))


def _merged(spans: list[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Overlapping or touching spans as one."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _port(port: IbPort, key: PortKey, state: State, active: list[FaultSpec]) -> IbPort:
    port = replace(port, traffic=replace(port.traffic, windows=port_windows(state, key)))
    for spec in active:
        if key not in spec.ports:
            continue
        if spec.kind in DOWN_KINDS:
            # mlx5_query_port_roce: a RoCE port without carrier is Disabled, cable or not,
            # and with no operational protocol keeps the default it starts from, 4X QDR.
            roce = port.link_layer == "Ethernet"
            port = replace(port, state="DOWN",
                           phys_state="Polling" if spec.cable and not roce else "Disabled",
                           rate_gbps=ROCE_DOWN_RATE if roce else DOWN_RATE, width=DOWN_WIDTH)
        elif spec.kind == "ib-degraded" and port.state != "DOWN":
            width = spec.width or port.width
            rate = spec.rate_gbps or port.rate_gbps * width // port.width
            port = replace(port, rate_gbps=rate, width=width)
    return port


def _functions(state: State, active: list[FaultSpec], gone: set[str]) -> tuple[PciFunction, ...]:
    by_bdf = {fn.bdf: fn for fn in state.functions}
    # Lost GPUs last: their port's link is down, whatever a degraded link trained to.
    for spec in sorted(active, key=lambda spec: spec.kind == "gpu-lost"):
        if spec.bdf is None or spec.bdf not in by_bdf:
            continue
        fn = by_bdf[spec.bdf]
        parent = by_bdf.get(fn.parent) if fn.parent else None
        if spec.kind == "pcie-degraded":
            gen = spec.gen or fn.link.current_gen
            width = spec.width or fn.link.current_width
            # Both ends of a link train alike, and every function of a device (the two ports
            # of a dual-port HCA) shares its link.
            device = fn.bdf.rpartition(".")[0]
            ends = [f for f in by_bdf.values()
                    if f.bdf.rpartition(".")[0] == device and f.kind != "bridge"]
            for end in [*ends, *([parent] if parent is not None else [])]:
                by_bdf[end.bdf] = replace(end, link=replace(end.link, current_gen=gen,
                                                            current_width=width))
        elif spec.kind == "gpu-lost":
            gpu = replace(fn.gpu, vbios=LOST_VBIOS) if fn.gpu else None
            by_bdf[fn.bdf] = replace(fn, lost=True, gpu=gpu)
            if parent is not None:  # the port sees the link drop
                by_bdf[parent.bdf] = replace(parent, link=_down(parent.link))
    return tuple(heated(fn, active, state.faults)
                 for bdf, fn in by_bdf.items() if bdf not in gone)


def _down(link: PcieLink) -> PcieLink:
    return replace(link, current_width=0)


def at(state: State, now: float) -> State:
    """``state`` as its faults make it at ``now`` (the daemon's clock)."""
    if not state.faults:
        return state
    active = [spec for spec in state.faults if in_effect(spec, now)]
    gone = {spec.bdf for spec in active
            if spec.kind in ("gpu-removed", "hca-removed") and spec.bdf}
    gone |= {fn.bdf for fn in state.functions if fn.physfn in gone}  # a PF's VFs go with it
    hcas = tuple(
        replace(hca, ports=tuple(_port(p, (hca.name, p.number), state, active)
                                 for p in hca.ports))
        for hca in state.hcas if hca.bdf not in gone)
    return replace(state, hcas=hcas, functions=_functions(state, active, gone))


def applied(state: State, now: float) -> State:
    """``state`` with every fault not yet applied applied at ``now``."""
    return replace(state, faults=tuple(f if f.origin is not None else replace(f, origin=now)
                                       for f in state.faults))


def _ports(state: State) -> dict[PortKey, Traffic]:
    return {(h.name, p.number): p.traffic for h in state.hcas for p in h.ports}


def carry(old: State, new: State, now: float) -> State:
    """``new`` (a compiled State: faults not yet applied, counters from 0) taking over from
    ``old`` at ``now``: a fault unchanged since ``old`` keeps when it was first applied (a new
    or changed one starts now), and every port ``old`` also has keeps counting from where it
    is, re-based only where its rates or its faults' windows change."""
    before = {f.name: f for f in old.faults}
    faults = tuple(replace(f, origin=before[f.name].origin
                           if f.name in before and before[f.name].definition() == f.definition()
                           and before[f.name].origin is not None else now)
                   for f in new.faults)
    # The kernel log keeps what was logged before now, even by faults the new State lacks.
    new = replace(new, faults=faults, kernel_log=kernel_log.kept(old, now))
    new = carried_ecc(old, new, now)  # (with the faults' origins carried)
    t = max(now - old.started_at, 0.0)
    old_ports = _ports(old)

    def continued(key: PortKey, traffic: Traffic) -> Traffic:
        if key not in old_ports:
            return traffic
        kept = old_ports[key]
        was = port_windows(old, key)
        if kept.same_rates(traffic) and was == port_windows(new, key):
            return kept
        return replace(traffic, origin=t, base=carried(replace(kept, windows=was), t).base)

    return replace(new, hcas=tuple(
        replace(h, ports=tuple(replace(p, traffic=continued((h.name, p.number), p.traffic))
                               for p in h.ports))
        for h in new.hcas))
