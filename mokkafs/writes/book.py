"""The writes the view took, kept as written and applied over every new State: a write whose
target a profile swap removes (or no longer lets have its value) is dropped, with a log line.
Pure but for that log line: the daemon (``mokkafs.serve``) owns one and changes it under its
swap lock; ``merge`` gives the State the surfaces render.
"""

from __future__ import annotations

import copy
import errno
import logging
from dataclasses import dataclass, field, replace

from mokkafs.model import sriov
from mokkafs.model.bdf import BUS_TEXT
from mokkafs.model.sysfs import REMOVE, RESCAN
from mokkafs.state import State
from mokkafs.writes import drivers, dynids, hotplug
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.dynids import DynIds
from mokkafs.writes.stores import KEPT, phase

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (PCI function, attribute)


@dataclass(frozen=True)
class Write:
    bdf: str
    attribute: str
    value: str
    at: float  # the wall clock at the write


@dataclass
class WriteBook:
    writes: dict[Key, Write] = field(default_factory=dict)  # in the order written
    taken: int = 0  # writes that changed the view, ever
    refused: dict[int, int] = field(default_factory=dict)  # errno -> writes refused
    dropped: int = 0  # writes a profile swap ended
    dynids: DynIds = field(default_factory=dict)  # driver -> its dynamic IDs (new_id)
    # the State the last merge was over: what a function a write makes appear is probed in
    base: State | None = field(default=None, repr=False, compare=False)

    def copy(self) -> WriteBook:
        return copy.deepcopy(self, {id(self.base): self.base})

    def write(self, bdf: str, attribute: str, text: str, served: State, wall: float) -> bool:
        """Take one write of ``text`` to ``attribute`` of the function at ``bdf``, checked
        against ``served`` (the State as the writes so far make it). False: it changes
        nothing (the value it has). Raises ``WriteRefused``, and then nothing changes.
        A bus file's store (``drivers.bus_store``: ``bdf`` is then the driver, or ``pci``)
        names its function in ``text``."""
        if attribute in ("new_id", "remove_id"):
            return self._dynid(bdf, attribute, text, served, wall)
        if attribute in drivers.DRIVER_STORES or attribute in drivers.BUS_STORES:
            changes = drivers.bus_store(bdf, attribute, text, served, self.dynids)
            for target, kept, to in changes:
                if not to:
                    self._end_vfs(target, served)
                self._keep(target, kept, to, wall)
            return bool(changes)
        if attribute == RESCAN:
            return self._appeared(served, wall, self._rescan(bdf, text, served))
        attr = KEPT.get(attribute)
        try:
            fn = served.function(bdf)
        except KeyError:
            fn = None
        if attr is None or fn is None or not attr.fits(fn):
            raise WriteRefused(errno.EACCES, f"{bdf}/{attribute} cannot be written")
        if attribute == REMOVE:
            if not hotplug.asked(text):
                return False
            gone = hotplug.below(served, bdf)
            for key in [k for k in self.writes if k[0] in gone]:
                del self.writes[key]  # they end with their functions
            self._keep(bdf, attribute, "1", wall)
            return True
        value = attr.parse(text, fn)
        if value is None:
            return False
        if attribute == "sriov_numvfs":
            self._end_vfs(bdf, served)
        self._keep(bdf, attribute, value, wall)
        if attribute == "sriov_numvfs":  # the one kept attribute that makes functions appear
            self._appeared(served, wall, True)
        return True

    def _dynid(self, driver: str, name: str, text: str, served: State, wall: float) -> bool:
        if driver not in served.pci_drivers:
            raise WriteRefused(errno.EACCES, f"{driver}/{name} cannot be written")
        if name == "remove_id":
            self.dynids = dynids.remove_id(driver, text, self.dynids)
        else:
            dynid, attach = dynids.new_id(driver, text, served, self.dynids, wall)
            self.dynids = {**self.dynids, driver: (*self.dynids.get(driver, ()), dynid)}
            for bdf in attach:
                self._keep(bdf, "driver", driver, wall)
        self.taken += 1
        return True

    def _end_vfs(self, pf: str, served: State) -> None:
        """A PF's VFs go (SR-IOV disabled: by 0 to ``sriov_numvfs``, or by its driver's
        remove when it is unbound): their writes end with them."""
        vfs = {fn.bdf for fn in served.functions if fn.physfn == pf}
        for key in [k for k in self.writes if k[0] in vfs
                    or (k == (pf, "sriov_numvfs") and vfs)]:
            del self.writes[key]

    def _appeared(self, served: State, wall: float, changed: bool) -> bool:
        """The functions the writes so far make appear (VFs, functions a rescan brought
        back) probed as the bus probes a new device: where the driver order and the dynamic
        IDs give another driver than the one the function comes with, that binding is kept
        (``mokkafs.writes.dynids``)."""
        if not changed or self.base is None:
            return changed
        there = {fn.bdf for fn in served.functions}
        made = self.merge(self.base)
        for fn in made.functions:
            if fn.bdf in there or (fn.physfn is not None and not fn.driver):
                continue  # a VF made while autoprobe was off is not probed
            fresh = replace(fn, driver="", native_driver=dynids.native(fn))
            driver = dynids.probe(fresh, made, self.dynids)
            if driver != fn.driver:
                self._keep(fn.bdf, "driver", driver, wall)
        return changed

    def _rescan(self, holder: str, text: str, served: State) -> bool:
        """A rescan through ``holder`` (a function, or ``pci``): the removed functions it
        reaches come back. False: there were none."""
        if holder != "pci" and not BUS_TEXT.fullmatch(holder) \
                and holder not in {fn.bdf for fn in served.functions}:
            raise WriteRefused(errno.EACCES, f"{holder}/rescan cannot be written")
        if not hotplug.asked(text):
            return False
        span = hotplug.rescanned(served, holder)
        back = [k for k in self.writes if k[1] == REMOVE and hotplug.reached(k[0], span)]
        for key in back:
            del self.writes[key]
        self.taken += bool(back)
        return bool(back)

    def _keep(self, bdf: str, attribute: str, value: str, wall: float) -> None:
        key = (bdf, attribute)
        self.writes.pop(key, None)
        self.writes[key] = Write(bdf, attribute, value, wall)
        self.taken += 1

    def refuse(self, code: int) -> None:
        self.refused[code] = self.refused.get(code, 0) + 1

    def clear(self) -> int:
        """Forget every write (the profile's values come back); how many there were."""
        count = len(self.writes) + sum(len(ids) for ids in self.dynids.values())
        self.writes.clear()
        self.dynids = {}
        return count

    def merge(self, profile: State) -> State:
        """``profile`` with the writes applied in order and the VFs they make. A write whose
        function or attribute is gone, or whose value the new State refuses, is dropped."""
        self.base = profile
        for driver in [d for d in self.dynids if d not in profile.pci_drivers]:
            log.warning("dynamic IDs of %s dropped: %s is not loaded", driver, driver)
            self.dropped += len(self.dynids.pop(driver))
        state = self._apply(profile, 0)
        # after the VFs are made: a binding's or a removal's target may be a VF
        return self._apply(self._apply(sriov.with_vfs(state), 1), 2)

    def _apply(self, state: State, step: int) -> State:
        for key, w in list(self.writes.items()):
            if phase(w.attribute) != step:
                continue
            attr = KEPT[w.attribute]
            try:
                fn = state.function(w.bdf)
            except KeyError:
                fn = None
            why = None
            if fn is None:
                why = f"{w.bdf} is gone"
            elif not attr.fits(fn):
                why = f"{w.bdf} has no {w.attribute}"
            elif fn.sriov is not None and w.attribute == "sriov_numvfs" \
                    and int(w.value.partition(" ")[0]) > fn.sriov.total:
                why = f"{w.bdf} has {fn.sriov.total} VFs at most"
            else:
                why = drivers.gone(state, w.attribute, w.value)
            if why is not None:
                log.warning("write %s/%s=%s dropped: %s", w.bdf, w.attribute, w.value, why)
                del self.writes[key]
                self.dropped += 1
                continue
            state = attr.apply(state, w.bdf, w.value)
        return state

    def listing(self) -> list[dict[str, str | float]]:
        kept: list[dict[str, str | float]] = [
            {"target": w.bdf, "attribute": w.attribute, "value": w.value, "at": w.at}
            for w in self.writes.values()]
        return kept + [{"target": driver, "attribute": "new_id", "value": i.text(), "at": i.at}
                       for driver, ids in self.dynids.items() for i in ids]
