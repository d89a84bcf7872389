"""The ``pci_functions`` entries with ``overrides: true`` (``mokkafs.profile.sections.
raw_functions``) -> the functions the other sections make, with the captured attributes'
text and config space in place of the made ones (``raw``, ``config``, ``vpd``) and the
captured IRQ, IOMMU group and ``driver_override`` (the State's, as a kept function's: writes
change it from there). The function keeps its kind, identity, place and NUMA node: it stays
a GPU, an HCA or a bridge, so every driver surface still serves it. An entry without ``vpd``
(a capture that could not read it, or dropped it) keeps the made VPD. Attributes another
surface serves in the same directory (a PF's ``sriov_*``) are left to that surface."""

from __future__ import annotations

from dataclasses import replace

from mokkafs.model.pci import LINK_GENERATIONS
from mokkafs.profile.problems import Problems
from mokkafs.profile.raw_pci import captured_override
from mokkafs.profile.sections.raw_functions import RawFunction
from mokkafs.state import PcieLink, PciFunction

SRIOV_OWNED = "sriov_"  # mokkafs.surfaces.sriov serves these from the State


def _irq(text: str | None, default: int) -> int:
    try:
        return int((text or "").strip(), 10)
    except ValueError:
        return default


def _link(attrs: dict[str, str], made: PcieLink) -> PcieLink:
    """The link the captured attributes show (where they show one): faults change it from
    there, as they change a made one."""
    def gen(name: str, default: int) -> int:
        return LINK_GENERATIONS.get(attrs.get(name, "").strip(), default)

    def width(name: str, default: int) -> int:
        return _irq(attrs.get(name), default)  # a decimal, as irq

    return PcieLink(gen("max_link_speed", made.max_gen), width("max_link_width", made.max_width),
                    gen("current_link_speed", made.current_gen),
                    width("current_link_width", made.current_width))


def _overridden(fn: PciFunction, raw: RawFunction) -> PciFunction:
    attrs = {k: v for k, v in raw.attributes.items()
             if not (fn.sriov is not None and k.startswith(SRIOV_OWNED))}
    return replace(fn, raw=tuple(sorted((k, v.encode()) for k, v in attrs.items())),
                   link=_link(attrs, fn.link),
                   config=raw.config_bytes(), vpd=bytes.fromhex(raw.vpd) or fn.vpd,
                   irq=_irq(attrs.get("irq"), fn.irq),
                   driver_override=captured_override(attrs["driver_override"])
                   if "driver_override" in attrs else fn.driver_override,
                   iommu_group=fn.iommu_group if raw.iommu_group is None else raw.iommu_group)


def apply(kept: list[RawFunction], made: tuple[PciFunction, ...],
          problems: Problems) -> tuple[PciFunction, ...]:
    """``made`` with the overriding entries of ``kept`` applied. Problems: an entry naming
    no made function, or another root or parent than the sections give it, or a second
    entry for one function."""
    by_bdf = {fn.bdf: fn for fn in made}
    chosen: dict[str, RawFunction] = {}
    for i, raw in enumerate(kept):
        if not raw.overrides:
            continue
        bdf = str(raw.bdf)
        fn = by_bdf.get(bdf)
        if fn is None:
            problems.add(("pci_functions", i, "overrides"), f"{bdf} is no function the other "
                         "sections make; leave overrides out to keep it as its own function")
        elif bdf in chosen:
            problems.add(("pci_functions", i, "bdf"), f"{bdf} is overridden twice; keep one "
                         "entry per function")
        elif str(raw.root) != fn.root:
            problems.add(("pci_functions", i, "root"), f"the sections put {bdf} below "
                         f"{fn.root}; an override keeps the made place, give root: {fn.root}")
        elif (None if raw.parent is None else str(raw.parent)) != fn.parent:
            above = "no parent (the root bus)" if fn.parent is None else f"parent: {fn.parent}"
            problems.add(("pci_functions", i, "parent"), f"the sections put {bdf} below "
                         f"{fn.parent or fn.root}; an override keeps the made place, give "
                         f"{above}")
        else:
            chosen[bdf] = raw
    problems.check()
    if not chosen:
        return made
    return tuple(_overridden(fn, chosen[fn.bdf]) if fn.bdf in chosen else fn for fn in made)
