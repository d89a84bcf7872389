"""mokkafs: the ``pci_functions`` a profile keeps as they were captured (``mokkafs capture``):
functions no other section describes (a virtio device, a host bridge, a NIC, a bridge of a
layout mokkafs does not make), each with its attributes' text and its config space verbatim,
so ``lspci`` of the view shows exactly what it showed on the captured node. An entry with
``overrides: true`` names a function the other sections make (a GPU, an HCA, a bridge above
them): its attributes and config space replace the made ones, and the function stays what the
sections make it (``mokkafs.profile.raw_override``)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator

from mokkafs.profile.values import Bdf, ClosedSection, RootId

MAX_RAW_FUNCTIONS = 1024
MAX_ATTRIBUTES = 96
PAGE = 4096
# Attributes the view makes itself for a kept function, never from the profile
MADE = frozenset({"config", "vpd", "driver", "subsystem", "iommu_group", "remove", "rescan",
                  "reset"})
Hex = Annotated[str, Field(max_length=2 * PAGE, pattern=r"^[0-9a-f]*$")]


class RawFunction(ClosedSection):
    """One kept function. ``attributes``: name -> content of each text attribute of its
    sysfs directory (trailing newline included); ``config``/``vpd``: hex of the bytes."""

    bdf: Bdf
    root: RootId
    parent: Bdf | None = None  # the bridge it sits below; none: on the root bus
    driver: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] | None = None
    iommu_group: int | None = Field(default=None, ge=0, le=1 << 20)
    attributes: dict[str, Annotated[str, Field(max_length=PAGE)]] = Field(
        default={}, max_length=MAX_ATTRIBUTES)
    config: Hex = ""  # its bytes up to the last non-zero one; zeros follow to config_size
    config_size: int = Field(default=0, ge=0, le=PAGE)
    vpd: Hex = ""
    # Replaces the attributes and config space of the function the sections make at ``bdf``
    overrides: bool = False

    def config_bytes(self) -> bytes:
        data = bytes.fromhex(self.config)
        return data + bytes(max(self.config_size - len(data), 0))

    @field_validator("attributes")
    @classmethod
    def _check_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.fullmatch(r"[a-z0-9_]{1,64}", name) or name in MADE:
                made = ", ".join(sorted(MADE))
                raise ValueError(f"{name!r} is not an attribute a kept function may give "
                                 f"(lower-case letters, digits and _; not {made})")
        return value

    @field_validator("config", "vpd")
    @classmethod
    def _check_even(cls, value: str) -> str:
        if len(value) % 2:
            raise ValueError("expected hex digits in pairs, one pair a byte")
        return value
