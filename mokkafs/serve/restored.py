"""What a state file gives back (``Restored``), and why one cannot be used
(``StateFileError``): shared by the file (``mokkafs.serve.durable``) and its document
(``mokkafs.serve.record``), which the daemon imports only when it has a file to read or write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mokkafs.faults.book import FaultBook
from mokkafs.serve.layers import Layers


class StateFileError(Exception):
    """Why a state file cannot be used (never quoting what is in it)."""


@dataclass
class Restored:
    layers: Layers
    origins: dict[str, float] = field(default_factory=dict)  # name -> daemon clock
    rebooted: bool = False
    ended: list[str] = field(default_factory=list)  # what the reboot ended, a line each

    @property
    def book(self) -> FaultBook:
        return self.layers.book
