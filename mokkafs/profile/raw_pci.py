"""The ``pci_functions`` a capture kept (``mokkafs.profile.sections.raw_functions``) -> PCI
functions whose attributes the view serves verbatim (``mokkafs.surfaces.pci_kept``), at their
place below their root complex and the bridges (kept or made) above them. Their
``driver_override`` is the State's, so writes change it: it starts as the captured one."""

from __future__ import annotations

from mokkafs.profile.problems import Problems
from mokkafs.profile.sections.raw_functions import RawFunction
from mokkafs.state import Bridge, PcieLink, PciFunction, RootComplex

NO_LINK = PcieLink(1, 0, 1, 0)


def _int(text: str | None, default: int, base: int = 0) -> int:
    try:
        return int((text or "").strip(), base)
    except ValueError:
        return default


def _cpus(text: str | None) -> tuple[int, ...]:
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (hi.isdigit() or not hi):
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(cpus))


def captured_override(text: str | None) -> str | None:
    """The ``driver_override`` the captured text shows (None: unset), as the State keeps it:
    one latin-1 character a byte, up to the first newline, as the kernel stores it."""
    value = (text or "").encode().decode("latin-1").partition("\n")[0]
    return None if value in ("", "(null)") else value


def functions(kept: list[RawFunction], made: tuple[PciFunction, ...],
              roots: tuple[RootComplex, ...], problems: Problems
              ) -> tuple[tuple[PciFunction, ...], tuple[RootComplex, ...]]:
    """The kept functions, and the root complexes they need that ``roots`` lacks (NUMA node
    -1, every CPU). Problems: a bus address already used, a parent that is no bridge."""
    paths = {fn.bdf: fn.path for fn in made}
    by_bdf: dict[str, tuple[int, RawFunction]] = {}
    for i, raw in enumerate(kept):
        if raw.overrides:  # a made function's attributes (mokkafs.profile.raw_override)
            continue
        bdf = str(raw.bdf)
        if bdf in paths or bdf in by_bdf:
            hint = " (or set overrides: true to replace the made one's attributes)" \
                if bdf in paths else ""
            problems.add(("pci_functions", i, "bdf"), f"{bdf} is already used by another "
                         f"function; every function needs its own PCI address{hint}")
        by_bdf.setdefault(bdf, (i, raw))
    all_cpus = tuple(sorted({c for r in roots for c in r.cpus}))
    have = {r.id for r in roots}
    extra = {str(raw.root): RootComplex(str(raw.root), -1, all_cpus) for raw in kept
             if str(raw.root) not in have and not raw.overrides}

    def path(bdf: str, seen: tuple[str, ...] = ()) -> str | None:
        if bdf in paths:
            return paths[bdf]
        i, raw = by_bdf[bdf]
        parent = None if raw.parent is None else str(raw.parent)
        if parent is None:
            found: str | None = f"sys/devices/{raw.root}/{bdf}"
        elif parent in seen or (parent not in paths and parent not in by_bdf):
            problems.add(("pci_functions", i, "parent"), f"{parent} is not a function of "
                         "this node above it; name a bridge the profile has, or leave it out")
            found = None
        else:
            above = path(parent, (*seen, bdf))
            found = None if above is None else f"{above}/{bdf}"
        if found is not None:
            paths[bdf] = found
        return found

    out = []
    for bdf, (_, raw) in sorted(by_bdf.items()):
        where = path(bdf)
        if where is None:
            continue
        a = raw.attributes
        bridge = None
        if "secondary_bus_number" in a:
            bridge = Bridge("downstream", _int(a["secondary_bus_number"], 0, 10),
                            _int(a.get("subordinate_bus_number"), 0, 10), 0)
        out.append(PciFunction(
            bdf=bdf, root=str(raw.root), path=where,
            parent=None if raw.parent is None else str(raw.parent), kind="other",
            vendor=_int(a.get("vendor"), 0xFFFF), device=_int(a.get("device"), 0xFFFF),
            subsystem_vendor=_int(a.get("subsystem_vendor"), 0),
            subsystem_device=_int(a.get("subsystem_device"), 0),
            class_code=_int(a.get("class"), 0), revision=_int(a.get("revision"), 0),
            driver=raw.driver or "", irq=_int(a.get("irq"), 0, 10),
            numa_node=_int(a.get("numa_node"), -1, 10),
            cpus=_cpus(a.get("local_cpulist")) or all_cpus, link=NO_LINK, bars=(),
            bridge=bridge, iommu_group=raw.iommu_group, vpd=bytes.fromhex(raw.vpd),
            driver_override=captured_override(a.get("driver_override")),
            raw=tuple(sorted((k, v.encode()) for k, v in a.items())),
            config=raw.config_bytes()))
    problems.check()
    return tuple(out), tuple(extra.values())
