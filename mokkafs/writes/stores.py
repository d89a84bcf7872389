"""Every kept attribute the view takes writes of, by name: the SR-IOV ones
(``mokkafs.writes.attributes``) and the bindings (``mokkafs.writes.drivers``)."""

from __future__ import annotations

from mokkafs.model.sysfs import REMOVE, RESCAN
from mokkafs.writes import attributes, drivers, hotplug
from mokkafs.writes.attributes import Attribute

KEPT: dict[str, Attribute] = {**attributes.ATTRIBUTES, **drivers.ATTRIBUTES,
                              **hotplug.ATTRIBUTES}


def phase(attribute: str) -> int:
    """When a kept write applies: the SR-IOV ones, then (once the VFs are made) bindings,
    then removals."""
    return 2 if attribute in hotplug.ATTRIBUTES else 1 if attribute in drivers.KEYED else 0


def writable(directory: str, name: str) -> bool:
    """Whether the file ``directory/name`` has a store the view simulates."""
    if name in (REMOVE, RESCAN):
        return hotplug.is_store(directory, name)
    return name in KEPT or drivers.is_bus_store(directory, name)
