"""The PCI functions of a captured machine, read from ``sys/bus/pci/devices``: where each
sits (its root complex and the bridges above it), its text attributes, its config space
(the whole of it as root; the 64-byte header an unprivileged read shows otherwise), its VPD,
driver and IOMMU group."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from mokkafs.capture.guarded import Root
from mokkafs.capture.notes import Notes
from mokkafs.capture.reader import PAGE, Unreadable
from mokkafs.model.bdf import BDF_TEXT
from mokkafs.model.sysfs import BUS_PCI_DEVICES, FUNCTION_WRITE_ONLY, HOST_BRIDGES, SYS_DEVICES

ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
UNPRIVILEGED_CONFIG = 64  # what the kernel shows a reader without CAP_SYS_ADMIN
# Files of a function's directory that are not attributes to keep: binary ones read apart,
# BAR and ROM windows (reading an I/O BAR does port I/O), write-only ones, and what a read
# changes or that the view makes itself.
SKIP = re.compile(r"^(config|vpd|rom|resource\d+(_wc|_resize)?|" + "|".join(FUNCTION_WRITE_ONLY)
                  + r"|new_id|remove_id|bind|unbind|sriov_vf_msix_count)$")
# Per-boot or per-read attributes: none at a function's top level; counters live in subdirs.


@dataclass
class Function:
    bdf: str
    root: str  # pciDDDD:BB
    chain: list[str]  # the bridges above it, from the root bus down
    attributes: dict[str, str] = field(default_factory=dict)
    config: bytes = b""
    vpd: bytes = b""
    driver: str | None = None
    iommu_group: int | None = None

    @property
    def parent(self) -> str | None:
        return self.chain[-1] if self.chain else None

    def attr(self, name: str, default: str = "") -> str:
        return self.attributes.get(name, default).strip()

    def number(self, name: str, default: int = 0) -> int:
        try:
            return int(self.attr(name), 0)
        except ValueError:
            return default


def _place(root: Root, bdf: str, notes: Notes) -> tuple[str, list[str], str] | None:
    """(root complex, bridges above, directory) of the function a bus link names."""
    try:
        parts = root.resolve(f"{BUS_PCI_DEVICES}/{bdf}")
    except Unreadable as exc:
        notes.add(f"PCI functions skipped: {exc.reason}", f"{BUS_PCI_DEVICES}/{bdf}")
        return None
    if len(parts) < 4 or parts[:2] != SYS_DEVICES.split("/") or not ROOT.fullmatch(parts[2]) \
            or parts[-1] != bdf or not all(BDF_TEXT.fullmatch(p) for p in parts[3:]):
        notes.add(f"PCI functions skipped: a bus link to no place below {HOST_BRIDGES}DDDD:BB",
                  f"{BUS_PCI_DEVICES}/{bdf}")
        return None
    return parts[2], parts[3:-1], "/".join(parts)


def _read_function(root: Root, bdf: str, where: tuple[str, list[str], str],
                   notes: Notes) -> Function:
    rc, chain, d = where
    fn = Function(bdf, rc, chain)
    try:
        entries = root.listdir(d)
    except Unreadable as exc:
        notes.add(f"PCI function directories unreadable: {exc.reason}", d)
        entries = []
    for entry in entries:
        path = f"{d}/{entry.name}"
        if entry.kind == "other":
            notes.add("entries skipped: a FIFO, device or socket where an attribute should be",
                      path)
        if entry.kind != "file" or SKIP.match(entry.name):
            continue
        if not re.fullmatch(r"[a-z0-9_]{1,64}", entry.name):
            notes.add("entries skipped: a name no attribute has", path)
            continue
        try:
            data = root.read(path)
        except Unreadable as exc:
            if "not permitted" not in exc.reason:  # write-only attributes are expected
                notes.add(f"PCI attributes skipped: {exc.reason}", path)
            continue
        try:
            fn.attributes[entry.name] = data.decode("utf-8")
        except UnicodeDecodeError:
            notes.add("PCI attributes skipped: not text", path)
    try:
        fn.config = root.read(f"{d}/config", PAGE)
        if len(fn.config) <= UNPRIVILEGED_CONFIG and os.geteuid() != 0:
            notes.add("config space beyond the 64-byte header: it needs root", d)
    except Unreadable as exc:
        notes.add(f"config space unreadable: {exc.reason}", f"{d}/config")
    if root.kind(f"{d}/vpd") == "file":
        try:
            fn.vpd = root.read(f"{d}/vpd", PAGE)
        except Unreadable as exc:
            notes.add(f"VPD not captured: {exc.reason}", f"{d}/vpd")
    for link in ("driver", "iommu_group"):
        if root.kind(f"{d}/{link}") == "link":
            try:
                name = root.readlink(f"{d}/{link}").rstrip("/").rsplit("/", 1)[-1]
            except Unreadable:
                continue
            if link == "driver":
                fn.driver = name
            elif name.isdigit():
                fn.iommu_group = int(name)
    return fn


def functions(root: Root, notes: Notes) -> list[Function]:
    """Every function ``sys/bus/pci/devices`` lists, in address order."""
    try:
        entries = root.listdir(BUS_PCI_DEVICES)
    except Unreadable as exc:
        notes.add(f"PCI functions not captured: {exc.reason}", BUS_PCI_DEVICES)
        return []
    out = []
    for entry in entries:
        if not BDF_TEXT.fullmatch(entry.name):
            notes.add("entries skipped: a name no PCI address has",
                      f"{BUS_PCI_DEVICES}/{entry.name}")
            continue
        where = _place(root, entry.name, notes)
        if where is not None:
            out.append(_read_function(root, entry.name, where, notes))
    return out
