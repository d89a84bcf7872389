"""The one registry of the stores the view simulates, by the name in their key
(``mokkafs.model.sysfs.StoreKey``, made by the surface that serves the file).

A store's ``take`` reads one write (``Asked``: the text, checked against the State served and
the writes kept so far) and says what it does to the writes book: an ``Edit`` (None: it changes
nothing), which ``WriteBook.write`` makes; or it raises ``WriteRefused`` with the kernel's
errno. A kept attribute (one whose value the book keeps by function, and applies over each new
State) also has ``Kept``: ``apply`` (what the value does to a State), ``phase`` (when, in
``WriteBook.merge``: the SR-IOV ones; once the VFs are made, bindings; then removals), ``fits``
(whether a function has it) and ``stale`` (why a value no longer applies to a new State).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass

from mokkafs.model.sysfs import REMOVE, RESCAN, StoreKey
from mokkafs.state import PciFunction, State
from mokkafs.writes import attributes, drivers, dynids, hotplug
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.drivers import Change
from mokkafs.writes.dynids import DynIds

Key = tuple[str, str]  # a kept write's: (function, attribute)
MAX_STORE = 4096  # kernfs hands a store at most a page


def text(data: bytes) -> str:
    """What a store reads of the bytes written: a page at most, one character a byte (sysfs
    attributes are bytes; latin-1 keeps each byte one character)."""
    return data[:MAX_STORE].decode("latin-1")


@dataclass(frozen=True)
class Asked:
    """One write: ``text`` (its bytes, one character a byte) to the store ``key`` names, with
    the State ``served``, the keys of the writes ``kept`` (in the order written), the drivers'
    dynamic ``ids`` and the ``wall`` clock at the write."""

    key: StoreKey
    text: str
    served: State
    kept: tuple[Key, ...]
    ids: DynIds
    wall: float

    def function(self) -> PciFunction | None:
        """The function holding the store (None: no function does)."""
        try:
            return self.served.function(self.key.holder)
        except KeyError:
            return None

    def refused(self) -> WriteRefused:
        return WriteRefused(errno.EACCES, f"{self.key.holder}/{self.key.name} cannot be written")


@dataclass(frozen=True)
class Edit:
    """What a write does to the book: the kept writes it ``end``s, then those it ``keep``s (in
    order: each is one write taken); the drivers' dynamic ``ids`` after it (None: as they
    were); ``taken``, the writes it counts besides those it keeps; ``probe``: the functions
    the writes make appear are probed (``WriteBook._appeared``)."""

    end: tuple[Key, ...] = ()
    keep: tuple[Change, ...] = ()
    ids: DynIds | None = None
    taken: int = 0
    probe: bool = False


def _any(fn: PciFunction) -> bool:
    return True


def _fresh(state: State, fn: PciFunction, value: str) -> str | None:
    return None


@dataclass(frozen=True)
class Kept:
    """A kept attribute: ``apply(state, bdf, value)`` -> the State with it (the function
    exists and ``fits``); ``phase``; ``fits(function)``; ``stale(state, function, value)``."""

    apply: Callable[[State, str, str], State]
    phase: int
    fits: Callable[[PciFunction], bool] = _any
    stale: Callable[[State, PciFunction, str], str | None] = _fresh


@dataclass(frozen=True)
class Attribute:
    """A store: ``take(asked)`` -> its ``Edit``; ``kept`` for a kept attribute."""

    take: Callable[[Asked], Edit | None]
    kept: Kept | None = None


Parse = Callable[[str, PciFunction], str | None]  # -> the value to keep (None: no change)
Ends = Callable[[Asked, PciFunction], tuple[Key, ...]]


def _nothing(asked: Asked, fn: PciFunction) -> tuple[Key, ...]:
    return ()


def _kept(kept: Kept, parse: Parse, ends: Ends = _nothing, probe: bool = False) -> Attribute:
    """A function's kept attribute: its holder is the function (it exists and ``fits``, else
    EACCES); ``parse`` gives the value kept; the kept writes that ``ends`` names end first."""

    def take(asked: Asked) -> Edit | None:
        fn = asked.function()
        if fn is None or not kept.fits(fn):
            raise asked.refused()
        value = parse(asked.text, fn)
        if value is None:
            return None
        return Edit(end=ends(asked, fn), keep=((fn.bdf, asked.key.name, value),), probe=probe)

    return Attribute(take, kept)


def vfs_end(asked: Asked, pf: str) -> tuple[Key, ...]:
    """The kept writes that end as ``pf``'s VFs go (SR-IOV disabled: by 0 to
    ``sriov_numvfs``, or by its driver's remove when it is unbound): theirs, and its count."""
    vfs = {fn.bdf for fn in asked.served.functions if fn.physfn == pf}
    return tuple(k for k in asked.kept if k[0] in vfs or (k == (pf, "sriov_numvfs") and vfs))


