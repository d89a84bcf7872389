"""MIG in a profile: the ``mig:`` section of ``device_defaults`` and ``devices[]`` (nvml-mock's,
read unchanged), the MIG profile table of each GPU model, and the compile of a GPU's layout into
its GPU and compute instances (``mokkafs.model.mig``). docs/mig-imex.md describes the format.

nvml-mock's keys (NVIDIA/k8s-test-infra ``pkg/gpu/mocknvml/engine/config_types.go``,
``MIGConfig``): ``mode_current`` ("enabled" boots the GPU in MIG mode; anything else leaves it
whole), ``mode_pending``, ``max_gpu_instances``, ``supported_profiles`` (its own table; mokkafs
keeps its own below), ``gpu_instances`` (declared: a profile and a count each, optionally their
compute instances) and ``instances`` (explicit: each GPU instance with its ID, placement and
compute instances). When ``instances`` is present it is the layout, as in nvml-mock's
``applyMIGLayout``.

Placement: an instance without ``placement_start`` takes the highest free start its profile
allows, as the driver does on a fresh GPU (one ``1g`` gets GI 13, placement 6; two ``3g`` get
GI 2 at 4 then GI 1 at 0: the MIG user guide's ``nvidia-smi mig -cgi 9,3g.20gb -C``). IDs: a
GPU instance without one gets the ID the driver gives its placement, the memory slice tree's
numbering (whole GPU 0; halves 1-2; quarters 3-6; eighths 7-14: open-gpu-kernel-modules'
swizzle IDs); a compute instance gets the lowest free ID of its GPU instance, and without
``placement_start`` the highest free start in its GI that lets the others fit
(``mig_tables.ci_placements``). nvml-mock numbers
declared instances by a counter instead, so a profile whose NVML side must agree writes
``instances:`` with IDs, which both honour.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from pydantic import Field

from mokkafs.model.mig import ComputeInstance, GpuInstance, MigGpu
from mokkafs.model.mig_tables import (
    CI_NVML,
    CI_SLICES,
    MAX_CIS,
    MAX_GIS,
    MAX_GPUS,
    NVML_ENUM,
    SHAPES,
    SLICES,
    TABLES,
    UNITS,
    Shape,
    ci_placements,
    ci_starts,
)
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.values import ClosedSection, OpenSection, Text
from mokkafs.state import PciFunction


class CiDeclared(ClosedSection):
    profile: Text | None = None  # "1c", "1c.3g.40gb", or the GI's own name: spanning
    profile_id: int | None = Field(default=None, ge=0, le=7)  # COMPUTE_INSTANCE_PROFILE_*
    count: int = Field(default=1, ge=1, le=MAX_CIS)


class GiDeclared(ClosedSection):
    profile: Text | None = None  # "3g.40gb"
    profile_id: int | None = Field(default=None, ge=0, le=9)  # GPU_INSTANCE_PROFILE_*
    count: int = Field(default=1, ge=1, le=7)
    compute_instances: list[CiDeclared] = Field(default=[], max_length=MAX_CIS)


class CiRecord(ClosedSection):
    id: int = Field(ge=0, lt=MAX_CIS)
    profile: Text | None = None
    profile_id: int | None = Field(default=None, ge=0, le=7)
    placement_start: int | None = Field(default=None, ge=0, lt=SLICES)  # in compute slices


class GiRecord(ClosedSection):
    id: int = Field(ge=0, lt=MAX_GIS)
    profile: Text | None = None
    profile_id: int | None = Field(default=None, ge=0, le=9)
    placement_start: int | None = Field(default=None, ge=0, lt=UNITS)
    # absent: one compute instance spanning the GI; []: none (`mig -cgi` without -C)
    compute_instances: list[CiRecord] | None = Field(default=None, max_length=MAX_CIS)


class Mig(OpenSection):
    """nvml-mock's ``mig:`` block (docs/mig-imex.md)."""

    mode_current: Annotated[str, Field(max_length=32)] = "disabled"
    mode_pending: Annotated[str, Field(max_length=32)] = "disabled"
    max_gpu_instances: int = Field(default=0, ge=0, le=7)
    gpu_instances: list[GiDeclared] = Field(default=[], max_length=7)
    instances: list[GiRecord] | None = Field(default=None, max_length=7)


def merged(default: Mig | None, own: Mig | None) -> Mig | None:
    """A GPU's ``mig:``: its own entry's keys over ``device_defaults``'s."""
    if own is None or default is None:
        return own or default
    return default.model_copy(update={k: getattr(own, k) for k in own.model_fields_set})


def enabled(mig: Mig | None) -> bool:
    return mig is not None and mig.mode_current.strip().lower() == "enabled"


