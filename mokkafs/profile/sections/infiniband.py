"""The ``infiniband:`` section of a profile: the HCAs and the traffic their counters follow."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, field_validator

from mokkafs.model.identity import LAST_UNICAST_LID
from mokkafs.profile.values import (
    MAX_HCAS,
    MAX_UPTIME,
    Bdf,
    ClosedSection,
    HexInt,
    LinkLayer,
    OpenSection,
    PhysStateName,
    PortStateName,
    Rate,
    Text,
    Word32,
)


class Traffic(ClosedSection):
    """mokkafs: the per-port traffic model counters follow (rates per second)."""

    xmit_bytes_per_sec: Rate = 12_500_000.0
    rcv_bytes_per_sec: Rate = 12_500_000.0
    mean_packet_bytes: float = Field(default=2048.0, ge=1, le=65536, allow_inf_nan=False)
    multicast_fraction: float = Field(default=0.001, ge=0, le=1, allow_inf_nan=False)
    xmit_wait_per_sec: Rate = 0.0
    # Error counters, e.g. {symbol_error: 0.01}; every counter not named stays 0.
    errors_per_sec: dict[str, Rate] = Field(default_factory=dict)
    # How long the ports have carried this traffic when the daemon starts: counters begin
    # where that much of it leaves them (a node up a day shows a day of counts), not at 0.
    uptime_seconds: float = Field(default=0.0, ge=0, le=MAX_UPTIME, allow_inf_nan=False)


def _guid(value: Any) -> int:
    """A GUID as sysfs writes it (``a088:c203:00ab:0100``), or 16 hex digits."""
    digits = value.replace(":", "").lower() if isinstance(value, str) else ""
    if not re.fullmatch(r"[0-9a-f]{16}", digits):
        raise ValueError(f"expected a GUID such as \"a088:c203:00ab:0100\", got {value!r}")
    return int(digits, 16)


class PortIdentity(ClosedSection):
    """mokkafs: one port's GUID and LID as a capture found them (LID 0: not assigned)."""

    guid: Annotated[int, PlainValidator(_guid)]
    lid: Annotated[HexInt, Field(ge=0, le=LAST_UNICAST_LID)]


class Hca(ClosedSection):
    """mokkafs: one HCA where the board has it (its function, and its RDMA device name)."""

    bus_id: Bdf
    name: Annotated[str, Field(pattern=r"^mlx5_\d{1,3}$")] | None = None
    # nvlink-management: an HGX B200's NVLink management port, whose PCI VPD says SW_MNG
    role: Literal["compute", "nvlink-management"] = "compute"
    # Its ports' GUIDs and LIDs as they are (a capture's), one per port; the HCA's node GUID
    # is its first port's. Else made from guid_prefix and the node's name or index.
    ports: list[PortIdentity] | None = Field(default=None, min_length=1, max_length=2)


class InfiniBand(OpenSection):
    enabled: bool = False
    hca_type: str = "MT4129"
    fw_version: Text = "28.39.2048"
    hw_rev: Text = "0x0"
    board_id: Text = "MT_0000000838"
    node_desc_template: Text = "{node_name} mlx5_{idx}"
    link_layer: LinkLayer = (
        "InfiniBand"
    )
    rate_gbps: int = Field(default=400, gt=0, le=12 * 200)  # 12X HDR is the widest
    port_state: PortStateName = "ACTIVE"
    phys_state: PhysStateName = "LinkUp"
    hcas_per_gpu: int = Field(default=1, ge=0, le=8)
    hca_count: int = Field(default=0, ge=0, le=MAX_HCAS)
    guid_prefix: str = "a088c20300ab"
    # mokkafs extensions
    ports_per_hca: int = Field(default=1, ge=1, le=2)
    subsystem_id: Word32 | None = None  # (subdevice << 16) | subvendor of the HCA function
    gid_table_len: int = Field(default=8, ge=1, le=256)
    pkey_table_len: int = Field(default=8, ge=1, le=256)
    traffic: Traffic = Traffic()
    # The HCAs where the board has them (else hca_count / hcas_per_gpu place them beside the
    # GPUs), named mlx5_N in PCI order unless named here.
    devices: list[Hca] = Field(default=[], max_length=MAX_HCAS)
    # The MLNX_OFED/DOCA-OFED release the RDMA modules come from (their sysfs version); none:
    # the kernel's own modules, which carry no version.
    ofed_version: Text | None = None

    @field_validator("hca_type")
    @classmethod
    def _check_hca_type(cls, value: str) -> str:
        if not re.fullmatch(r"MT\d{4,5}", value) or int(value[2:]) > 0xFFFF:
            raise ValueError(
                f"expected a Mellanox part such as MT4129 (its number, at most 65535, is the "
                f"PCI device id), got {value!r}"
            )
        return value

    @field_validator("guid_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        digits = value.replace(":", "").lower()
        if not 6 <= len(digits) <= 16 or not re.fullmatch(r"[0-9a-f]+", digits):
            raise ValueError(
                f"expected at least 6 hex digits (an OUI such as a088c2), got {value!r}"
            )
        return digits
