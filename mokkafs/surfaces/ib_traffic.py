"""The counter model: every port counter is a pure function of the port's traffic and time.

Counters are computed when read, never by a background task; nothing moves while nobody reads.
For t seconds since the node started, with rates from the profile:

- ``port_xmit_data`` counts 4-byte words: floor(bytes_per_sec * t / 4);
- unicast and multicast packets are each floor(rate * t) of their own rate, and
  ``port_xmit_packets`` is their sum, so unicast + multicast == packets exactly and every
  counter is monotonic in t (a floor of a difference would not be);
- ``port_xmit_wait`` and the error counters named in the profile grow at their rates; all
  other error counters stay 0.
"""

from __future__ import annotations

import math
from dataclasses import replace

from mokkafs.state import IB_ERROR_COUNTERS, State, Traffic

# counters/ as the kernel's ib_core exposes it (drivers/infiniband/core/sysfs.c)
COUNTERS = tuple(sorted((
    *IB_ERROR_COUNTERS,
    "multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_data", "port_rcv_packets",
    "port_xmit_data", "port_xmit_packets", "port_xmit_wait", "unicast_rcv_packets",
    "unicast_xmit_packets",
)))

# counters_ext/ name -> the counters/ value it mirrors
COUNTERS_EXT = {
    "port_multicast_rcv_packets": "multicast_rcv_packets",
    "port_multicast_xmit_packets": "multicast_xmit_packets",
    "port_rcv_data_64": "port_rcv_data",
    "port_rcv_packets_64": "port_rcv_packets",
    "port_unicast_rcv_packets": "unicast_rcv_packets",
    "port_unicast_xmit_packets": "unicast_xmit_packets",
    "port_xmit_data_64": "port_xmit_data",
    "port_xmit_packets_64": "port_xmit_packets",
}


def elapsed(now: float, started_at: float, quantum: float) -> float:
    """Seconds since the node started as of the last multiple of the staleness quantum on the
    clock (0 = exact). Steps fall on the clock's multiples, not on multiples since the start,
    so a cache can tell when the next one comes (``File.fresh_for``)."""
    if quantum > 0:
        now = math.floor(now / quantum) * quantum
    return max(now - started_at, 0.0)


def _since_origin(traffic: Traffic, name: str, dt: float) -> int:
    for direction, rate in (("xmit", traffic.xmit_bytes_per_sec),
                            ("rcv", traffic.rcv_bytes_per_sec)):
        if direction not in name:
            continue
        packets = rate / traffic.mean_packet_bytes
        multicast = packets * traffic.multicast_fraction
        if name == f"port_{direction}_data":
            return math.floor(rate * dt / 4)
        if name == f"multicast_{direction}_packets":
            return math.floor(multicast * dt)
        if name == f"unicast_{direction}_packets":
            return math.floor((packets - multicast) * dt)
    if name == "port_xmit_wait":
        return math.floor(traffic.xmit_wait_per_sec * dt)
    for error, rate in traffic.errors_per_sec:
        if error == name:
            return math.floor(rate * dt)
    return 0


def counter(traffic: Traffic, name: str, t: float) -> int:
    """The value of counters/<name> after t seconds."""
    if name in ("port_xmit_packets", "port_rcv_packets"):
        direction = name.split("_")[1]
        return (counter(traffic, f"unicast_{direction}_packets", t)
                + counter(traffic, f"multicast_{direction}_packets", t))
    base = dict(traffic.base).get(name, 0)
    return base + _since_origin(traffic, name, max(t - traffic.origin, 0.0))


def continue_from(old: Traffic, new: Traffic, t: float) -> Traffic:
    """``new``'s rates from t on, starting where ``old``'s counters are at t: counters stay
    monotonic when a profile changes the rates of a live port."""
    if old.same_rates(new):
        return old
    carried = tuple((name, counter(old, name, t)) for name in COUNTERS
                    if name not in ("port_xmit_packets", "port_rcv_packets"))
    return replace(new, origin=t, base=carried)


def carry_counters(old: State, new: State, now: float) -> State:
    """``new`` with every port that ``old`` also has continuing from its counters' values at
    ``now`` (a time.monotonic() value), so a swap never moves a counter backwards."""
    t = max(now - old.started_at, 0.0)
    old_ports = {(h.name, p.number): p.traffic for h in old.hcas for p in h.ports}
    hcas = tuple(
        replace(h, ports=tuple(
            replace(p, traffic=continue_from(old_ports[(h.name, p.number)], p.traffic, t))
            if (h.name, p.number) in old_ports else p
            for p in h.ports))
        for h in new.hcas)
    return replace(new, hcas=hcas)
