"""The MIG layouts set at run time (``MigBook``), and their layer (``MIG``): the control
socket's ``{"op": "mig", ...}`` requests make its entries (``mokkafs.layers.mig_change``).

A book entry holds while the profile's own layout of that GPU stays the one it was made over;
a profile that changes it (or takes the GPU out of MIG mode) ends the entry, with a log line,
as a real node's reboot into a new layout would. A reboot ends them all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mokkafs.layers.layer import Edit, Layer, Op, Served, Written
from mokkafs.model.mig import ComputeInstance, GpuInstance
from mokkafs.state import State

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

    from mokkafs.layers.kept import KeptInstance

log = logging.getLogger(__name__)

Layouts = dict[int, tuple[tuple[GpuInstance, ...], tuple[GpuInstance, ...]]]


@dataclass
class MigBook:
    """Run-time layouts by GPU minor: (the profile's layout it was made over, the layout)."""

    layouts: Layouts = field(default_factory=dict)

    def copy(self) -> MigBook:
        return MigBook(dict(self.layouts))

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


def listing(profile: State, served: State) -> list[dict[str, Any]]:
    index = {fn.bdf: fn.gpu.index for fn in profile.gpus() if fn.gpu is not None}
    return [{"gpu": index.get(g.bdf), "minor": g.minor, "instances": [
        {"id": gi.id, "profile": gi.profile, "profile_id": gi.profile_id, "start": gi.start,
         "size": gi.size, "compute": [{"id": c.id, "profile": c.profile} for c in gi.compute]}
        for gi in g.instances]} for g in served.mig]


def _instance(gi: GpuInstance) -> dict[str, object]:
    return {"id": gi.id, "profile": gi.profile, "profile_id": gi.profile_id,
            "start": gi.start, "size": gi.size, "slices": gi.slices,
            "compute": [{"id": c.id, "profile": c.profile, "slices": c.slices}
                        for c in gi.compute]}


def _instances(kept: list[KeptInstance]) -> tuple[GpuInstance, ...]:
    return tuple(GpuInstance(k.id, k.profile, k.profile_id, k.start, k.size, k.slices,
                             tuple(ComputeInstance(c.id, c.profile, c.slices)
                                   for c in k.compute)) for k in kept)


class MigLayer(Layer[MigBook]):
    name = "mig"
    book_type = MigBook
    listed = False  # ``mokkafs mig list`` shows them
    ops = MappingProxyType({"mig": Op("mig", compiles=True)})
    reboot_ends = MappingProxyType({"mig": "MIG layouts"})

    def holds(self, book: MigBook) -> bool:
        return bool(book.layouts)

    def over(self, book: MigBook, state: State) -> State:
        book.prune(state)
        return book.over(state)

    def listing(self, book: MigBook, served: Served) -> list[dict[str, Any]]:
        return listing(served.profile, served.state)

    def asked(self, op: str, request: Mapping[str, Any], answer: dict[str, Any],
              ) -> Edit[MigBook] | None:
        from mokkafs.layers.mig_change import action_of, change, gpu_of

        if action_of(request) == "list":
            return None
        index = int(request.get("gpu", -1))

        def edit(book: MigBook, profile: State) -> None:
            gpu, device = gpu_of(profile, book.over(profile), index)
            base = next(g.instances for g in profile.mig if g.minor == gpu.minor)
            book.layouts[gpu.minor] = (base, change(gpu, device, request))

        return edit

    def schema(self) -> type[BaseModel]:
        from mokkafs.layers.kept import MigKept

        return MigKept

    def record(self, book: MigBook, state: State) -> dict[str, Any]:
        return {"mig": [{"minor": minor, "base": [_instance(g) for g in base],
                         "layout": [_instance(g) for g in layout]}
                        for minor, (base, layout) in sorted(book.layouts.items())]}

    def restore(self, kept: Any, written: Written) -> tuple[MigBook, dict[str, float]]:
        return MigBook({k.minor: (_instances(k.base), _instances(k.layout))
                        for k in kept.mig}), {}

    def recheck(self, book: MigBook, profile: State) -> None:
        """Each layout is one ``mokkafs mig`` could have made over the profile's (those whose
        base the profile changed end)."""
        if not book.layouts:
            return
        from mokkafs.layers.mig_change import recheck_kept

        at = {minor: pos for pos, minor in enumerate(book.layouts)}  # (in the file's order)
        book.prune(profile)
        recheck_kept(profile, {minor: layout for minor, (_, layout) in book.layouts.items()},
                     at)


MIG = MigLayer()