def gi_id(size: int, start: int) -> int:
    """The ID the driver gives a GPU instance at this placement (its swizzle ID)."""
    return {8: 0, 4: 1, 2: 3, 1: 7}[size] + start // size


Ci = tuple[int | None, int, int | None]  # a compute instance asked for: ID, slices, start


class Layout:
    """One GPU's instances as they are created, in order, with the problems found."""

    def __init__(self, names: dict[str, str], model: str, where: YamlPath,
                 problems: Problems) -> None:
        self.names, self.model, self.where, self.problems = names, model, where, problems
        self.by_name = {name: key for key, name in names.items()}
        self.made: list[GpuInstance] = []

    def shape(self, profile: str | None, profile_id: int | None, where: YamlPath) -> str | None:
        if (profile is None) == (profile_id is None):
            self.problems.add(where, "name exactly one of profile (e.g. "
                              f"{self.names['3g']!r}) and profile_id")
            return None
        key = self.by_name.get(profile or "") if profile is not None \
            else NVML_ENUM.get(profile_id or 0)
        if key is None:
            self.problems.add(where, f"{self.model} has no MIG profile "
                              f"{profile if profile is not None else profile_id!r}; it has "
                              f"{', '.join(self.names.values())}")
        return key

    def _free(self, shape: Shape, start: int) -> bool:
        taken = {u for gi in self.made for u in range(gi.start, gi.start + gi.size)}
        return not taken & set(range(start, start + shape.size))

    def gpu_instance(self, key: str, start: int | None, ident: int | None,
                     where: YamlPath) -> GpuInstance | None:
        shape = SHAPES[key]
        name = self.names[key]
        if sum(1 for gi in self.made if gi.profile == name) >= shape.most:
            self.problems.add(where, f"a GPU holds at most {shape.most} {name}")
            return None
        if sum(gi.slices for gi in self.made) + shape.slices > SLICES:
            self.problems.add(where, f"{name} needs {shape.slices} compute slices; the GPU "
                              f"has {SLICES - sum(gi.slices for gi in self.made)} left")
            return None
        if start is None:  # the highest free start, as the driver picks (module docstring)
            start = next((s for s in reversed(shape.starts) if self._free(shape, s)), None)
            if start is None:
                self.problems.add(where, f"no placement of {name} is free (it may start at "
                                  f"{', '.join(map(str, shape.starts))}); remove an instance")
                return None
        elif start not in shape.starts or not self._free(shape, start):
            self.problems.add((*where, "placement_start"), f"{name} cannot start at {start}: "
                              f"it starts at {', '.join(map(str, shape.starts))}, on memory "
                              "no other instance holds")
            return None
        ident = gi_id(shape.size, start) if ident is None else ident
        if any(gi.id == ident for gi in self.made):
            self.problems.add(where, f"GPU instance ID {ident} is already taken")
            return None
        gi = GpuInstance(ident, name, shape.profile_id, start, shape.size, shape.slices)
        self.made.append(gi)
        return gi

    def ci_slices(self, gi: GpuInstance, profile: str | None, profile_id: int | None,
                  where: YamlPath) -> int | None:
        if profile is None and profile_id is None:
            return gi.slices
        if profile is not None and profile_id is not None:
            self.problems.add(where, "name profile or profile_id, not both")
            return None
        if profile_id is not None:
            slices = CI_NVML.get(profile_id)
        elif profile == gi.profile:
            slices = gi.slices
        else:
            head, _, rest = (profile or "").partition(".")
            slices = int(head[:-1]) if head.endswith("c") and head[:-1].isdigit() \
                and rest in ("", gi.profile) else None
        if slices not in CI_SLICES or slices > gi.slices:
            self.problems.add(where, f"{gi.profile} has no compute instance profile "
                              f"{profile if profile is not None else profile_id!r}: it has "
                              + ", ".join(f"{c}c.{gi.profile}" for c in CI_SLICES
                                          if c <= gi.slices))
            return None
        return slices

    def with_compute(self, gi: GpuInstance, cis: list[Ci], where: YamlPath) -> None:
        """Give ``gi`` the compute instances ``cis`` (ID, slices, placement start; None: the
        lowest free ID, a free placement)."""
        at = (*where, "compute_instances")
        if sum(s for _, s, _ in cis) > gi.slices:
            self.problems.add(at, f"the compute instances need {sum(s for _, s, _ in cis)} "
                              f"slices; {gi.profile} has {gi.slices}")
            return
        for _, slices, start in cis:
            if start is not None and start not in ci_starts(slices, gi.slices):
                self.problems.add(at, f"a {slices}c compute instance of {gi.profile} cannot "
                                  f"start at {start}: it starts at "
                                  f"{', '.join(map(str, ci_starts(slices, gi.slices)))}")
                return
        starts = ci_placements([(s, start) for _, s, start in cis], gi.slices)
        if starts is None:
            self.problems.add(at, "no placement of the compute instances fits in "
                              f"{gi.profile}: each starts at a multiple of its size (3c: of 4), "
                              "on slices no other holds")
            return
        made: list[ComputeInstance] = []
        for (ident, slices, _), start in zip(cis, starts, strict=True):
            if ident is None:
                ident = next(i for i in range(MAX_CIS) if all(c.id != i for c in made))
            if any(c.id == ident for c in made):
                self.problems.add(at, f"compute instance ID {ident} is given twice")
                return
            name = gi.profile if slices == gi.slices else f"{slices}c.{gi.profile}"
            made.append(ComputeInstance(ident, name, slices, start))
        self.made[self.made.index(gi)] = GpuInstance(
            gi.id, gi.profile, gi.profile_id, gi.start, gi.size, gi.slices,
            tuple(sorted(made, key=lambda c: c.id)))


