"""Driver binding by writes, as the kernel's driver core and PCI bus do it.

A binding is kept as a write keyed by (function, ``driver``): its value is the driver bound,
or empty for none. A function's override is kept as (function, ``driver_override``). The
bus files name their target in what is written: ``drivers/<driver>/{bind,unbind}`` and
``drivers_probe`` take a BDF (``named``), and ``bind``, ``unbind`` and ``drivers_probe`` turn
one such store into the kept writes.

The kernel's rules (drivers/base/bus.c ``bind_store``, ``unbind_store``,
``drivers_probe_store``; drivers/base/driver.c ``driver_set_override``; drivers/pci/pci-driver.c
``pci_match_device``):

- A BDF is matched as ``sysfs_streq`` does: one trailing newline allowed.
- ``bind``: ENODEV unless the BDF is a function the driver matches; EBUSY if it has a driver.
- ``unbind``: ENODEV unless the BDF is a function bound to that driver.
- ``drivers_probe``: ENODEV for no such function; a bound function, or one no loaded driver
  matches, is left as it is, and the write succeeds.
- A driver matches a function as ``pci_match_device`` decides (``mokkafs.writes.dynids``):
  the override, the driver's dynamic IDs, its static table.
- ``driver_override``: the text up to a NUL, cut at its first newline; empty clears it.
  A store of a page or more is EINVAL.
- ``new_id`` and ``remove_id``: ``mokkafs.writes.dynids``; the IDs are kept, and a function
  that appears later is probed against them.
- vfio-pci binds only a function in an IOMMU group (EINVAL otherwise, as
  ``vfio_pci_core_register_device`` fails without one).

An unbound HCA function loses its RDMA device and its netdev, as mlx5's remove takes them.
Unbinding a PF with VFs is never refused: mlx5_core's remove (``remove_one`` calls
``mlx5_sriov_disable``; drivers/net/ethernet/mellanox/mlx5/core/main.c) disables SR-IOV
first, so the VFs go with their writes and ``sriov_numvfs`` reads 0; on the unbound PF a
store of another count is ENOENT (drivers/pci/iov.c ``sriov_numvfs_store``).
"""

from __future__ import annotations

import errno
from dataclasses import replace

from mokkafs.state import PciFunction, State
from mokkafs.writes import dynids
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.dynids import native

VFIO = "vfio-pci"
PAGE = 4096

Change = tuple[str, str, str]  # (function, kept attribute, value)


def named(text: str, served: State) -> PciFunction:
    """The function a bus file's store names (ENODEV: none)."""
    text = text.partition("\0")[0]
    name = text[:-1] if text.endswith("\n") else text
    try:
        return served.function(name)
    except KeyError:
        raise WriteRefused(errno.ENODEV, f"no PCI function {name[:16]!r}") from None


def _binding(fn: PciFunction, driver: str) -> Change:
    return (fn.bdf, "driver", driver)


def bind(driver: str, fn: PciFunction, served: State, ids: dynids.DynIds) -> list[Change]:
    """The kept writes a store of ``fn`` to ``driver``'s ``bind`` makes, with ``ids`` the
    drivers' dynamic IDs."""
    if driver not in served.pci_drivers or not dynids.matches(fn, driver, ids):
        raise WriteRefused(errno.ENODEV, f"{driver} does not match {fn.bdf}")
    if fn.driver:
        raise WriteRefused(errno.EBUSY, f"{fn.bdf} is bound to {fn.driver}")
    if not dynids.probes(fn, driver, served):
        raise WriteRefused(errno.EINVAL, f"{fn.bdf} is in no IOMMU group")
    return [_binding(fn, driver)]


def unbind(driver: str, fn: PciFunction, served: State, ids: dynids.DynIds) -> list[Change]:
    if fn.driver != driver:
        raise WriteRefused(errno.ENODEV, f"{fn.bdf} is not bound to {driver}")
    return [_binding(fn, "")]


def drivers_probe(bus: str, fn: PciFunction, served: State, ids: dynids.DynIds,
                  ) -> list[Change]:
    """The binding a store of ``fn`` to the bus's ``drivers_probe`` makes: none for a bound
    function, or one no loaded driver takes."""
    if fn.driver:
        return []
    driver = dynids.probe(fn, served, ids)
    return [_binding(fn, driver)] if driver else []


def override(text: str, fn: PciFunction) -> str | None:
    if len(text) >= PAGE - 1:
        raise WriteRefused(errno.EINVAL, "an override of a page or more")
    value = text.partition("\0")[0].partition("\n")[0]
    if value == (fn.driver_override or ""):
        return None
    return value


def _edit(state: State, bdf: str, **fields: str | None) -> State:
    def edit(fn: PciFunction) -> PciFunction:
        if fn.bdf != bdf:
            return fn
        return replace(fn, native_driver=native(fn), **fields)  # type: ignore[arg-type]
    return replace(state, functions=tuple(edit(fn) for fn in state.functions))


def apply_override(state: State, bdf: str, value: str) -> State:
    return _edit(state, bdf, driver_override=value or None)


def apply_driver(state: State, bdf: str, value: str) -> State:
    state = _edit(state, bdf, driver=value)
    if value != "mlx5_core":  # mlx5 makes the RDMA device and the netdev as it probes
        state = replace(state, hcas=tuple(h for h in state.hcas if h.bdf != bdf))
    return state


def refuse_direct(text: str, fn: PciFunction) -> str | None:
    # ``driver`` is a link: a binding is written through the driver's bind and unbind
    raise WriteRefused(errno.EACCES, f"{fn.bdf}/driver cannot be written")


def gone(state: State, fn: PciFunction, value: str) -> str | None:
    """Why a kept binding no longer applies over ``state`` (None: it does)."""
    if value and value not in state.pci_drivers:
        return f"{value} is not loaded"
    return None
