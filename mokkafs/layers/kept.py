"""The layers' sections of the state file (docs/faults.md, "Durable run-time state"), as
pydantic models: one per layer (``Layer.schema``), each field one top-level key of the
document, its entries bounded as what writes them is. ``mokkafs.serve.record`` joins them
under its header.

Part of the compile's run-time side: imported at the state file's first read or write.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from mokkafs.model.bdf import BDF_TEXT
from mokkafs.model.mig_tables import MAX_CIS, MAX_GIS, MAX_GPUS, SLICES, UNITS
from mokkafs.profile.schema import MAX_FAULTS, Fault
from mokkafs.writes import dynids, stores

Finite = Annotated[float, Field(allow_inf_nan=False)]
Small = Annotated[int, Field(ge=0, le=1 << 16)]
Name = Annotated[str, Field(max_length=64)]
Slices = Annotated[int, Field(ge=1, le=SLICES)]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AppliedFault(Closed):
    fault: Fault
    applies: int = Field(ge=1, le=1 << 31)
    origin: Finite | None


class FaultsSection(Closed):
    applied: list[AppliedFault] = Field(default=[], max_length=MAX_FAULTS)
    cleared: dict[Annotated[str, Field(max_length=64)],
                  Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]] = Field(
        default={}, max_length=MAX_FAULTS)


class FaultsKept(Closed):
    """``faults``: those applied over the control socket, as written, with how often each was
    applied and when; and the profile's faults cleared."""

    faults: FaultsSection = FaultsSection()


class KeptCompute(Closed):
    id: int = Field(ge=0, lt=MAX_CIS)
    profile: Name
    slices: Slices
    # its placement's start in the GI's slices; absent in a file of a daemon from before
    # compute placements (its compute instances lay one after another in ID order)
    start: int | None = Field(default=None, ge=0, lt=SLICES)


class KeptInstance(Closed):  # bounded as the hardware is (mokkafs.model.mig_tables)
    id: int = Field(ge=0, lt=MAX_GIS)
    profile: Name
    profile_id: Small
    start: int = Field(ge=0, lt=UNITS)
    size: int = Field(ge=1, le=UNITS)
    slices: Slices
    compute: list[KeptCompute] = Field(default=[], max_length=MAX_CIS)


class KeptLayout(Closed):
    minor: int = Field(ge=0, lt=MAX_GPUS)
    base: list[KeptInstance] = Field(max_length=SLICES)
    layout: list[KeptInstance] = Field(max_length=SLICES)


class KeptMode(Closed):
    minor: int = Field(ge=0, lt=MAX_GPUS)
    mode: Literal[0, 1]


class MigKept(Closed):
    """``mig``: the MIG layouts set at run time, each with the profile's layout it was made
    over; ``mig_modes``: the MIG modes set at run time, each the other of the profile's."""

    mig: list[KeptLayout] = Field(default=[], max_length=MAX_GPUS)
    mig_modes: list[KeptMode] = Field(default=[], max_length=MAX_GPUS)


class KeptWrite(Closed):
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


class KeptDynId(Closed):
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


class WritesKept(Closed):
    """``writes``: the sysfs writes taken, in order; ``dynids``: the drivers' dynamic IDs
    (``new_id``), in order."""

    writes: list[KeptWrite] = Field(default=[], max_length=1 << 16)
    dynids: Annotated[list[KeptDynId], AfterValidator(_per_driver)] = Field(
        default=[], max_length=1 << 16)