def layout(mig: Mig, device_id: int, bdf: str, minor: int, where: YamlPath,
           problems: Problems) -> MigGpu | None:
    """The GPU's MIG layout, or None with ``problems`` saying why it has none it can boot."""
    entry = TABLES.get(device_id)
    if entry is None:
        models = ", ".join(sorted({m for m, _ in TABLES.values()}))
        problems.add((*where, "mode_current"), f"PCI device {device_id:04x} has no MIG table "
                     f"in mokkafs (it knows {models}); set mode_current: disabled")
        return None
    if minor >= MAX_GPUS:
        problems.add((*where, "mode_current"), f"device minor {minor}: the driver's MIG minor "
                     f"table covers minors 0-{MAX_GPUS - 1}")
        return None
    model, names = entry
    out = Layout(names, model, where, problems)
    if mig.instances is not None:
        for pos, rec in enumerate(mig.instances):
            at: YamlPath = (*where, "instances", pos)
            key = out.shape(rec.profile, rec.profile_id, at)
            gi = out.gpu_instance(key, rec.placement_start, rec.id, at) if key else None
            if gi is None:
                continue
            if rec.compute_instances is None:
                out.with_compute(gi, [(None, gi.slices, None)], at)
                continue
            cis: list[Ci] = []
            for cpos, ci in enumerate(rec.compute_instances):
                slices = out.ci_slices(gi, ci.profile, ci.profile_id,
                                       (*at, "compute_instances", cpos))
                if slices is not None:
                    cis.append((ci.id, slices, ci.placement_start))
            out.with_compute(gi, cis, at)
    else:
        for pos, dec in enumerate(mig.gpu_instances):
            at = (*where, "gpu_instances", pos)
            key = out.shape(dec.profile, dec.profile_id, at)
            for _ in range(dec.count if key else 0):
                gi = out.gpu_instance(key or "", None, None, at)
                if gi is None:
                    break
                cis = []
                for cpos, dci in enumerate(dec.compute_instances or [CiDeclared()]):
                    slices = out.ci_slices(gi, dci.profile, dci.profile_id,
                                           (*at, "compute_instances", cpos))
                    cis += [(None, slices, None)] * dci.count if slices is not None else []
                out.with_compute(gi, cis, at)
    if mig.max_gpu_instances and len(out.made) > mig.max_gpu_instances:
        problems.add((*where, "max_gpu_instances"), f"the layout has {len(out.made)} GPU "
                     f"instances, more than max_gpu_instances ({mig.max_gpu_instances})")
    return MigGpu(bdf, minor, tuple(sorted(out.made, key=lambda gi: gi.id)))


def layouts(default: Mig | None, own: dict[int, tuple[int, Mig | None]],
            gpus: Iterable[PciFunction], problems: Problems) -> tuple[MigGpu, ...]:
    """The MIG layout of every GPU booted in MIG mode, by device minor. ``own``: each
    ``devices[]`` entry's ``mig`` (and its place in the list) by GPU index."""
    out: list[MigGpu] = []
    for fn in gpus:
        if fn.gpu is None:
            continue
        pos, mine = own.get(fn.gpu.index, (-1, None))
        mig = merged(default, mine)
        if mig is None or not enabled(mig):
            continue
        where: YamlPath = ("devices", pos, "mig") if mine is not None else \
            ("device_defaults", "mig")
        gpu = layout(mig, fn.device, fn.bdf, fn.gpu.minor, where, problems)
        if gpu is not None:
            out.append(gpu)
    return tuple(sorted(out, key=lambda g: g.minor))
