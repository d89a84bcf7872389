"""The value types a profile's fields are made of: hex integers of a given width, one-line text,
PCI addresses, port states, bounded rates, and the bounds no real node exceeds."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator

from mokkafs.model.bdf import Bdf as BdfValue
from mokkafs.model.bdf import RootId as RootValue


def _hex_int(value: Any) -> Any:
    """Accept 0x233010DE written as a YAML int or as a string, with or without 0x."""
    if isinstance(value, bool):
        raise ValueError("expected an integer such as 0x233010DE, got a boolean")
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            return int(text, 16) if text.startswith("0x") else int(text, 10)
        except ValueError:
            raise ValueError(f"expected an integer such as 0x233010DE, got {value!r}") from None
    return value


HexInt = Annotated[int, BeforeValidator(_hex_int)]
Word32 = Annotated[HexInt, Field(ge=0, le=0xFFFF_FFFF)]
Word16 = Annotated[HexInt, Field(ge=0, le=0xFFFF)]
Byte = Annotated[HexInt, Field(ge=0, le=0xFF)]

def _one_line(value: Any) -> Any:
    if isinstance(value, str) and any(c in value for c in "\n\r\0"):
        raise ValueError("expected one line of text (it is served as one sysfs line)")
    return value


# Text that ends up in a served file: one line, of a length real attributes have.
Text = Annotated[str, BeforeValidator(_one_line), Field(max_length=256)]
# Rates of the counter model: finite, and no faster than any link a node has (1e12 B/s is
# ten times an 800 Gb/s port), so every counter stays an exact integer.
Rate = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]

# What no real node exceeds: the kernel's NR_CPUS ceiling and NUMA node count, the GPUs and
# NVSwitches a board carries, the HCAs one node's GUID slots can name.
MAX_CPUS = 8192
MAX_NUMA_NODES = 64
MAX_GPUS = 64
MAX_HCAS = 256
MAX_UPTIME = 366 * 86400  # seconds of traffic before the daemon started: a year


def _bdf(value: Any) -> BdfValue:
    """``0000:1A:00.0`` or NVML's 8-digit domain ``00000000:1A:00.0``, written as a string."""
    if isinstance(value, BdfValue):
        return value
    if not isinstance(value, str):
        raise ValueError(
            f"expected a PCI address such as \"0000:1a:00.0\" (quote it in YAML), got {value!r}"
        )
    return BdfValue.parse(value)


def _root(value: Any) -> RootValue:
    if isinstance(value, RootValue):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a root complex id such as pci0000:80, got {value!r}")
    return RootValue.parse(value)


Bdf = Annotated[BdfValue, PlainValidator(_bdf)]
RootId = Annotated[RootValue, PlainValidator(_root)]


class OpenSection(BaseModel):
    """A section that tolerates keys mokkafs does not read (they belong to other consumers)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ClosedSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PortState = Literal["DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"]
PhysState = Literal["Polling", "Disabled", "Training", "LinkUp", "LinkErrorRecovery", "Phy Test"]


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


def _phys(value: Any) -> Any:
    if isinstance(value, str):
        for name in ("Polling", "Disabled", "Training", "LinkUp", "LinkErrorRecovery", "Phy Test"):
            if value.strip().lower() == name.lower():
                return name
    return value


def _link_layer(value: Any) -> Any:
    if isinstance(value, str):
        for name in ("InfiniBand", "Ethernet"):
            if value.strip().lower() == name.lower():
                return name
    return value


# As the profile may write them (any case); as the kernel names them.
LinkLayer = Annotated[Literal["InfiniBand", "Ethernet"], BeforeValidator(_link_layer)]
PortStateName = Annotated[PortState, BeforeValidator(_upper)]
PhysStateName = Annotated[PhysState, BeforeValidator(_phys)]
