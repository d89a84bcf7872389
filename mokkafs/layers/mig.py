"""The MIG modes and layouts set at run time (``MigBook``), and their layer (``MIG``): the
control socket's ``{"op": "mig", ...}`` requests make its entries (``mokkafs.layers.mig_change``
the layouts, ``mokkafs.layers.mig_mode`` the modes).

A mode entry holds while the profile boots that GPU in the other mode; a layout entry while the
profile's own layout of that GPU (after the modes) stays the one it was made over. A profile
that changes either ends the entry, with a log line, as a real node's reboot into a new layout
would. A reboot ends the layouts, not the modes: a real GPU keeps its MIG mode across reboots.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mokkafs.layers.layer import Edit, Layer, Op, Served, Written
from mokkafs.layers.mig_mode import Layouts, capable, mode_of, recheck_modes, set_mode
from mokkafs.model.mig import ComputeInstance, GpuInstance, MigGpu
from mokkafs.model.mig_tables import ci_placements
from mokkafs.state import State

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

    from mokkafs.layers.kept import KeptCompute, KeptInstance

log = logging.getLogger(__name__)

@dataclass
class MigBook:
    """Run-time layouts by GPU minor: (the profile's layout it was made over, the layout);
    and MIG modes by GPU minor, each the other of the profile's (``mokkafs.layers.mig_mode``).
    A GPU turned on has no instances, one turned off none either: it leaves ``State.mig``."""

    layouts: Layouts = field(default_factory=dict)
    modes: dict[int, bool] = field(default_factory=dict)

    def copy(self) -> MigBook:
        return MigBook(dict(self.layouts), dict(self.modes))

    def moded(self, profile: State) -> State:
        """``profile`` with the run-time MIG modes (the base of the run-time layouts)."""
        if not self.modes:
            return profile
        mig = [g for g in profile.mig if self.modes.get(g.minor, True)]
        have = {g.minor for g in mig}
        mig += [MigGpu(fn.bdf, fn.gpu.minor) for fn in profile.gpus()
                if fn.gpu is not None and self.modes.get(fn.gpu.minor)
                and fn.gpu.minor not in have]
        return replace(profile, mig=tuple(sorted(mig, key=lambda g: g.minor)))

    def over(self, profile: State) -> State:
        """``profile`` with the run-time modes, then the layouts whose base it still has."""
        profile = self.moded(profile)
        if not self.layouts:
            return profile
        mig = tuple(replace(g, instances=self.layouts[g.minor][1])
                    if g.minor in self.layouts and self.layouts[g.minor][0] == g.instances
                    else g for g in profile.mig)
        return replace(profile, mig=mig)

    def prune(self, profile: State) -> None:
        """Forget the entries ``profile`` no longer has the base of: a mode it boots the GPU
        in, or a layout its own (after the modes) no longer is."""
        if self.modes:
            booted = {g.minor for g in profile.mig}
            minors = {fn.gpu.minor for fn in profile.gpus() if fn.gpu and capable(fn)}
            for minor in list(self.modes):
                if minor not in minors or (minor in booted) == self.modes[minor]:
                    log.info("MIG mode of GPU minor %d set at run time ends: the profile "
                             "changed it", minor)
                    del self.modes[minor]
        bases = {g.minor: g.instances for g in self.moded(profile).mig}
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
            "compute": [{"id": c.id, "profile": c.profile, "slices": c.slices,
                         "start": c.start} for c in gi.compute]}


def _instances(kept: list[KeptInstance]) -> tuple[GpuInstance, ...]:
    return tuple(GpuInstance(k.id, k.profile, k.profile_id, k.start, k.size, k.slices,
                             _compute(k.compute, k.slices)) for k in kept)


def _compute(kept: list[KeptCompute], gi_slices: int) -> tuple[ComputeInstance, ...]:
    """Kept compute instances, at the starts the file gives. A file from before compute
    placements has none: they are placed as the daemon places new ones (where none fits, one
    after another, which the restore's check then refuses)."""
    given = [c.start for c in kept]
    placed = ci_placements([(c.slices, c.start) for c in kept], gi_slices) \
        if None in given else None
    starts = placed or [sum(c.slices for c in kept[:i]) if start is None else start
                        for i, (c, start) in enumerate(zip(kept, given, strict=True))]
    return tuple(ComputeInstance(c.id, c.profile, c.slices, start)
                 for c, start in zip(kept, starts, strict=True))


class MigLayer(Layer[MigBook]):
    name = "mig"
    book_type = MigBook
    listed = False  # ``mokkafs mig list`` shows them
    ops = MappingProxyType({"mig": Op("mig", compiles=True)})
    reboot_ends = MappingProxyType({"mig": "MIG layouts"})

    def holds(self, book: MigBook) -> bool:
        return bool(book.layouts or book.modes)

    def over(self, book: MigBook, state: State) -> State:
        book.prune(state)
        return book.over(state)

    def listing(self, book: MigBook, served: Served) -> list[dict[str, Any]]:
        return listing(served.profile, served.state)

    def asked(self, op: str, request: Mapping[str, Any], answer: dict[str, Any],
              ) -> Edit[MigBook] | None:
        from mokkafs.layers.mig_change import action_of, change, gpu_of

        action = action_of(request)
        if action == "list":
            return None
        index = int(request.get("gpu", -1))
        if action == "mode":
            on = mode_of(request)
            return lambda book, profile: set_mode(book.modes, book.layouts,
                                                  book.over(profile), profile, index, on)

        def edit(book: MigBook, profile: State) -> None:
            gpu, device = gpu_of(profile, book.over(profile), index)
            base = next(g.instances for g in book.moded(profile).mig if g.minor == gpu.minor)
            book.layouts[gpu.minor] = (base, change(gpu, device, request))

        return edit

    def schema(self) -> type[BaseModel]:
        from mokkafs.layers.kept import MigKept

        return MigKept

    def record(self, book: MigBook, state: State) -> dict[str, Any]:
        return {"mig": [{"minor": minor, "base": [_instance(g) for g in base],
                         "layout": [_instance(g) for g in layout]}
                        for minor, (base, layout) in sorted(book.layouts.items())],
                **({"mig_modes": [{"minor": minor, "mode": int(on)}
                                  for minor, on in sorted(book.modes.items())]}
                   if book.modes else {})}  # (a file without modes: as before them)

    def restore(self, kept: Any, written: Written) -> tuple[MigBook, dict[str, float]]:
        return MigBook({k.minor: (_instances(k.base), _instances(k.layout)) for k in kept.mig},
                       {k.minor: bool(k.mode) for k in kept.mig_modes}), {}

    def recheck(self, book: MigBook, profile: State) -> None:
        """Each mode is one ``mokkafs mig -mig`` could have set (on a MIG-capable GPU, with no
        layout kept while off), each layout one ``mokkafs mig`` could have made over the
        profile's (those whose base the profile changed end)."""
        if not (book.layouts or book.modes):
            return
        from mokkafs.layers.mig_change import recheck_kept

        recheck_modes(book.modes, book.layouts, profile)

        at = {minor: pos for pos, minor in enumerate(book.layouts)}  # (in the file's order)
        book.prune(profile)
        recheck_kept(profile, {minor: layout for minor, (_, layout) in book.layouts.items()},
                     at)


MIG = MigLayer()
