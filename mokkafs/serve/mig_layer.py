"""The MIG layouts set at run time, a layer over the profile's State like the fault book
(``mokkafs.serve.layers``); ``mokkafs.serve.mig`` makes its entries.

A layer entry holds while the profile's own layout of that GPU stays the one it was made over;
a profile that changes it (or takes the GPU out of MIG mode) ends the entry, with a log line,
as a real node's reboot into a new layout would.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from mokkafs.model.mig import GpuInstance
from mokkafs.state import State

log = logging.getLogger(__name__)


@dataclass
class MigLayer:
    """Run-time layouts by GPU minor: (the profile's layout it was made over, the layout)."""

    layouts: dict[int, tuple[tuple[GpuInstance, ...], tuple[GpuInstance, ...]]] = \
        field(default_factory=dict)

    def copy(self) -> MigLayer:
        return MigLayer(dict(self.layouts))

    def over(self, profile: State) -> State:
        """``profile`` with the run-time layouts whose base it still has."""
        if not self.layouts:
            return profile
        mig = tuple(replace(g, instances=self.layouts[g.minor][1])
                    if g.minor in self.layouts and self.layouts[g.minor][0] == g.instances
                    else g for g in profile.mig)
        return replace(profile, mig=mig)

    def prune(self, profile: State) -> None:
        """Forget the entries ``profile`` no longer has the base of."""
        bases = {g.minor: g.instances for g in profile.mig}
        for minor in list(self.layouts):
            if bases.get(minor) != self.layouts[minor][0]:
                log.info("MIG layout of GPU minor %d set at run time ends: the profile "
                         "changed it", minor)
                del self.layouts[minor]
