"""The writes the view took, kept as written and applied over every new State: a write whose
target a profile swap removes (or no longer lets have its value) is dropped, with a log line.
Pure but for that log line: the daemon (``mokkafs.serve``) owns one and changes it under its
swap lock; ``merge`` gives the State the surfaces render. A write goes to the store its key
names (``mokkafs.writes.stores``): the store says what it does, the book does it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field, replace

from mokkafs.model import sriov
from mokkafs.model.sysfs import StoreKey
from mokkafs.state import State
from mokkafs.writes import dynids, stores
from mokkafs.writes.dynids import DynIds
from mokkafs.writes.stores import Asked, Key

log = logging.getLogger(__name__)


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

    def write(self, key: StoreKey, data: bytes, served: State, wall: float) -> bool:
        """Take one write of ``data`` to the store ``key`` names (``mokkafs.writes.stores``),
        checked against ``served`` (the State as the writes so far make it). False: it
        changes nothing (the value it has). Raises ``WriteRefused``, and then nothing
        changes."""
        store = stores.STORES.get(key.name)
        asked = Asked(key, stores.text(data), served, tuple(self.writes), self.dynids, wall)
        if store is None:
            raise asked.refused()
        edit = store.take(asked)
        if edit is None:
            return False
        for ended in edit.end:
            self.writes.pop(ended, None)
        for bdf, attribute, value in edit.keep:
            self._keep(bdf, attribute, value, wall)
        if edit.ids is not None:
            self.dynids = edit.ids
        self.taken += edit.taken
        if edit.probe:
            self._appeared(served, wall)
        return True

    def _appeared(self, served: State, wall: float) -> None:
        """The functions the writes so far make appear (VFs, functions a rescan brought
        back) probed as the bus probes a new device: where the driver order and the dynamic
        IDs give another driver than the one the function comes with, that binding is kept
        (``mokkafs.writes.dynids``)."""
        if self.base is None:
            return
        there = {fn.bdf for fn in served.functions}
        made = self.merge(self.base)
        for fn in made.functions:
            if fn.bdf in there or (fn.physfn is not None and not fn.driver):
                continue  # a VF made while autoprobe was off is not probed
            fresh = replace(fn, driver="", native_driver=dynids.native(fn))
            driver = dynids.probe(fresh, made, self.dynids)
            if driver != fn.driver:
                self._keep(fn.bdf, "driver", driver, wall)

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
            attr = stores.kept(w.attribute)
            assert attr is not None  # (a restored write's attribute is checked: serve.record)
            if attr.phase != step:
                continue
            try:
                fn = state.function(w.bdf)
            except KeyError:
                fn = None
            why = None
            if fn is None:
                why = f"{w.bdf} is gone"
            elif not attr.fits(fn):
                why = f"{w.bdf} has no {w.attribute}"
            else:
                why = attr.stale(state, fn, w.value)
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
