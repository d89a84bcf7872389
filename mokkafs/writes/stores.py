"""Every kept attribute the view takes writes of, by name: the SR-IOV ones
(``mokkafs.writes.attributes``) and the bindings (``mokkafs.writes.drivers``)."""

from __future__ import annotations

from mokkafs.writes import attributes, drivers
from mokkafs.writes.attributes import Attribute

KEPT: dict[str, Attribute] = {**attributes.ATTRIBUTES, **drivers.ATTRIBUTES}


def writable(directory: str, name: str) -> bool:
    """Whether the file ``directory/name`` has a store the view simulates."""
    return name in KEPT or drivers.is_bus_store(directory, name)
