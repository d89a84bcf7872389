"""A device's ``power/`` directory (drivers/base/power/sysfs.c), as the kernel gives one to a
PCI function and to a class device."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass

from mokkafs import counters
from mokkafs.state import State
from mokkafs.tree.nodes import Dir, File, Node, text


@dataclass(frozen=True, slots=True)
class ActiveMilliseconds:
    """``power/runtime_active_time``: milliseconds the device has been active, i.e. since
    the node started (a value, so unchanged devices compare equal across builds)."""

    started_at: float
    quantum: float

    def __call__(self, now: float) -> bytes:
        return f"{int(counters.elapsed(now, self.started_at, self.quantum) * 1000)}\n".encode()


def of_pci_function(d: str, state: State) -> Iterator[Node]:
    """The PCI core forbids runtime power management of a function (control "on"), so it
    has been active since it was found."""
    yield Dir(f"{d}/power")
    yield text(f"{d}/power/control", "on", 0o644)
    yield text(f"{d}/power/runtime_status", "active")
    yield File(f"{d}/power/runtime_active_time",
               ActiveMilliseconds(state.started_at, state.counter_quantum),
               quantum=state.counter_quantum)
    yield text(f"{d}/power/runtime_suspended_time", 0)
    yield File(f"{d}/power/autosuspend_delay_ms", b"", 0o644, error=errno.EIO)  # not in use


def of_class_device(d: str) -> Iterator[Node]:
    """A class device (a PCI bus, DMI, a misc device) keeps runtime PM's defaults:
    allowed, and disabled, so "unsupported"."""
    yield Dir(f"{d}/power")
    yield text(f"{d}/power/control", "auto", 0o644)
    yield text(f"{d}/power/runtime_status", "unsupported")
    yield text(f"{d}/power/runtime_active_time", 0)
    yield text(f"{d}/power/runtime_suspended_time", 0)
    yield File(f"{d}/power/autosuspend_delay_ms", b"", 0o644, error=errno.EIO)
