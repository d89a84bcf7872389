"""PCI addresses as values, not strings: a function's ``Bdf`` and a host bridge's ``RootId``.

Profiles write them as text (``0000:1a:00.0``, ``pci0000:15``); the schema parses them into
these, so the compiler compares buses as numbers and never slices a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A function's address as sysfs names it (lower case, 4-digit domain); ``fullmatch`` it.
BDF_TEXT = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
BUS_TEXT = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}")  # a bus, as pci_bus/ names it
_BDF = re.compile(r"^(?:0{4})?([0-9a-f]{4}):([0-9a-f]{2}):([01][0-9a-f])\.([0-7])$")
_ROOT = re.compile(r"^pci([0-9a-f]{4}):([0-9a-f]{2})$")


@dataclass(frozen=True, order=True, slots=True)
class Bdf:
    """A PCI function's address: domain, bus, device (0-31), function (0-7)."""

    domain: int
    bus: int
    device: int
    function: int = 0

    @classmethod
    def parse(cls, text: str) -> Bdf:
        """``0000:1A:00.0`` (or NVML's 8-digit domain ``00000000:1A:00.0``). Raises
        ValueError naming the expected form."""
        m = _BDF.match(text.strip().lower())
        if not m:
            raise ValueError(f"expected a PCI address DDDD:BB:DD.F such as 0000:1a:00.0 "
                             f"(device 00-1f, function 0-7), got {text!r}")
        return cls(*(int(g, 16) for g in m.groups()))

    def on(self, bus: int, device: int = 0, function: int = 0) -> Bdf:
        """A function on another bus of the same domain."""
        return Bdf(self.domain, bus, device, function)

    def __str__(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function}"


@dataclass(frozen=True, order=True, slots=True)
class RootId:
    """A PCI host bridge ``pciDDDD:BB``: its domain and root bus."""

    domain: int
    bus: int

    @classmethod
    def parse(cls, text: str) -> RootId:
        m = _ROOT.match(text.strip().lower())
        if not m:
            raise ValueError(f"expected a root complex id such as pci0000:80, got {text!r}")
        return cls(int(m.group(1), 16), int(m.group(2), 16))

    def bdf_on(self, device: int, function: int = 0) -> Bdf:
        """A function on the root bus itself."""
        return Bdf(self.domain, self.bus, device, function)

    def holds(self, bdf: Bdf) -> bool:
        """Whether ``bdf`` can sit below this host bridge: its domain, from its bus up."""
        return bdf.domain == self.domain and bdf.bus >= self.bus

    def __str__(self) -> str:
        return f"pci{self.domain:04x}:{self.bus:02x}"
