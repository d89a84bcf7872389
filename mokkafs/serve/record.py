"""What a daemon changed at run time (its ``Layers``), as the state file keeps it for the
next daemon (docs/faults.md, "Durable run-time state"): ``record`` writes the document,
``restore`` reads one back (a ``StateFileError`` names why it cannot be used). Pure: the file
itself is ``mokkafs.serve.durable``'s, what a read gives back ``mokkafs.serve.restored``'s.

A JSON object, its schema versioned: ``format`` and ``version``, then when it was written
(``boot_id``, the daemon's clock and the wall clock) and one section per kind of change:
``faults`` (those applied over the control socket, as written, with how often each was applied
and when, and the profile's faults cleared), ``mig`` (the MIG layouts set at run time, each
with the profile's layout it was made over), ``writes`` (the sysfs writes taken, in order) and
``dynids`` (the drivers' dynamic IDs, ``new_id``, in order).
A later kind of change is a new section; a section absent is empty.

A reboot ends the MIG layouts and the writes, as it ends a real node's GPU instances and VFs
(they are made again after each boot); the faults carry on, as the test they stage would.

Timing: a fault's origin is kept on the daemon's clock (CLOCK_MONOTONIC, which every process of
one boot shares). Restored in the same boot, it is that origin as it was: the time the daemons
were down counts, exactly. After a reboot (another ``boot_id``) the clock began again, so the
time since the write is the wall clock's: a fault is as far along as it was at the write plus
the wall-clock time since (never less: a wall clock that went back counts nothing).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mokkafs.faults.book import FaultBook
from mokkafs.model.bdf import BDF_TEXT
from mokkafs.model.mig import ComputeInstance, GpuInstance
from mokkafs.model.mig_tables import MAX_CIS, MAX_GIS, MAX_GPUS, SLICES, UNITS
from mokkafs.profile.problems import Problems
from mokkafs.profile.schema import MAX_FAULTS, Fault
from mokkafs.serve.layers import Layers
from mokkafs.serve.mig import recheck
from mokkafs.serve.mig_layer import MigLayer
from mokkafs.serve.restored import Restored, StateFileError
from mokkafs.state import State
from mokkafs.writes import dynids, stores
from mokkafs.writes.book import Write, WriteBook

FORMAT = "mokkafs-state"
VERSION = 1

Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AppliedFault(_Closed):
    fault: Fault
    applies: int = Field(ge=1, le=1 << 31)
    origin: Finite | None


class FaultsSection(_Closed):
    applied: list[AppliedFault] = Field(default=[], max_length=MAX_FAULTS)
    cleared: dict[Annotated[str, Field(max_length=64)],
                  Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]] = Field(
        default={}, max_length=MAX_FAULTS)


Small = Annotated[int, Field(ge=0, le=1 << 16)]
Name = Annotated[str, Field(max_length=64)]
Slices = Annotated[int, Field(ge=1, le=SLICES)]


class KeptCompute(_Closed):
    id: int = Field(ge=0, lt=MAX_CIS)
    profile: Name
    slices: Slices


class KeptInstance(_Closed):  # bounded as the hardware is (mokkafs.model.mig_tables)
    id: int = Field(ge=0, lt=MAX_GIS)
    profile: Name
    profile_id: Small
    start: int = Field(ge=0, lt=UNITS)
    size: int = Field(ge=1, le=UNITS)
    slices: Slices
    compute: list[KeptCompute] = Field(default=[], max_length=MAX_CIS)


class KeptLayout(_Closed):
    minor: int = Field(ge=0, lt=MAX_GPUS)
    base: list[KeptInstance] = Field(max_length=SLICES)
    layout: list[KeptInstance] = Field(max_length=SLICES)


class KeptWrite(_Closed):
    bdf: Annotated[str, Field(pattern=f"^{BDF_TEXT.pattern}$")]
    attribute: Name
    # as a store keeps it: a VF count, or a driver's name (empty: none; _value checks which)
    value: Annotated[str, Field(max_length=4094, pattern=r"^[^\n\x00]*$")]
    at: Finite

    @field_validator("attribute")
    @classmethod
    def _known(cls, name: str) -> str:
        if stores.kept(name) is None:
            raise ValueError("not an attribute the view takes writes of")
        return name

    @model_validator(mode="after")
    def _value(self) -> KeptWrite:
        if self.attribute.startswith("sriov_") and \
                not re.fullmatch(r"[0-9]{1,5}( unbound)?", self.value):
            raise ValueError(f"{self.attribute}: not a value its store keeps")
        return self


class KeptDynId(_Closed):
    driver: Name
    id: Annotated[str, Field(pattern=r"^[0-9a-f]{1,8}( [0-9a-f]{1,8}){5} [0-9a-f]{1,16}$")]
    at: Finite


def _per_driver(kept: list[KeptDynId]) -> list[KeptDynId]:
    """A driver keeps ``MAX_DYNIDS`` at most, as ``new_id`` lets it have (never quoting the
    driver's name: the file is no profile to quote)."""
    seen: dict[str, int] = {}
    for pos, k in enumerate(kept):
        seen[k.driver] = seen.get(k.driver, 0) + 1
        if seen[k.driver] > dynids.MAX_DYNIDS:
            raise ValueError(f"entry {pos} is one driver's dynamic ID number "
                             f"{dynids.MAX_DYNIDS + 1}, and a driver keeps "
                             f"{dynids.MAX_DYNIDS} at most (docs/writes.md); no mokkafs "
                             "writes that: remove the file, or the entries past the bound")
    return kept


class StateDocument(_Closed):
    format: Literal["mokkafs-state"]
    version: int
    boot_id: str = Field(max_length=64)
    clock: Finite
    wall: Finite
    faults: FaultsSection = FaultsSection()
    mig: list[KeptLayout] = Field(default=[], max_length=MAX_GPUS)
    writes: list[KeptWrite] = Field(default=[], max_length=1 << 16)
    dynids: Annotated[list[KeptDynId], AfterValidator(_per_driver)] = Field(
        default=[], max_length=1 << 16)


def _instance(gi: GpuInstance) -> dict[str, object]:
    return {"id": gi.id, "profile": gi.profile, "profile_id": gi.profile_id,
            "start": gi.start, "size": gi.size, "slices": gi.slices,
            "compute": [{"id": c.id, "profile": c.profile, "slices": c.slices}
                        for c in gi.compute]}


def _instances(kept: list[KeptInstance]) -> tuple[GpuInstance, ...]:
    return tuple(GpuInstance(k.id, k.profile, k.profile_id, k.start, k.size, k.slices,
                             tuple(ComputeInstance(c.id, c.profile, c.slices)
                                   for c in k.compute)) for k in kept)


def record(layers: Layers, state: State, boot_id: str, clock: float, wall: float) -> str:
    """The state file's text for ``layers``, the faults' origins as ``state`` has them."""
    book = layers.book
    origins = {f.name: f.origin for f in state.faults if f.source == "control"}
    applied = [{"fault": fault.model_dump(mode="json", by_alias=True, exclude_defaults=True),
                "applies": book.applies.get(name, 1), "origin": origins.get(name)}
               for name, fault in book.control.items()]
    mig = [{"minor": minor, "base": [_instance(g) for g in base],
            "layout": [_instance(g) for g in layout]}
           for minor, (base, layout) in sorted(layers.mig.layouts.items())]
    writes = [{"bdf": w.bdf, "attribute": w.attribute, "value": w.value, "at": w.at}
              for w in layers.writes.writes.values()]
    dynids = [{"driver": driver, "id": i.text(), "at": i.at}
              for driver, ids in layers.writes.dynids.items() for i in ids]
    return json.dumps({"format": FORMAT, "version": VERSION, "boot_id": boot_id,
                       "clock": clock, "wall": wall,
                       "faults": {"applied": applied, "cleared": dict(book.held)},
                       "mig": mig, "writes": writes, "dynids": dynids},
                      indent=1, sort_keys=True) + "\n"


def _why(exc: ValidationError) -> str:
    """What is wrong, by field, without the values (the file is no profile to quote)."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'the document'}: {e['msg']}"
             for e in exc.errors(include_url=False, include_input=False)[:3]]
    return "; ".join(parts)


def restore(text: str, boot_id: str, clock: float, wall: float) -> Restored:
    """The layers a state file's ``text`` keeps, with each fault's origin on this daemon's
    clock (now ``clock``, the wall clock ``wall``, in boot ``boot_id``)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StateFileError(f"not JSON ({type(exc).__name__})") from None
    if isinstance(data, dict) and data.get("format") == FORMAT \
            and data.get("version") != VERSION:
        version = data.get("version")
        written = f"schema version {version}" if isinstance(version, int) \
            else "a schema version that is no number"
        raise StateFileError(f"{written}, and this mokkafs reads version {VERSION}")
    try:
        doc = StateDocument.model_validate(data)
    except ValidationError as exc:
        raise StateFileError(f"not a mokkafs state file: {_why(exc)}") from None
    rebooted = doc.boot_id != boot_id
    # Since the write, by the clock that still means something.
    since = max(0.0, wall - doc.wall) if rebooted else None
    book, origins = FaultBook(), {}
    for kept in doc.faults.applied:
        name = kept.fault.name
        book.control[name] = kept.fault
        book.applies[name] = kept.applies
        book.restored.add(name)
        if kept.origin is not None:
            origins[name] = kept.origin if since is None \
                else clock - (max(0.0, doc.clock - kept.origin) + since)
    book.held = dict(doc.faults.cleared)
    layers, ended = Layers(book=book), []
    if rebooted:
        ended = [f"{len(kind)} {what} set at run time: a reboot ends them, as a real node's"
                 for kind, what in ((doc.mig, "MIG layouts"), (doc.writes, "sysfs writes"),
                                    (doc.dynids, "dynamic IDs"))
                 if kind]
    else:
        layers.mig = MigLayer({k.minor: (_instances(k.base), _instances(k.layout))
                               for k in doc.mig})
        layers.writes = WriteBook({(w.bdf, w.attribute): Write(w.bdf, w.attribute, w.value,
                                                                w.at) for w in doc.writes})
        ids: dict[str, list[dynids.DynId]] = {}
        for kept_id in doc.dynids:
            ids.setdefault(kept_id.driver, []).append(dynids.parse(kept_id.id, 7, kept_id.at)[0])
        layers.writes.dynids = {driver: tuple(kept) for driver, kept in ids.items()}
    return Restored(layers, origins, rebooted, ended)


def restored_state(profile: State, restored: Restored, now: float) -> State:
    """``profile`` (its own faults applied at ``now``) with what ``restored`` keeps: its MIG
    layouts and writes, and its faults, each from its kept origin."""
    kept = restored.layers.mig.layouts
    at = {minor: pos for pos, minor in enumerate(kept)}  # (in the file's order)
    restored.layers.mig.prune(profile)
    problems = Problems("the state file", {})
    for minor, (_, layout) in kept.items():
        recheck(profile, minor, layout, ("mig", at[minor], "layout"), problems)
    if problems.items:
        raise StateFileError("a MIG layout `mokkafs mig` could not have made: " + "; ".join(
            f"{p.path}: {p.message}" for p in problems.items[:3]) + "; remove the file (the "
            "profile's layouts serve) and make the layout again with mokkafs mig")
    merged = restored.layers.over(profile)
    return replace(merged, faults=tuple(
        replace(f, origin=restored.origins.get(f.name, now)) if f.source == "control"
        else f if f.origin is not None else replace(f, origin=now)
        for f in merged.faults))

