"""The faults applied at run time (through the control socket), kept as written, and resolved
against every new profile State: a fault whose target a profile swap removes ends, with a log
line. Clearing a profile's own fault holds it off until the profile changes that fault's
definition. Pure: the daemon (``mokkafs.serve``) owns one and changes it under its lock.

The profile's fault compiler (and with it the schema, pydantic) is imported at the first
fault applied at run time: a daemon at rest never loads it."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from mokkafs.errors import FaultError, UsageError
from mokkafs.state import FaultSpec, State

if TYPE_CHECKING:
    from mokkafs.profile.schema import Fault

log = logging.getLogger(__name__)


def fingerprint(spec: FaultSpec) -> str:
    """A digest of the fault as written (not when it was applied, nor how this mokkafs
    resolves it), to keep in a state file and compare with a later profile's, by a later
    mokkafs too."""
    written = [spec.name, spec.kind, spec.target, spec.after, spec.duration, spec.every,
               spec.count, spec.cable, [list(r) for r in spec.rates], spec.width,
               spec.rate_gbps, spec.gen, spec.selected]
    if spec.kind == "xid":  # (only there, so every other fault's digest is as it was)
        written += [spec.xid, spec.text]
    if spec.kind == "gpu-hot":
        written += [spec.temperature, spec.clock_mhz]
    if spec.kind == "gpu-busy":
        written += [spec.pid, spec.process, spec.memory_mib, spec.utilization_gpu,
                    spec.utilization_memory]
    return hashlib.sha256(json.dumps(written).encode()).hexdigest()


@dataclass
class FaultBook:
    control: dict[str, Fault] = field(default_factory=dict)  # by name, in order applied
    # cleared profile faults: name -> ``fingerprint`` of the definition cleared
    held: dict[str, str] = field(default_factory=dict)
    # Applies of each name: applying a fault again (an ended one, to run the scenario again)
    # makes it a new one, whose timing starts then, even if nothing in it changed.
    applies: dict[str, int] = field(default_factory=dict)
    # Those a state file kept from a daemon before this one, until applied again or cleared.
    restored: set[str] = field(default_factory=set)

    def copy(self) -> FaultBook:
        return copy.deepcopy(self)

    def apply(self, faults: list[Fault], profile: State, filename: str) -> None:
        """Add (or replace, by name) faults; raises ``FaultError`` naming every problem."""
        from mokkafs.profile.faults import compile_faults, over_bounds
        from mokkafs.profile.problems import Problems

        problems = Problems(filename, {})
        specs = compile_faults(faults, profile, ("faults",), problems, "control")
        own = {f.name for f in profile.faults}
        for i, fault in enumerate(faults):
            if fault.name in own:
                problems.add(("faults", i, "name"), f"{fault.name} is a fault of the profile; "
                             "give this one a name of its own")
        # The node's bound counts every source: the profile's faults (but those cleared) and
        # the control socket's, with this file's replacing those of the same names.
        names = {f.name for f in faults}
        kept: list[Fault | FaultSpec] = [
            f for f in profile.faults if self.held.get(f.name) != fingerprint(f)]
        kept += [f for n, f in self.control.items() if n not in names]
        why = over_bounds([*kept, *specs])
        if why is not None and not problems.items:
            problems.add(("faults",), f"with the {len(kept)} faults the node holds already "
                         f"(the profile's and the control socket's), {why}; clear some first "
                         "(mokkafs fault clear NAME)")
        if problems.items:
            raise FaultError(filename, problems.items)
        for fault in faults:
            self.control.pop(fault.name, None)
            self.control[fault.name] = fault
            self.applies[fault.name] = self.applies.get(fault.name, 0) + 1
            self.restored.discard(fault.name)

    def clear(self, names: list[str], profile: State) -> None:
        """Clear faults by name (none: all of them); raises ``UsageError`` for a name that no
        fault has."""
        own = {f.name: f for f in profile.faults}
        unknown = [n for n in names if n not in self.control and n not in own]
        if unknown:
            known = ", ".join([*self.control, *own]) or "none"
            raise UsageError(f"no fault named {', '.join(unknown)} (the node's faults: "
                             f"{known}); nothing was cleared")
        for name in names or [*self.control, *own]:
            if name in self.control:
                del self.control[name]
                self.restored.discard(name)
            else:
                self.held[name] = fingerprint(own[name])

    def merge(self, profile: State) -> State:
        """``profile`` with the faults applied at run time, and without those cleared."""
        own = [f for f in profile.faults if self.held.get(f.name) != fingerprint(f)]
        self.held = {n: d for n, d in self.held.items()
                     if any(f.name == n and fingerprint(f) == d for f in profile.faults)}
        names = {f.name for f in profile.faults}
        added: list[FaultSpec] = []
        if self.control:
            from mokkafs.profile.faults import compile_faults, over_bounds
            from mokkafs.profile.problems import Problems
        for name, fault in list(self.control.items()):
            problems = Problems("the control socket", {})
            specs = compile_faults([fault], profile, ("faults",), problems, "control")
            if name in names or not specs:
                why = "the profile now has a fault of that name" if name in names else \
                    "; ".join(p.message for p in problems.items)
                log.warning("fault %s ends: %s", name, why)
                del self.control[name]
                self.restored.discard(name)
                continue
            added += [replace(spec, revision=self.applies.get(name, 1) - 1,
                              restored=name in self.restored) for spec in specs]
        # A profile that grew: the newest faults applied at run time give way.
        while added and (bound := over_bounds([*own, *added])) is not None:
            gone = added.pop()
            log.warning("fault %s ends: with the profile's faults the node would hold %s",
                        gone.name, bound)
            del self.control[gone.name]
            self.restored.discard(gone.name)
        return replace(profile, faults=(*own, *added))
