"""One capture: a machine's tree below a root -> a profile document and its notes.

PCI functions mokkafs can make itself (GPUs, NVSwitches, ConnectX HCAs and the root ports and
switches above them, ``mokkafs.capture.layout``) are described by the sections that make them,
so the view keeps serving their driver's files; the profile is then compiled and every
function it makes is compared with the captured one. One whose attributes or config space
differ keeps the captured ones in an override (``pci_functions``, ``overrides: true``); one
they put elsewhere is kept verbatim (``pci_functions``), as is every other function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mokkafs.capture import ident, kept, layout, numa
from mokkafs.capture.guarded import Root
from mokkafs.capture.notes import Notes
from mokkafs.capture.pci import Function, functions
from mokkafs.capture.reader import Unreadable
from mokkafs.model.sysfs import PCI_BUS, SYS_DEVICES


@dataclass
class Capture:
    doc: dict[str, Any]
    notes: Notes
    described: int  # functions the profile's sections make
    kept: int  # functions kept verbatim
    overridden: int = 0  # described functions that keep their captured attributes


def _roots(root: Root, fns: list[Function]) -> list[dict[str, Any]]:
    out = []
    for rc in sorted({fn.root for fn in fns}):
        entry: dict[str, Any] = {"id": rc}
        try:
            cpus = root.text(f"{SYS_DEVICES}/{rc}/{PCI_BUS}/{rc[3:]}/cpulistaffinity")
            if cpus:
                entry["cpu_affinity"] = cpus
        except Unreadable:
            pass
        nodes = {fn.number("numa_node", -1) for fn in fns if fn.root == rc}
        entry["numa_node"] = min(nodes) if len(nodes) == 1 else -1
        out.append(entry)
    return out


def node_name_of(root: Root, given: str | None) -> str:
    if given:
        return given
    for path in ("proc/sys/kernel/hostname", "etc/hostname"):
        try:
            name = root.text(path).strip()
        except Unreadable:
            continue
        if name and "\n" not in name:
            return name
    return "captured"


def capture(root: Root, node_name: str | None) -> Capture:
    notes = Notes()
    arch = ident.arch(root)
    fns = functions(root, notes)
    doc: dict[str, Any] = {"description": "captured by mokkafs capture"}
    system: dict[str, Any] = {"num_devices": 0}
    system.update(ident.driver(root, notes))
    doc["system"] = system
    doc["pcie_topology"] = {"root_complexes": _roots(root, fns),
                            "iommu": any(fn.iommu_group is not None for fn in fns)}
    doc["platform"] = ident.platform(root, arch, notes)
    shape = numa.machine(root, arch, notes)
    if shape is not None:
        doc["machine"] = shape
    majors = ident.proc_devices(root)
    if majors:
        doc["proc_devices"] = majors
    name = node_name_of(root, node_name)
    doc["node"] = {"name": name}
    described = layout.describe(root, fns, doc, name, notes)
    rest = [fn for fn in fns if fn.bdf not in described]
    overrides = doc.pop("pci_functions", [])
    if rest or overrides:
        doc["pci_functions"] = sorted(overrides + [kept.entry(fn) for fn in rest],
                                      key=lambda e: str(e["bdf"]))
    for late in root.stalled:  # lookups ``kind`` took as absent
        notes.add(f"paths taken as absent: {late.reason}", late.path)
    return Capture(doc, notes, len(described), len(rest), len(overrides))
