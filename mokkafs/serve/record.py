"""What a daemon changed at run time (its ``Layers``), as the state file keeps it for the
next daemon (docs/faults.md, "Durable run-time state"): ``record`` writes the document,
``restore`` reads one back (a ``StateFileError`` names why it cannot be used). Pure: the file
itself is ``mokkafs.serve.durable``'s.

A JSON object, its schema versioned: ``format`` and ``version``, then when it was written
(``boot_id``, the daemon's clock and the wall clock) and each layer's sections, by the layers'
registry (``mokkafs.layers.registry.LAYERS``): each layer records, checks (``Layer.schema``:
``mokkafs.layers.kept``) and restores its own, so a new layer is a new section and no edit
here. A section absent is empty. Today: ``mig``, ``mig_modes``, ``faults``, ``writes`` and
``dynids``.

A reboot ends the sections a layer says it does (``Layer.reboot_ends``: the MIG layouts and
the writes, as it ends a real node's GPU instances and VFs, which are made again after each
boot); the layer restores the rest of its sections. The faults carry on, as the test they
stage would; so do the MIG modes, as a real GPU keeps its MIG mode across reboots.

Timing: a fault's origin is kept on the daemon's clock (CLOCK_MONOTONIC, which every process of
one boot shares). Restored in the same boot, it is that origin as it was: the time the daemons
were down counts, exactly. After a reboot (another ``boot_id``) the clock began again, so the
time since the write is the wall clock's: a fault is as far along as it was at the write plus
the wall-clock time since (never less: a wall clock that went back counts nothing)
(``mokkafs.layers.layer.Written``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from mokkafs.layers.layer import StateFileError, Written
from mokkafs.layers.registry import LAYERS, Layers, Restored
from mokkafs.state import State

FORMAT = "mokkafs-state"
VERSION = 1

Finite = Annotated[float, Field(allow_inf_nan=False)]


class Header(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["mokkafs-state"]
    version: int
    boot_id: str = Field(max_length=64)
    clock: Finite
    wall: Finite


@functools.cache
def document() -> type[BaseModel]:
    """The document's model: the header, then each layer's sections, in the registry's order
    (the order its problems are named in)."""
    return create_model("StateDocument",
                        __base__=(*reversed([layer.schema() for layer in LAYERS]), Header))


def record(layers: Layers, state: State, boot_id: str, clock: float, wall: float) -> str:
    """The state file's text for ``layers``, the faults' origins as ``state`` has them."""
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "boot_id": boot_id,
                           "clock": clock, "wall": wall}
    for layer in LAYERS:
        doc.update(layer.record(layers[layer], state))
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


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
        which = f"schema version {version}" if isinstance(version, int) \
            else "a schema version that is no number"
        raise StateFileError(f"{which}, and this mokkafs reads version {VERSION}")
    try:
        doc: Any = document().model_validate(data)
    except ValidationError as exc:
        raise StateFileError(f"not a mokkafs state file: {_why(exc)}") from None
    # Since the write, by the clock that still means something.
    since = max(0.0, wall - doc.wall) if doc.boot_id != boot_id else None
    written = Written(doc.clock, clock, since)
    restored = Restored(Layers(), rebooted=written.rebooted)
    for layer in LAYERS:
        kept = doc
        if written.rebooted and layer.reboot_ends:
            restored.ended += [f"{len(getattr(doc, key))} {what} set at run time: a reboot "
                               "ends them, as a real node's"
                               for key, what in layer.reboot_ends.items() if getattr(doc, key)]
            kept = doc.model_copy(update={key: [] for key in layer.reboot_ends})
        restored.layers[layer], origins = layer.restore(kept, written)
        restored.origins.update(origins)
    return restored


def restored_state(profile: State, restored: Restored, now: float) -> State:
    """``profile`` (its own faults applied at ``now``) with what ``restored`` keeps, each
    layer checked again against it (``Layer.recheck``), and its faults, each from its kept
    origin."""
    for layer in LAYERS:
        layer.recheck(restored.layers[layer], profile)
    merged = restored.layers.over(profile)
    return replace(merged, faults=tuple(
        replace(f, origin=restored.origins.get(f.name, now)) if f.source == "control"
        else f if f.origin is not None else replace(f, origin=now)
        for f in merged.faults))
