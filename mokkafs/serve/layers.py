"""The run-time layers over the profile's State: what changed on the node since its profile
was loaded, kept apart from the profile so that a new profile takes them over.

Innermost first: the MIG layouts set at run time (``mokkafs.serve.mig``), the faults applied
and cleared over the control socket (``mokkafs.faults.book``), and the sysfs writes taken
(``mokkafs.writes.book``). ``over`` is the one place they are put together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mokkafs.faults.book import FaultBook
from mokkafs.serve.mig_layer import MigLayer
from mokkafs.state import State
from mokkafs.writes.book import WriteBook


@dataclass
class Layers:
    book: FaultBook = field(default_factory=FaultBook)
    mig: MigLayer = field(default_factory=MigLayer)
    writes: WriteBook = field(default_factory=WriteBook)

    def copy(self) -> Layers:
        """A copy a change edits; the swapper keeps it only if its view is installed."""
        return Layers(self.book.copy(), self.mig.copy(), self.writes.copy())

    @property
    def empty(self) -> bool:
        """Whether nothing changed at run time is kept (no fault applied or cleared, no MIG
        layout, no write, no dynamic ID)."""
        return not (self.book.control or self.book.held or self.mig.layouts
                    or self.writes.writes or self.writes.dynids)

    def over(self, profile: State) -> State:
        """``profile`` with every layer applied."""
        return self.writes.merge(self.book.merge(self.mig.over(profile)))
