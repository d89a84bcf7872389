"""Dynamic IDs: what ``/sys/bus/pci/drivers/<driver>/{new_id,remove_id}`` add to and take
from a driver's ID table, and the probe of a function that appears after them.

A driver's dynamic IDs are kept in the writes book (``WriteBook.dynids``), in the order
written; never in the profile. They end with the daemon's node (a reboot), survive a daemon
restart (serve/record.py, ``dynids``) and a profile swap where the driver is still loaded
(dropped with a log line where it is not).

The kernel's rules (drivers/pci/pci-driver.c ``new_id_store``, ``remove_id_store``,
``pci_add_dynid``, ``pci_match_device``, ``pci_match_one_device``):

- Fields are read as ``sscanf("%x %x %x %x %x %x %lx")`` does: hexadecimal, ``0x`` allowed,
  up to the first that is not; fewer than two is EINVAL. Subvendor and subdevice default to
  ``PCI_ANY_ID``, class and class mask to 0.
- ``new_id``: unless all seven fields are given, an ID the driver already matches (a dynamic
  ID or its static table, for a device with those IDs) is EEXIST. The seventh field
  (``driver_data``) must be one the driver's table has (0; mlx5_core's VF entries have 1),
  else EINVAL. The ID joins the end of the list, and the driver is attached to every unbound
  function it now matches (``driver_attach``).
- ``remove_id``: vendor and device, optional subvendor, subdevice, class and class mask; the
  first dynamic ID with that vendor and device (and subvendor and subdevice unless ANY, and
  class under the written mask) is removed; ENODEV if none. Functions already bound stay so.
- The kernel bounds a driver's list by memory alone; mokkafs keeps ``MAX_DYNIDS`` a driver
  (a ``new_id`` past them is ENOSPC), so that every list it keeps, and the state file that
  keeps them, stays small to serve and to read back.
- A driver matches a function (``pci_match_device``): an override naming another driver
  rules it out; then the dynamic IDs; then the static table (the profile's binding; mlx5_core
  for any Mellanox function); an override naming the driver matches on its own.

Driver order: a function that appears later (a VF ``sriov_numvfs`` makes while autoprobe is
on, a function a rescan brings back) is probed as the bus does (``__device_attach``): the
drivers in the order they registered, the first that matches and whose probe takes it wins.
Registration order is the State's ``pci_drivers`` order, which sorts ``vfio-pci`` after
``mlx5_core`` and ``nvidia``, as on a node that loads vfio-pci after the boot's drivers. So a
vfio-pci ID for a VF of a ConnectX PF does not take it: mlx5_core, first, claims it.
``drivers_probe`` of an unbound function probes the same way.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass, field

from mokkafs.state import PciFunction, State
from mokkafs.writes.attributes import WriteRefused

ANY = 0xFFFFFFFF  # PCI_ANY_ID
U32 = 0xFFFFFFFF
MELLANOX = 0x15B3
DRIVER_DATA = {"mlx5_core": (0, 1)}  # driver_data values the static tables hold (else 0)
MAX_DYNIDS = 256  # a driver's dynamic IDs, at most (the kernel's bound is its memory)
HEX = re.compile(r"\s*([+-]?(?:0[xX])?[0-9a-fA-F]+)")


@dataclass(frozen=True)
class DynId:
    vendor: int
    device: int
    subvendor: int = ANY
    subdevice: int = ANY
    cls: int = 0
    mask: int = 0
    data: int = 0
    at: float = field(default=0.0, compare=False)  # the wall clock at the write

    def text(self) -> str:
        """As kept and listed: the seven fields, in the form ``new_id`` takes them."""
        return " ".join(f"{v:x}" for v in (self.vendor, self.device, self.subvendor,
                                            self.subdevice, self.cls, self.mask, self.data))

    def claims(self, fn: PciFunction) -> bool:
        return self.claims_ids(fn.vendor, fn.device, fn.subsystem_vendor,
                               fn.subsystem_device, fn.class_code)

    def claims_ids(self, vendor: int, device: int, subvendor: int, subdevice: int,
                   cls: int) -> bool:
        """``pci_match_one_device`` for a device with these IDs."""
        return (self.vendor in (ANY, vendor) and self.device in (ANY, device)
                and self.subvendor in (ANY, subvendor) and self.subdevice in (ANY, subdevice)
                and (self.cls ^ cls) & self.mask == 0)


DynIds = dict[str, tuple[DynId, ...]]  # driver -> its dynamic IDs, in the order written


def scan(text: str, most: int) -> list[int]:
    """``sscanf`` with ``most`` ``%x`` conversions: the values read before the first that
    is not one."""
    values: list[int] = []
    pos = 0
    while len(values) < most:
        m = HEX.match(text, pos)
        if m is None:
            break
        values.append(int(m.group(1), 16) & (U32 if len(values) < 6 else (1 << 64) - 1))
        pos = m.end()
    return values


def parse(text: str, most: int, at: float = 0.0) -> tuple[DynId, int]:
    """The ID a store of ``text`` names, and how many fields it gave (EINVAL under two)."""
    values = scan(text.partition("\0")[0], most)
    if len(values) < 2:
        raise WriteRefused(errno.EINVAL, "a vendor and a device ID are needed")
    v = [*values, *(ANY, ANY, 0, 0, 0)[len(values) - 2:]]
    return DynId(v[0], v[1], v[2], v[3], v[4], v[5], v[6], at=at), len(values)


def native(fn: PciFunction) -> str:
    """The driver the profile binds ``fn`` to, whatever writes did since."""
    return fn.native_driver if fn.native_driver is not None else fn.driver


def static(fn: PciFunction, driver: str) -> bool:
    """Whether ``driver``'s static ID table claims ``fn``: the profile's binding."""
    return driver == native(fn) or (driver == "mlx5_core" and fn.vendor == MELLANOX)


def matches(fn: PciFunction, driver: str, ids: DynIds) -> bool:
    """``pci_match_device``: the override, then the dynamic IDs, then the static table."""
    if fn.driver_override is not None:
        return fn.driver_override == driver
    return any(i.claims(fn) for i in ids.get(driver, ())) or static(fn, driver)


def probes(fn: PciFunction, driver: str, served: State) -> bool:
    """Whether ``driver``'s probe takes a function it matches (one whose probe fails lets
    the next driver try): vfio-pci's fails outside an IOMMU group."""
    return driver != "vfio-pci" or (served.iommu and fn.iommu_group is not None)


