"""The machine's DMI identity (drivers/firmware/dmi-id.c): ``sys/devices/virtual/dmi/id`` and
``sys/class/dmi/id`` linking to it, from the profile's ``platform``.

An attribute exists only for a field the firmware fills (an empty profile field has no file);
each reads as its text plus a newline. Serial numbers and the UUID are readable by root only
(0400), as the kernel makes them. ``modalias`` strings the fields together, each through the
kernel's ``ascii_filter`` (no spaces, no colons), in the kernel's fixed order. GPU Feature
Discovery labels ``nvidia.com/gpu.machine`` from ``product_name``.

The view's DMI replaces the host's, so a container sees the simulated machine even where the
host has none (VMs, Docker Desktop).
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import Platform, State
from mokkafs.surfaces import power
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

VIRTUAL = "sys/devices/virtual/dmi"  # the host's, if any, is replaced
DEVICE = f"{VIRTUAL}/id"
DMI_CLASS = "sys/class/dmi"

# (attribute, Platform field, modalias prefix or None), in dmi-id.c's order
FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("bios_vendor", "bios_vendor", "bvn"),
    ("bios_version", "bios_version", "bvr"),
    ("bios_date", "bios_date", "bd"),
    ("bios_release", "bios_release", "br"),
    ("sys_vendor", "sys_vendor", "svn"),
    ("product_name", "product_name", "pn"),
    ("product_version", "product_version", "pvr"),
    ("product_serial", "product_serial", None),
    ("product_uuid", "product_uuid", None),
    ("product_family", "product_family", None),
    ("product_sku", "product_sku", "sku"),
    ("board_vendor", "board_vendor", "rvn"),
    ("board_name", "board_name", "rn"),
    ("board_version", "board_version", "rvr"),
    ("board_serial", "board_serial", None),
    ("chassis_vendor", "chassis_vendor", "cvn"),
    ("chassis_type", "chassis_type", "ct"),
    ("chassis_version", "chassis_version", "cvr"),
    ("chassis_serial", "chassis_serial", None),
)
ROOT_ONLY = frozenset({"product_serial", "product_uuid", "board_serial", "chassis_serial"})
# modalias order (dmi_scan.c's dmi_get_modalias): bios, system, board, chassis, then sku
MODALIAS_ORDER = ("bvn", "bvr", "bd", "br", "svn", "pn", "pvr", "rvn", "rn", "rvr", "cvn", "ct",
                  "cvr", "sku")


def _values(platform: Platform) -> dict[str, str]:
    out = {}
    for attr, field, _ in FIELDS:
        value = str(getattr(platform, field))
        if value:
            out[attr] = value
    return out


def ascii_filter(value: str) -> str:
    """What the kernel keeps of a field in ``modalias``: printable ASCII but space and ':'."""
    return "".join(c for c in value if " " < c < "\x7f" and c != ":")


def modalias(platform: Platform) -> str:
    values = _values(platform)
    prefix = {p: attr for attr, _, p in FIELDS if p}
    parts = [f"{p}{ascii_filter(values[prefix[p]])}" for p in MODALIAS_ORDER
             if prefix[p] in values]
    return "dmi:" + "".join(f"{part}:" for part in parts)


def nodes(state: State) -> Iterator[Node]:
    yield Dir(VIRTUAL)
    yield Dir(DEVICE)
    for attr, value in _values(state.platform).items():
        yield text(f"{DEVICE}/{attr}", value, 0o400 if attr in ROOT_ONLY else 0o444)
    alias = modalias(state.platform)
    yield text(f"{DEVICE}/modalias", alias)
    yield File(f"{DEVICE}/uevent", f"MODALIAS={alias}\n".encode(), 0o644)
    yield from power.of_class_device(DEVICE)
    yield relative_link(f"{DEVICE}/subsystem", DMI_CLASS)
    yield Dir(DMI_CLASS)
    yield relative_link(f"{DMI_CLASS}/id", DEVICE)


SURFACE = stateless("dmi", nodes, ("platform",), (kernel(VIRTUAL), kernel(DMI_CLASS)))
