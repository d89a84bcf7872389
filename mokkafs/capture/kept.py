"""A captured PCI function as the profile keeps it (``pci_functions``: ``mokkafs.profile.
sections.raw_functions``): its attributes' text and its config space, verbatim."""

from __future__ import annotations

from typing import Any

from mokkafs.capture.pci import Function


def entry(fn: Function) -> dict[str, Any]:
    config = fn.config.rstrip(b"\0")
    out: dict[str, Any] = {"bdf": fn.bdf, "root": fn.root}
    if fn.parent is not None:
        out["parent"] = fn.parent
    if fn.driver:
        out["driver"] = fn.driver
    if fn.iommu_group is not None:
        out["iommu_group"] = fn.iommu_group
    out["attributes"] = dict(sorted(fn.attributes.items()))
    out["config"] = config.hex()
    out["config_size"] = len(fn.config)
    if fn.vpd:
        out["vpd"] = fn.vpd.hex()
    return out
