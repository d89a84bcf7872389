"""Hot-unplug and rescan by writes (drivers/pci/pci-sysfs.c ``remove_store``,
``dev_rescan_store``, ``rescan_store``): a removed function is kept as the write
(function, ``remove``); a rescan forgets it, and the function comes back as the profile has it.

- ``<function>/remove``: ``kstrtoul(buf, 0)``, else EINVAL; 0 does nothing. Non-zero removes
  the function, every function below it (a bridge's buses) and its VFs, with their RDMA
  devices; their other writes end with them, as their ``pci_dev`` does.
- ``/sys/bus/pci/rescan``: non-zero brings every removed function back.
- ``<function>/rescan``: non-zero rescans the bus the function is on, and the buses below it:
  the removed functions there come back.
- ``pci_bus/<dddd:bb>/rescan`` (``rescan_store`` of the bus class): that bus and those below.
- A function that comes back is probed afresh: its driver is the profile's, it has no
  override and no VFs, as a new ``pci_dev`` has none.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from dataclasses import replace

from mokkafs.model.bdf import BUS_TEXT
from mokkafs.state import PciFunction, State
from mokkafs.writes.attributes import WriteRefused, kstrtoul

ULONG = (1 << 64) - 1


def asked(text: str) -> bool:
    """Whether the store asks for it: ``kstrtoul`` non-zero (raises EINVAL if malformed)."""
    return kstrtoul(text, ULONG) != 0


def _bus(bdf: str) -> tuple[str, int]:
    return bdf[:4], int(bdf[5:7], 16)


def _span(fn: PciFunction) -> tuple[str, int, int] | None:
    """The buses below a bridge: (domain, secondary, subordinate)."""
    if fn.bridge is None:
        return None
    return fn.bdf[:4], fn.bridge.secondary, fn.bridge.subordinate


def _within(bdf: str, span: tuple[str, int, int]) -> bool:
    domain, bus = _bus(bdf)
    return domain == span[0] and span[1] <= bus <= span[2]


def below(state: State, bdf: str) -> set[str]:
    """``bdf``, the functions on the buses below it, and the VFs of any of them."""
    fn = state.function(bdf)
    span = _span(fn)
    gone = {bdf} | ({f.bdf for f in state.functions if _within(f.bdf, span)} if span else set())
    return gone | {f.bdf for f in state.functions if f.physfn in gone}


def rescanned(state: State, holder: str) -> tuple[str, int, int] | None:
    """The buses a rescan through ``holder``'s ``rescan`` reaches: the bus a function is on,
    or the bus named ``dddd:bb``, and those below (None: every bus, the bus-wide rescan)."""
    if holder == "pci":
        return None
    if BUS_TEXT.fullmatch(holder):  # a bus's own rescan: the bridge whose secondary it is
        domain, bus = holder[:4], int(holder[5:], 16)
        for f in state.functions:
            if f.bridge is not None and f.bdf[:4] == domain and f.bridge.secondary == bus:
                return domain, bus, f.bridge.subordinate
        return domain, bus, 0xFF  # a root bus
    fn = state.function(holder)
    parent = state.function(fn.parent) if fn.parent else None
    domain, bus = _bus(fn.bdf)
    if parent is not None and parent.bridge is not None:
        return domain, bus, parent.bridge.subordinate
    return domain, bus, 0xFF


def reached(bdf: str, span: tuple[str, int, int] | None) -> bool:
    return span is None or _within(bdf, span)


def without(state: State, bdf: str) -> State:
    """``state`` with the function at ``bdf`` removed, and all that goes with it."""
    gone = below(state, bdf)
    return replace(state, functions=tuple(f for f in state.functions if f.bdf not in gone),
                   hcas=tuple(h for h in state.hcas if h.bdf not in gone))


def remove(text: str, fn: PciFunction) -> str | None:
    """What a store to ``remove`` keeps: "1", or None for 0 (it does nothing)."""
    return "1" if asked(text) else None


def apply_remove(state: State, bdf: str, value: str) -> State:
    return without(state, bdf)


def rescan(holder: str, text: str, served: State, removed: Iterable[str]) -> list[str]:
    """Of the ``removed`` functions, those a store to ``holder``'s ``rescan`` brings back
    (EACCES: ``holder`` is neither the bus type, a bus nor a function)."""
    if holder != "pci" and not BUS_TEXT.fullmatch(holder) \
            and holder not in {fn.bdf for fn in served.functions}:
        raise WriteRefused(errno.EACCES, f"{holder}/rescan cannot be written")
    if not asked(text):
        return []
    span = rescanned(served, holder)
    return [bdf for bdf in removed if reached(bdf, span)]
