"""The counter model: every port counter is a pure function of the port's traffic and time.

Counters are functions of time, computed when read (or, for a port read in every step, as the
step begins: ``mokkafs.fuse.refresh``); nothing runs while nobody reads.
For t seconds since the node started, with rates from the profile:

- ``port_xmit_data`` counts 4-byte words: floor(bytes_per_sec * t / 4);
- unicast and multicast packets are each floor(rate * t) of their own rate, and
  ``port_xmit_packets`` is their sum, so unicast + multicast == packets exactly and every
  counter is monotonic in t (a floor of a difference would not be);
- ``port_xmit_wait`` and the error counters named in the profile grow at their rates; all
  other error counters stay 0;
- faults (``Traffic.windows``): while the link is down nothing moves and ``link_downed``
  counts one per onset; an error burst adds its rate to its counter;
- the PortCounters error fields saturate at their width (symbol_error at 65535,
  link_downed at 255, ...), as the IBTA defines them, instead of wrapping.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from types import MappingProxyType

from mokkafs.state import IB_ERROR_COUNTERS, Traffic

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


# The PortCounters fields' widths (IBTA): an error counter stops at its maximum.
SATURATE = {"symbol_error": 0xFFFF, "link_error_recovery": 0xFF, "link_downed": 0xFF,
            "port_rcv_errors": 0xFFFF, "port_rcv_remote_physical_errors": 0xFFFF,
            "port_rcv_switch_relay_errors": 0xFFFF, "port_xmit_discards": 0xFFFF,
            "port_xmit_constraint_errors": 0xFF, "port_rcv_constraint_errors": 0xFF,
            "local_link_integrity_errors": 0xF, "excessive_buffer_overrun_errors": 0xF,
            "VL15_dropped": 0xFFFF}


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


def _overlap(start: float, end: float, lo: float, hi: float) -> float:
    return max(0.0, min(end, hi) - max(start, lo))


def counter(traffic: Traffic, name: str, t: float, *, before: bool = False) -> int:
    """The value of counters/<name> (or hw_counters/<name>) after t seconds (``before``: just
    before t, not counting a link going down at t, which a traffic starting at t will)."""
    if name in ("port_xmit_packets", "port_rcv_packets"):
        direction = name.split("_")[1]
        return (counter(traffic, f"unicast_{direction}_packets", t)
                + counter(traffic, f"multicast_{direction}_packets", t))
    origin = traffic.origin
    t = max(t, origin)
    windows = traffic.windows
    paused = sum(_overlap(a, b, origin, t) for a, b in windows.pauses)
    value = dict(traffic.base).get(name, 0) + _since_origin(traffic, name, t - origin - paused)
    if name == "link_downed":  # one per onset since the origin
        value += sum(1 for a, _ in windows.pauses if origin <= a < t or (a == t and not before))
    for burst, rate, a, b in windows.bursts:
        if burst == name:
            value += math.floor(rate * _overlap(a, b, origin, t))
    limit = SATURATE.get(name)
    return value if limit is None else min(value, limit)


@functools.lru_cache(maxsize=1024)
def counters_at(traffic: Traffic, t: float) -> MappingProxyType[str, int]:
    """Every counter of ``COUNTERS`` and every other one ``traffic`` moves, after t seconds:
    ``counter`` for each name, computed together, so a port's thirty files read at one step
    cost one computation (cached: every file of a port asks with the same traffic and t).
    The result is shared, so it is read-only (a view of a dict nothing else holds): a pure
    function of its arguments, memoized."""
    origin = traffic.origin
    t = max(t, origin)
    windows = traffic.windows
    dt = t - origin - sum(_overlap(a, b, origin, t) for a, b in windows.pauses)
    values = dict.fromkeys(COUNTERS, 0)
    values.update(traffic.base)
    for direction, rate in (("xmit", traffic.xmit_bytes_per_sec),
                            ("rcv", traffic.rcv_bytes_per_sec)):
        packets = rate / traffic.mean_packet_bytes
        multicast = packets * traffic.multicast_fraction
        values[f"port_{direction}_data"] += math.floor(rate * dt / 4)
        values[f"multicast_{direction}_packets"] += math.floor(multicast * dt)
        values[f"unicast_{direction}_packets"] += math.floor((packets - multicast) * dt)
    values["port_xmit_wait"] += math.floor(traffic.xmit_wait_per_sec * dt)
    seen: set[str] = set(_TRAFFIC_COUNTERS)  # as _since_origin: rates decide those, and
    for error, rate in traffic.errors_per_sec:  # the first rate of a name counts
        if error not in seen:
            seen.add(error)
            values[error] = values.get(error, 0) + math.floor(rate * dt)
    values["link_downed"] += sum(1 for a, _ in windows.pauses if origin <= a <= t)
    for burst, rate, a, b in windows.bursts:
        values[burst] = values.get(burst, 0) + math.floor(rate * _overlap(a, b, origin, t))
    for name, limit in SATURATE.items():
        if values.get(name, 0) > limit:
            values[name] = limit
    for direction in ("xmit", "rcv"):
        values[f"port_{direction}_packets"] = (values[f"unicast_{direction}_packets"]
                                               + values[f"multicast_{direction}_packets"])
    return MappingProxyType(values)


def moving(traffic: Traffic) -> frozenset[str]:
    """The counters whose value can change with time under ``traffic``: those a rate, a burst
    or a pause moves, and the packet sums. Every other counter stays at its ``base`` value
    (``constant``), so it can be served as a fixed file that nothing recomputes or refreshes.
    May name a counter that never changes (a rate too small to reach 1); never misses one."""
    names = set()
    for direction, rate in (("xmit", traffic.xmit_bytes_per_sec),
                            ("rcv", traffic.rcv_bytes_per_sec)):
        if rate > 0:
            names |= {f"port_{direction}_data", f"port_{direction}_packets",
                      f"unicast_{direction}_packets", f"multicast_{direction}_packets"}
    if traffic.xmit_wait_per_sec > 0:
        names.add("port_xmit_wait")
    names |= {name for name, rate in traffic.errors_per_sec if rate > 0}
    names |= {burst[0] for burst in traffic.windows.bursts}
    if traffic.windows.pauses:
        names.add("link_downed")
    for direction in ("xmit", "rcv"):  # a port's packets are its unicast + multicast ones
        if {f"unicast_{direction}_packets", f"multicast_{direction}_packets"} & names:
            names.add(f"port_{direction}_packets")
    return frozenset(names)


def constant(traffic: Traffic, name: str) -> int:
    """The value of a counter ``moving`` does not name, at any time."""
    return counter(traffic, name, traffic.origin)


# The names _since_origin computes from rates before it looks at errors_per_sec.
_TRAFFIC_COUNTERS = frozenset(
    f"{kind}_{direction}_{what}" for direction in ("xmit", "rcv")
    for kind, what in (("port", "data"), ("multicast", "packets"), ("unicast", "packets"))
) | {"port_xmit_wait"}


def carried(traffic: Traffic, t: float, names: tuple[str, ...] = COUNTERS) -> Traffic:
    """``traffic``'s counters at t as the base of a traffic that starts there (its rates and
    windows are the caller's to set): a swap or a fault never moves a counter backwards."""
    extra = {b[0] for b in traffic.windows.bursts} | {n for n, _ in traffic.base}
    values = tuple((name, counter(traffic, name, t, before=True))
                   for name in (*names, *sorted(extra - set(names)))
                   if name not in ("port_xmit_packets", "port_rcv_packets"))
    return replace(traffic, origin=t, base=tuple((n, v) for n, v in values if v))
