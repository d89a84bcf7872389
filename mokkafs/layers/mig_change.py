"""MIG layouts changed at run time, the way ``nvidia-smi mig -cgi/-dgi/-cci/-dci`` changes a
real node's: what the control socket's ``{"op": "mig", ...}`` requests make of a GPU's layout
(``change``), each a new entry of the MIG book (``mokkafs.layers.mig``).

Each change makes a whole new layout of one GPU, checked like a profile's (placements, slices,
IDs: ``mokkafs.profile.mig``; a ``cgi``'s or ``cci``'s ``starts``, one per profile, ask for
placements as ``nvidia-smi mig -cgi PROFILE:START`` and NVML's ``...WithPlacement`` do, null
the driver's choice), and is served as one
new State: no view holds a compute instance whose GPU instance is gone. ``recheck`` checks a
layout a state file kept the same way.

Part of the compile's run-time side: the MIG layer imports this module at the first MIG
request or the first check of a state file's layouts, and the layout checker (and with it
pydantic) at the first change: a daemon at rest never loads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mokkafs.errors import UsageError
from mokkafs.layers.layer import StateFileError
from mokkafs.model.mig import GpuInstance, MigGpu
from mokkafs.model.mig_tables import CI_SLICES, SHAPES, TABLES
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.state import State

if TYPE_CHECKING:
    from mokkafs.profile.mig import Ci, Layout

ACTIONS = ("list", "cgi", "dgi", "cci", "dci", "mode")


def recheck(profile: State, minor: int, instances: tuple[GpuInstance, ...], where: YamlPath,
            problems: Problems) -> None:
    """Add to ``problems`` why ``instances`` is no layout GPU ``minor`` of ``profile`` could
    have (a restored one: each GPU instance made again, in order, as ``change`` makes them:
    its profile a name of the GPU's model, its placement and ID free, its compute instances'
    profiles and IDs). Quotes no name it was given."""
    from mokkafs.profile.mig import Layout

    device = next(fn.device for fn in profile.gpus() if fn.gpu and fn.gpu.minor == minor)
    model, names = TABLES[device]
    layout = Layout(names, model, where, problems)
    for pos, gi in enumerate(instances):
        at = (*where, pos)
        key = layout.by_name.get(gi.profile)
        made = layout.gpu_instance(key, gi.start, gi.id, at) if key is not None else None
        if made is None:
            if key is None:
                problems.add((*at, "profile"), f"not a GPU instance profile of {model}")
            continue
        spans = {f"{c}c.{made.profile}": c for c in CI_SLICES if c < made.slices}
        spans[made.profile] = made.slices
        for cpos, ci in enumerate(gi.compute):
            if ci.profile not in spans:
                problems.add((*at, "compute", cpos, "profile"), "not a compute instance "
                             f"profile of {made.profile}")
        layout.with_compute(made, [(ci.id, spans.get(ci.profile, 0), ci.start)
                                   for ci in gi.compute], at)
    if not problems.items and tuple(sorted(layout.made, key=lambda g: g.id)) != instances:
        problems.add(where, "its profile IDs, sizes or slices are not those of its profiles")


def recheck_kept(profile: State, layouts: Mapping[int, tuple[GpuInstance, ...]],
                 at: Mapping[int, int]) -> None:
    """Raise ``StateFileError`` naming why a layout a state file kept (by GPU minor, each at
    its position ``at`` in the file) is none ``mokkafs mig`` could have made."""
    problems = Problems("the state file", {})
    for minor, layout in layouts.items():
        recheck(profile, minor, layout, ("mig", at[minor], "layout"), problems)
    if problems.items:
        raise StateFileError("a MIG layout `mokkafs mig` could not have made: " + "; ".join(
            f"{p.path}: {p.message}" for p in problems.items[:3]) + "; remove the file (the "
            "profile's layouts serve) and make the layout again with mokkafs mig")


def gpu_of(profile: State, served: State, index: int) -> tuple[MigGpu, int]:
    """The MIG GPU of nvidia-smi index ``index`` as served, and its PCI device id."""
    for fn in profile.gpus():
        if fn.gpu is not None and fn.gpu.index == index:
            for gpu in served.mig:
                if gpu.bdf == fn.bdf:
                    return gpu, fn.device
            raise UsageError(f"GPU {index} is not in MIG mode (its profile's mig.mode_current "
                             "is not enabled)")
    raise UsageError(f"no GPU {index}: the node has GPUs "
                     f"{', '.join(str(f.gpu.index) for f in profile.gpus() if f.gpu)}")


def _gi_key(layout: Layout, name: str, where: tuple[str | int, ...]) -> str | None:
    if name.isdigit():  # nvidia-smi's profile ID (mig -lgip)
        key = next((k for k, s in SHAPES.items() if s.profile_id == int(name)), None)
        if key is None:
            layout.problems.add(where, f"no GPU instance profile ID {name}; IDs are "
                                f"{', '.join(str(s.profile_id) for s in SHAPES.values())}")
        return key
    return layout.shape(name, None, where)


def _destroyed(made: list[GpuInstance], gpu: int, action: str, gis: list[int],
               cis: list[int]) -> None:
    """Refuse, in ``nvidia-smi mig``'s words, a destroy that names an instance the GPU does
    not have (or that has nothing to destroy): the real tool fails it with Not Found."""
    if action == "dgi":
        missing = [f"Unable to destroy GPU instance ID {g:2d} from GPU {gpu:2d}: Not Found"
                   for g in gis if all(gi.id != g for gi in made)]
        if missing:
            raise UsageError("\n".join([*missing, "Failed to destroy GPU instances: Not Found"]))
        if not made:
            raise UsageError("No GPU instances found: Not Found")
        return
    gi = next((gi for gi in made if len(gis) == 1 and gi.id == gis[0]), None)
    if gi is None:
        return  # no such GPU instance, or not one: said by the checks that follow
    missing = [f"Unable to destroy compute instance ID {c:2d} from GPU {gpu:2d} GPU instance "
               f"ID {gi.id:2d}: Not Found" for c in cis if all(ci.id != c for ci in gi.compute)]
    if missing:
        raise UsageError("\n".join([*missing, "Failed to destroy compute instances: Not Found"]))
    if not gi.compute:
        raise UsageError("No compute instances found: Not Found")


def _starts(starts: Any, count: int) -> list[int | None]:
    """The placement asked for each new GPU or compute instance (``-cgi PROFILE:START``,
    NVML's Create...WithPlacement; None: the driver's choice); a request without ``starts``
    asks for none."""
    if starts is None:
        return [None] * count
    if not isinstance(starts, list) or len(starts) != count or any(
            s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0)
            for s in starts):
        raise UsageError("mig: starts must be a placement start (a number from 0) or null "
                         "for each profile")
    return starts


def change(gpu: MigGpu, device: int, request: Mapping[str, Any]) -> tuple[GpuInstance, ...]:
    """The GPU's new layout after ``request`` (cgi, dgi, cci or dci); raises ProfileError
    naming what cannot be done."""
    from mokkafs.profile.mig import Layout

    action = request["action"]
    problems = Problems(f"mokkafs mig -{action}", {})
    layout = Layout(TABLES[device][1], TABLES[device][0], (f"-{action}",), problems)
    layout.made = list(gpu.instances)
    gis = [int(g) for g in request.get("gi") or []]
    if action in ("dgi", "dci"):
        _destroyed(layout.made, int(request["gpu"]), action, gis,
                   [int(c) for c in request.get("ci") or []])
    for g in gis:
        if all(gi.id != g for gi in layout.made):
            problems.add(("-gi",), f"GPU {request['gpu']} has no GPU instance {g}")
    problems.check()
    if action == "cgi":
        profiles = request.get("profiles") or []
        starts = _starts(request.get("starts"), len(profiles))
        for pos, name in enumerate(profiles):
            key = _gi_key(layout, str(name), ("-cgi", pos))
            made = layout.gpu_instance(key, starts[pos], None, ("-cgi", pos)) if key else None
            if made is not None and request.get("C"):
                layout.with_compute(made, [(None, made.slices, None)], ("-C",))
    elif action == "dgi":
        layout.made = [gi for gi in layout.made if gis and gi.id not in gis]
    elif action in ("cci", "dci"):
        if len(gis) != 1:
            problems.add(("-gi",), f"-{action} needs one GPU instance: -gi ID")
            problems.check()
        gi = next(gi for gi in layout.made if gi.id == gis[0])
        keep: list[Ci] = [(c.id, c.slices, c.start) for c in gi.compute]
        if action == "dci":
            cis = [int(c) for c in request.get("ci") or []]
            keep = [c for c in keep if cis and c[0] not in cis]
        else:
            profiles = request.get("profiles") or [gi.profile]
            starts = _starts(request.get("starts"), len(profiles))
            for pos, name in enumerate(profiles):
                text = str(name)
                slices = layout.ci_slices(gi, None if text.isdigit() else text,
                                          int(text) if text.isdigit() else None,
                                          ("-cci", pos))
                keep += [(None, slices, starts[pos])] if slices is not None else []
        cleared = replace(gi, compute=())
        layout.made[layout.made.index(gi)] = cleared
        layout.with_compute(cleared, keep, (f"-{action}",))
    problems.check()
    return tuple(sorted(layout.made, key=lambda g: g.id))


def action_of(request: Mapping[str, Any]) -> str:
    """The request's action; raises ``UsageError`` for one ``nvidia-smi mig`` has not."""
    action = request.get("action")
    if action not in ACTIONS:
        raise UsageError(f"mig: unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    return str(action)