def probe(fn: PciFunction, served: State, ids: DynIds) -> str:
    """The driver a function that just appeared binds to (empty: none), in driver order."""
    for driver in served.pci_drivers:
        if matches(fn, driver, ids) and probes(fn, driver, served):
            return driver
    return ""


def _static_claims(driver: str, vendor: int, device: int, served: State) -> bool:
    """The static table, for a device no function is: mlx5_core's claims any Mellanox
    device; another driver's, the vendor and device of the functions the profile binds it."""
    if driver == "mlx5_core":
        return vendor == MELLANOX
    return any(static(fn, driver) and (fn.vendor, fn.device) == (vendor, device)
               for fn in served.functions if fn.physfn is None)


def new_id(driver: str, text: str, served: State, ids: DynIds, at: float,
           ) -> tuple[DynId, list[str]]:
    """The ID a ``new_id`` store adds to ``driver``'s, and the unbound functions it then
    attaches (raises ``WriteRefused``)."""
    dynid, fields = parse(text, 7, at)
    if len(ids.get(driver, ())) >= MAX_DYNIDS:
        raise WriteRefused(errno.ENOSPC, f"{driver} has {MAX_DYNIDS} dynamic IDs, as many as "
                           "mokkafs keeps a driver; remove_id one first")
    if fields != 7:  # the device a pci_dev with these IDs (cut to their widths) would be
        fake = (dynid.vendor & 0xFFFF, dynid.device & 0xFFFF, dynid.subvendor & 0xFFFF,
                dynid.subdevice & 0xFFFF, dynid.cls & 0xFFFFFF)
        if any(i.claims_ids(*fake) for i in ids.get(driver, ())) \
                or _static_claims(driver, fake[0], fake[1], served):
            raise WriteRefused(errno.EEXIST, f"{driver} already matches {dynid.text()}")
    if dynid.data not in DRIVER_DATA.get(driver, (0,)):
        raise WriteRefused(errno.EINVAL, f"{driver} has no ID with driver_data {dynid.data:x}")
    after = {**ids, driver: (*ids.get(driver, ()), dynid)}
    attach = [fn.bdf for fn in served.functions
              if not fn.driver and _can_probe(fn, served)
              and matches(fn, driver, after) and probes(fn, driver, served)]
    return dynid, attach


def _can_probe(fn: PciFunction, served: State) -> bool:
    """``pci_device_can_probe``: a VF of a PF whose autoprobe is off is probed only with an
    override."""
    if fn.physfn is None or fn.driver_override is not None:
        return True
    try:
        pf = served.function(fn.physfn)
    except KeyError:
        return True
    return pf.sriov is None or pf.sriov.autoprobe


def remove_id(driver: str, text: str, ids: DynIds) -> DynIds:
    """``ids`` without the first of ``driver``'s the store names (ENODEV: none)."""
    named, _ = parse(text, 6)
    kept = list(ids.get(driver, ()))
    for k, i in enumerate(kept):
        if (i.vendor, i.device) == (named.vendor, named.device) \
                and named.subvendor in (ANY, i.subvendor) \
                and named.subdevice in (ANY, i.subdevice) \
                and (i.cls ^ named.cls) & named.mask == 0:
            del kept[k]
            rest = {d: v for d, v in ids.items() if d != driver}
            return {**rest, driver: tuple(kept)} if kept else rest
    raise WriteRefused(errno.ENODEV, f"{driver} has no dynamic ID {named.text()}")
