"""InfiniBand in a State: the RDMA devices, their ports, and the traffic their counters
follow."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Windows:
    """What faults do to a port's counters, in seconds since the node started (``end`` may
    be ``math.inf``): the link is down over each of ``pauses`` (nothing moves; ``link_downed``
    counts each start), and each of ``bursts`` adds ``rate`` per second to one counter."""

    pauses: tuple[tuple[float, float], ...] = ()
    bursts: tuple[tuple[str, float, float, float], ...] = ()  # (counter, rate, start, end)


@dataclass(frozen=True, slots=True)
class Traffic:
    """Per-port rates the counters follow; see ``mokkafs.counters``.

    ``origin`` and ``base`` make counters continue across a change of rates or faults: from
    ``origin`` seconds on, a counter is its ``base`` value plus what the rates add since then,
    less what ``windows`` pause, plus what they burst. A negative ``origin`` is traffic from
    before the daemon started (the profile's ``uptime_seconds``).
    """

    xmit_bytes_per_sec: float
    rcv_bytes_per_sec: float
    mean_packet_bytes: float
    multicast_fraction: float
    xmit_wait_per_sec: float
    errors_per_sec: tuple[tuple[str, float], ...]
    origin: float = 0.0
    base: tuple[tuple[str, int], ...] = ()
    windows: Windows = Windows()

    def same_rates(self, other: Traffic) -> bool:
        return (self.xmit_bytes_per_sec, self.rcv_bytes_per_sec, self.mean_packet_bytes,
                self.multicast_fraction, self.xmit_wait_per_sec, self.errors_per_sec) == (
            other.xmit_bytes_per_sec, other.rcv_bytes_per_sec, other.mean_packet_bytes,
            other.multicast_fraction, other.xmit_wait_per_sec, other.errors_per_sec)


@dataclass(frozen=True, slots=True)
class IbPort:
    number: int
    guid: int
    lid: int
    sm_lid: int
    state: str
    phys_state: str
    rate_gbps: int
    link_layer: str
    umad_index: int
    traffic: Traffic
    width: int = 4  # lanes the link trained to


@dataclass(frozen=True, slots=True)
class Hca:
    """One RDMA device ``mlx5_N`` bound to the PCI function at ``bdf``."""

    name: str
    index: int
    bdf: str
    node_guid: int
    sys_image_guid: int
    hca_type: str
    fw_ver: str
    hw_rev: str
    board_id: str
    node_desc: str
    ports: tuple[IbPort, ...]
    gid_table_len: int
    pkey_table_len: int


# mlx5's per-port hw_counters/ (drivers/infiniband/hw/mlx5/counters.c), 0 unless a fault
# makes one grow.
IB_HW_COUNTERS = (
    "duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err", "out_of_buffer",
    "out_of_sequence", "packet_seq_err", "req_cqe_error", "req_cqe_flush_error",
    "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
    "resp_cqe_flush_error", "resp_local_length_error", "resp_remote_access_errors",
    "rnr_nak_retry_err", "rx_atomic_requests", "rx_read_requests", "rx_write_requests",
)

# The port error counters a traffic model may drive (all others of counters/ stay 0).
IB_ERROR_COUNTERS = (
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_constraint_errors",
    "port_rcv_discards",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_discards",
    "symbol_error",
)
