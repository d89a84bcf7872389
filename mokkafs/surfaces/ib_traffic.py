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
    """Seconds since the node started, rounded down to the staleness quantum (0 = exact)."""
    t = max(now - started_at, 0.0)
    return math.floor(t / quantum) * quantum if quantum > 0 else t


def counter(traffic: Traffic, name: str, t: float) -> int:
    """The value of counters/<name> after t seconds."""
    for direction, rate in (("xmit", traffic.xmit_bytes_per_sec),
                            ("rcv", traffic.rcv_bytes_per_sec)):
        if direction not in name:
            continue
        packets = rate / traffic.mean_packet_bytes
        multicast = packets * traffic.multicast_fraction
        if name == f"port_{direction}_data":
            return math.floor(rate * t / 4)
        if name == f"multicast_{direction}_packets":
            return math.floor(multicast * t)
        if name == f"unicast_{direction}_packets":
            return math.floor((packets - multicast) * t)
        if name == f"port_{direction}_packets":
            return math.floor(multicast * t) + math.floor((packets - multicast) * t)
    if name == "port_xmit_wait":
        return math.floor(traffic.xmit_wait_per_sec * t)
    for error, rate in traffic.errors_per_sec:
        if error == name:
            return math.floor(rate * t)
    return 0
