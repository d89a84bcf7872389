"""MIG modes changed at run time, the way ``nvidia-smi -i N -mig 1|0`` changes a real GPU's:
what the control socket's ``{"op": "mig", "action": "mode", "gpu": N, "mode": 1|0}`` makes of
the MIG book's modes (``mokkafs.layers.mig``).

Refused as the driver refuses: a GPU without MIG (no MIG table in mokkafs, or a device minor
past the driver's MIG minor table) cannot turn it on, and a GPU that still has GPU instances
cannot turn it off. A GPU turned on has no instances yet; the profile's, if it booted in MIG
mode, are gone (a real GPU loses them with the mode). No GPU reset is simulated: the new mode
is current at once, and pending is the same.

State arithmetic only: no compile is needed, so the daemon at rest may import this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mokkafs.errors import UsageError
from mokkafs.layers.layer import StateFileError
from mokkafs.model.mig import GpuInstance
from mokkafs.model.mig_tables import MAX_GPUS, TABLES
from mokkafs.state import PciFunction, State

# The MIG book's layouts (``mokkafs.layers.mig.MigBook``): by GPU minor, (base, layout)
Layouts = dict[int, tuple[tuple[GpuInstance, ...], tuple[GpuInstance, ...]]]


def capable(fn: PciFunction) -> bool:
    """Whether GPU ``fn`` can be in MIG mode: its model has a MIG table, its minor a row of
    the driver's MIG minor table."""
    return fn.device in TABLES and fn.gpu is not None and fn.gpu.minor < MAX_GPUS


def mode_of(request: Mapping[str, Any]) -> bool:
    """The mode a ``mode`` request asks for: 1 (on) or 0 (off)."""
    mode = request.get("mode")
    if isinstance(mode, bool) or mode not in (0, 1):
        raise UsageError(f"mig: mode must be 1 (enable) or 0 (disable), not {mode!r}")
    return bool(mode)


def _gpu(profile: State, index: int) -> PciFunction:
    for fn in profile.gpus():
        if fn.gpu is not None and fn.gpu.index == index:
            return fn
    raise UsageError(f"no GPU {index}: the node has GPUs "
                     f"{', '.join(str(f.gpu.index) for f in profile.gpus() if f.gpu)}")


def set_mode(modes: dict[int, bool], layouts: Layouts, served: State, profile: State,
             index: int, on: bool) -> bool | None:
    """Set the MIG mode of GPU ``index`` in a MIG book's ``modes`` (and end its ``layouts``
    entry), ``served`` being the book over ``profile`` (False: it already is in that mode)."""
    fn = _gpu(profile, index)
    assert fn.gpu is not None
    word = "enable" if on else "disable"
    if not capable(fn):
        raise UsageError(f"Unable to {word} MIG Mode for GPU {index}: Not Supported (mokkafs "
                         f"has no MIG table of PCI device {fn.device:04x}"
                         + (")" if fn.device not in TABLES else
                            f", or its minor {fn.gpu.minor} is past the driver's MIG minors)"))
    minor = fn.gpu.minor
    now = next((g for g in served.mig if g.minor == minor), None)
    if (now is not None) == on:
        return False
    if now is not None and now.instances:
        ids = ", ".join(str(gi.id) for gi in now.instances)
        raise UsageError(f"Unable to disable MIG Mode for GPU {index}: In use by another "
                         f"client (GPU instances {ids}; destroy them first: mokkafs mig -i "
                         f"{index} -dgi)")
    booted = next((g for g in profile.mig if g.minor == minor), None)
    layouts.pop(minor, None)
    if (booted is not None) == on:
        del modes[minor]
        if booted is not None and booted.instances:  # on again: the profile's are gone
            layouts[minor] = (booted.instances, ())
    else:
        modes[minor] = on
    return None


def recheck_modes(modes: Mapping[int, bool], layouts: Layouts, profile: State) -> None:
    """Raise ``StateFileError`` naming why a state file's modes are none ``mokkafs mig -mig``
    could have set: a GPU that cannot be in MIG mode turned on, or a layout kept of a GPU
    turned off."""
    capable_minors = {fn.gpu.minor for fn in profile.gpus() if fn.gpu and capable(fn)}
    minors = {fn.gpu.minor for fn in profile.gpus() if fn.gpu}
    for pos, (minor, on) in enumerate(modes.items()):
        if minor in minors and minor not in capable_minors and on:
            raise StateFileError(f"mig_modes[{pos}]: MIG turned on for a GPU that has no MIG "
                                 "mode; remove the file (the profile's modes serve)")
        if not on and minor in layouts:
            raise StateFileError(f"mig_modes[{pos}]: MIG turned off for a GPU whose layout "
                                 "the file keeps; remove the file (the profile's modes serve)")