def _below(asked: Asked, fn: PciFunction) -> tuple[Key, ...]:
    """A removal's: the writes of the functions that go with it."""
    gone = hotplug.below(asked.served, fn.bdf)
    return tuple(k for k in asked.kept if k[0] in gone)


BusStore = Callable[[str, PciFunction, State, DynIds], list[Change]]


def _bus(store: BusStore) -> Attribute:
    """A bus file whose target is the function written to it; an unbound PF's VFs go."""

    def take(asked: Asked) -> Edit | None:
        fn = drivers.named(asked.text, asked.served)
        changes = store(asked.key.holder, fn, asked.served, asked.ids)
        if not changes:
            return None
        end = tuple(k for target, _, to in changes if not to for k in vfs_end(asked, target))
        return Edit(end=end, keep=tuple(changes))

    return Attribute(take)


def _loaded(asked: Asked) -> str:
    """The driver whose ID table a store changes (EACCES: it is not loaded)."""
    if asked.key.holder not in asked.served.pci_drivers:
        raise asked.refused()
    return asked.key.holder


def _new_id(asked: Asked) -> Edit:
    driver = _loaded(asked)
    dynid, attach = dynids.new_id(driver, asked.text, asked.served, asked.ids, asked.wall)
    ids = {**asked.ids, driver: (*asked.ids.get(driver, ()), dynid)}
    return Edit(keep=tuple((bdf, "driver", driver) for bdf in attach), ids=ids, taken=1)


def _remove_id(asked: Asked) -> Edit:
    return Edit(ids=dynids.remove_id(_loaded(asked), asked.text, asked.ids), taken=1)


def _rescan(asked: Asked) -> Edit | None:
    """The removed functions it reaches come back: their removals end."""
    removed = [k[0] for k in asked.kept if k[1] == REMOVE]
    back = hotplug.rescan(asked.key.holder, asked.text, asked.served, removed)
    return Edit(end=tuple((bdf, REMOVE) for bdf in back), taken=1, probe=True) if back else None


def _direct(asked: Asked) -> Edit | None:
    raise asked.refused()


STORES: dict[str, Attribute] = {
    "sriov_numvfs": _kept(Kept(attributes.apply_numvfs, 0, attributes.is_pf,
                               attributes.too_many), attributes.numvfs,
                          lambda asked, fn: vfs_end(asked, fn.bdf), probe=True),
    "sriov_drivers_autoprobe": _kept(Kept(attributes.apply_autoprobe, 0, attributes.is_pf),
                                     attributes.autoprobe),
    "driver_override": _kept(Kept(drivers.apply_override, 1), drivers.override),
    # a link: its binding is written through a driver's bind and unbind
    "driver": Attribute(_direct, Kept(drivers.apply_driver, 1, stale=drivers.gone)),
    REMOVE: _kept(Kept(hotplug.apply_remove, 2), hotplug.remove, _below),
    "bind": _bus(drivers.bind),
    "unbind": _bus(drivers.unbind),
    "drivers_probe": _bus(drivers.drivers_probe),
    "new_id": Attribute(_new_id),
    "remove_id": Attribute(_remove_id),
    RESCAN: Attribute(_rescan),
}


def kept(name: str) -> Kept | None:
    """The kept attribute of that name (None: no store of that name keeps a value)."""
    store = STORES.get(name)
    return None if store is None else store.kept
