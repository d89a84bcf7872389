"""A validated ``Profile`` -> one immutable ``State``, with the checks that cross fields.

The concerns live beside this package: the devices a profile names (``profile.devices``),
where they sit and the bridges above them (``profile.topology``), the HCAs
(``profile.infiniband``), the machine around them (``profile.platform``). This package puts
them together: the PCI side (``pci``: CPU lists, identities, link training, BARs and windows,
functions) and the State. The problems of each stage are collected in one ``Problems`` and
reported together, each naming its YAML path; a stage that depends on an earlier one runs only
once that one has none. The PCI side of the last compile is reused through a ``PciCache``
the caller owns (``reuse``).
"""

from __future__ import annotations

from dataclasses import replace

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile import infiniband, raw_override, raw_pci
from mokkafs.profile.compile.majors import majors
from mokkafs.profile.compile.pci import pci_side
from mokkafs.profile.compile.reuse import PciCache, key_of, pci_profile
from mokkafs.profile.faults import compile_faults
from mokkafs.profile.imex import compile_imex
from mokkafs.profile.mig import layouts
from mokkafs.profile.nvlink import check_fabric
from mokkafs.profile.nvml import check_instances
from mokkafs.profile.options import Options
from mokkafs.profile.platform import driver, platform
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import PcieTopology, Profile
from mokkafs.state import Generation, Hca, State

__all__ = ["Options", "PciCache", "compile_profile"]


def compile_profile(profile: Profile, lines: dict[YamlPath, int], filename: str,
                    options: Options, cache: PciCache | None = None) -> State:
    """Compile a validated profile into a State, or raise ``ProfileError`` naming every
    problem. With ``cache``, the PCI side of the compile before is reused when it can be."""
    problems = Problems(filename, lines)
    ib = profile.infiniband
    seen = pci_profile(profile)
    key = key_of(seen, options.node_name, options.infiniband)
    pci = cache.get(key) if cache is not None else None
    if pci is not None:
        if pci.hca_bdfs:  # the checks of what the PCI side did not see
            infiniband.check(ib, len(pci.hca_bdfs), problems)
            problems.check()
    else:
        pci = pci_side(seen, filename, options.node_name, options.infiniband,
                       problems, lambda count: infiniband.check(ib, count, problems))
        if cache is not None:
            cache.put(key, pci)
    hcas: tuple[Hca, ...] = ()
    if pci.hca_bdfs:
        try:
            hcas = infiniband.hcas(ib, list(pci.hca_bdfs), list(pci.hca_names),
                                   options.node_name, options.node_index)
        except ValueError as exc:
            raise ProfileError(filename, [Problem("infiniband", str(exc))]) from None
    kept, kept_roots = raw_pci.functions(profile.pci_functions, pci.functions, pci.roots,
                                         problems)
    # the reused PCI side's own, unless kept functions join it or override made ones
    functions = raw_override.apply(profile.pci_functions, pci.functions, problems)
    if kept:
        functions = tuple(sorted(functions + kept, key=lambda fn: fn.bdf))
    state = State(
        generation=Generation(options.generation),
        source=filename,
        node_name=options.node_name,
        node_index=options.node_index,
        roots=tuple(sorted(pci.roots + kept_roots, key=lambda r: r.id)) if kept_roots
        else pci.roots,
        functions=functions,
        hcas=hcas,
        char_majors=majors(profile, bool(pci.hca_bdfs),
                           any(fn.kind == "nvswitch" for fn in pci.functions), problems,
                           profile.system.vfio_pci),
        nr_cpus=len(pci.machine.cpus),
        loaded_at=options.loaded_at,
        platform=platform(profile, options.node_name, options.node_index),
        driver=driver(profile),
        pci_drivers=tuple(sorted({fn.driver for fn in functions if fn.driver}
                                 | ({"vfio-pci"} if profile.system.vfio_pci else set()))),
        rdma_loaded=bool(hcas),
        # The PCI side keeps the machine's shape (the functions' local CPUs); only whether
        # the view serves it follows the command line.
        machine=pci.machine if options.machine else replace(pci.machine, shown=False),
        iommu=(profile.pcie_topology or PcieTopology()).iommu,
        host=options.host,
        started_at=options.started_at,
        counter_quantum=options.counter_quantum,
    )
    specs = compile_faults(profile.faults, state, ("faults",), problems)
    own = {d.index: (pos, d.mig) for pos, d in enumerate(profile.devices)}
    mig = layouts(profile.device_defaults.mig, own, state.gpus(), problems)
    check_instances(profile, state.gpus(), mig, problems)
    imex = compile_imex(profile.system.imex, problems)
    check_fabric(state.gpus(), imex, problems)
    problems.check()
    return replace(state, faults=specs, mig=mig, imex=imex)
