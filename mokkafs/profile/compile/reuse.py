"""Reusing the last compile's PCI side.

Compiling runs on every profile change. The PCI side (host bridges, functions, addresses, the
HCAs' places and names) depends on the profile without its HCA-only settings (``HCA_ONLY``:
firmware, rates, traffic, ...) and its faults, and on the node. A change of those alone reuses
the last compile's PCI side, which a ``PciCache`` keeps: the caller owns it (the compiling
process keeps one for its life) and hands it to each compile."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from mokkafs.model.bdf import Bdf
from mokkafs.profile.schema import InfiniBand, Profile
from mokkafs.state import Machine, PciFunction, RootComplex

# The InfiniBand settings that place no function, bus or address: the PCI side of a profile
# never sees them, so a swap that changes only these (firmware, rates, traffic) or the faults
# reuses the last compile's PCI side. ``infiniband.check`` reads some of them; it runs on every
# compile.
HCA_ONLY = ("fw_version", "hw_rev", "board_id", "node_desc_template", "rate_gbps", "port_state",
            "phys_state", "guid_prefix", "ports_per_hca", "gid_table_len", "pkey_table_len",
            "traffic", "ofed_version")
_HCA_DEFAULTS = {name: InfiniBand.model_fields[name].get_default(call_default_factory=True)
                 for name in HCA_ONLY}

Key = tuple[Profile, object, str, bool]  # the PCI profile, its set fields, node, IB served


@dataclass(frozen=True)
class PciSide:
    """What a profile's PCI devices compile to: the host bridges, every function, and the
    HCAs' addresses and names."""

    roots: tuple[RootComplex, ...]
    machine: Machine
    functions: tuple[PciFunction, ...]
    hca_bdfs: tuple[Bdf, ...]
    hca_names: tuple[str, ...]


class PciCache:
    """The last PCI side compiled, with what it was compiled from: one entry, replaced whole
    (a compile abandoned in one thread while the next runs in another at worst misses it)."""

    def __init__(self) -> None:
        self.last: tuple[Key, PciSide] | None = None

    def get(self, key: Key) -> PciSide | None:
        last = self.last
        return last[1] if last is not None and last[0] == key else None

    def put(self, key: Key, side: PciSide) -> None:
        self.last = key, side


def pci_profile(profile: Profile) -> Profile:
    """What the PCI side may see: the profile without its HCA-only settings and its faults."""
    return profile.model_copy(update={
        "infiniband": profile.infiniband.model_copy(update=_HCA_DEFAULTS), "faults": []})


def key_of(pci: Profile, node_name: str, ib_served: bool) -> Key:
    """What a PCI side is compiled from: ``pci`` (a ``pci_profile``) and the node."""
    return pci, set_fields(pci), node_name, ib_served


def set_fields(value: object) -> object:
    """Which fields of every model in ``value`` the document set. Pydantic's equality leaves
    this out, and it matters: a GPU's own ``pcie: {}`` overrides ``device_defaults`` where
    leaving the key out does not (``devices.gpus``)."""
    if isinstance(value, BaseModel):
        names = sorted(value.model_fields_set)
        return tuple((name, set_fields(getattr(value, name))) for name in names)
    if isinstance(value, list | tuple):
        return tuple(set_fields(item) for item in value)
    if isinstance(value, dict):
        return tuple((key, set_fields(item)) for key, item in value.items())
    return None
