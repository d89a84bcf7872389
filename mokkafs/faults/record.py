"""What a daemon changed at run time, as the state file keeps it for the next daemon
(docs/faults.md, "Durable run-time state"): ``record`` writes the document, ``restore`` reads
one back (a ``StateFileError`` names why it cannot be used). Pure: the file itself is
``mokkafs.serve.durable``'s.

A JSON object, its schema versioned: ``format`` and ``version``, then when it was written
(``boot_id``, the daemon's clock and the wall clock) and one section per kind of change:
``faults`` (those applied over the control socket, as written, with how often each was applied
and when, and the profile's faults cleared). A later kind of change is a new section; a
section absent is empty.

Timing: a fault's origin is kept on the daemon's clock (CLOCK_MONOTONIC, which every process of
one boot shares). Restored in the same boot, it is that origin as it was: the time the daemons
were down counts, exactly. After a reboot (another ``boot_id``) the clock began again, so the
time since the write is the wall clock's: a fault is as far along as it was at the write plus
the wall-clock time since (never less: a wall clock that went back counts nothing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mokkafs.faults.book import FaultBook
from mokkafs.profile.schema import MAX_FAULTS, Fault
from mokkafs.state import State

FORMAT = "mokkafs-state"
VERSION = 1
MAX_BYTES = 4 << 20  # a full book of the largest faults is well under a megabyte

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


class StateDocument(_Closed):
    format: Literal["mokkafs-state"]
    version: int
    boot_id: str = Field(max_length=64)
    clock: Finite
    wall: Finite
    faults: FaultsSection = FaultsSection()


class StateFileError(Exception):
    """Why a state file cannot be used (never quoting what is in it)."""


@dataclass
class Restored:
    book: FaultBook
    origins: dict[str, float] = field(default_factory=dict)  # name -> daemon clock
    rebooted: bool = False


def record(book: FaultBook, state: State, boot_id: str, clock: float, wall: float) -> str:
    """The state file's text for ``book``, the faults' origins as ``state`` has them."""
    origins = {f.name: f.origin for f in state.faults if f.source == "control"}
    applied = [{"fault": fault.model_dump(mode="json", by_alias=True, exclude_defaults=True),
                "applies": book.applies.get(name, 1), "origin": origins.get(name)}
               for name, fault in book.control.items()]
    return json.dumps({"format": FORMAT, "version": VERSION, "boot_id": boot_id,
                       "clock": clock, "wall": wall,
                       "faults": {"applied": applied, "cleared": dict(book.held)}},
                      indent=1, sort_keys=True) + "\n"


def _why(exc: ValidationError) -> str:
    """What is wrong, by field, without the values (the file is no profile to quote)."""
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'the document'}: {e['msg']}"
             for e in exc.errors(include_url=False, include_input=False)[:3]]
    return "; ".join(parts)


def restore(text: str, boot_id: str, clock: float, wall: float) -> Restored:
    """The book a state file's ``text`` keeps, with each fault's origin on this daemon's
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
    return Restored(book, origins, rebooted)


def restored_state(profile: State, restored: Restored, now: float) -> State:
    """``profile`` (its own faults applied at ``now``) with the faults ``restored`` keeps, each
    from its kept origin."""
    merged = restored.book.merge(profile)
    return replace(merged, faults=tuple(
        replace(f, origin=restored.origins.get(f.name, now)) if f.source == "control"
        else f if f.origin is not None else replace(f, origin=now)
        for f in merged.faults))

