"""The simulated kernel modules: ``sys/module/<name>/`` (kernel/module/sysfs.c), the PCI
drivers' ``module`` links and the modules' ``drivers/`` links (drivers/base/module.c), and
``proc/modules`` (kernel/module/procfs.c) with the host's lines merged in.

Which modules: the NVIDIA driver's (nvidia, nvidia_modeset, nvidia_uvm), and with InfiniBand
the RDMA stack's (ib_core, mlx5_core, mlx5_ib, ib_uverbs, ib_umad, rdma_ucm) and
nvidia_peermem, whose ``version`` NCCL checks before it turns GPUDirect RDMA on; where the
profile loads vfio-pci, VFIO's (vfio, vfio_iommu_type1, vfio_pci_core, vfio_pci).

- ``version``: only modules that declare MODULE_VERSION have one: the NVIDIA modules (the
  driver version); mlx5_core only when built from MLNX_OFED/DOCA-OFED (upstream removed it).
- ``taint``: O (out of tree) for the open NVIDIA modules, PO for the proprietary ones, OE for
  OFED's; empty for the kernel's own.
- ``parameters/``: only parameters with a sysfs mode show (the NVreg_* options of nvidia have
  mode 0, so none do: tools read /proc/driver/nvidia/params).
- ``holders/``: the modules that use this one; ``refcnt`` is their number.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from mokkafs.model.sysfs import BUS_PCI_DRIVERS
from mokkafs.state import State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text, write_only
from mokkafs.tree.roots import bound, kernel

MODULES = "sys/module"
PROC_MODULES = "proc/modules"
# Every module a view may simulate (the shim redirects exactly these below /sys/module)
NAMES = ("ib_core", "mlx5_core", "mlx5_ib", "ib_uverbs", "ib_umad", "rdma_ucm", "nvidia",
         "nvidia_modeset", "nvidia_uvm", "nvidia_peermem", "vfio", "vfio_iommu_type1",
         "vfio_pci_core", "vfio_pci")


@dataclass(frozen=True, slots=True)
class Module:
    name: str
    size: int  # coresize: text and data, as /proc/modules prints it
    uses: tuple[str, ...] = ()  # the modules this one depends on
    version: str | None = None
    taint: str = ""
    parameters: tuple[tuple[str, str, int], ...] = ()  # (name, value, mode)
    drivers: tuple[str, ...] = ()  # the PCI drivers it registers


def loaded(state: State) -> tuple[Module, ...]:
    """The simulated modules in the order they load (a module after those it uses)."""
    drv = state.driver
    nv_taint = "O" if drv.kernel_modules == "open" else "PO"
    gpu = "nvidia" in state.pci_drivers
    out: list[Module] = []
    if state.rdma_loaded:
        ofed = drv.ofed_version
        rdma_taint = "OE" if ofed else ""
        out += [
            Module("ib_core", 425984, taint=rdma_taint),
            Module("mlx5_core", 2060288, ("ib_core",) if ofed else (), version=ofed,
                   taint=rdma_taint, parameters=(("debug_mask", "0", 0o644),
                                                 ("prof_sel", "2", 0o444)),
                   drivers=("mlx5_core",)),
            Module("mlx5_ib", 450560, ("ib_core", "mlx5_core", "ib_uverbs"), taint=rdma_taint),
            Module("ib_uverbs", 184320, ("ib_core",), taint=rdma_taint),
            Module("ib_umad", 40960, ("ib_core",), taint=rdma_taint),
            Module("rdma_ucm", 32768, ("ib_core", "ib_uverbs"), taint=rdma_taint),
        ]
    if gpu:
        out += [
            Module("nvidia", 56823808, version=drv.version, taint=nv_taint,
                   drivers=tuple(d for d in ("nvidia", "nvidia-nvswitch")
                                 if d in state.pci_drivers)),
            Module("nvidia_modeset", 1908736, ("nvidia",), drv.version, nv_taint),
            Module("nvidia_uvm", 2232320, ("nvidia",), drv.version, nv_taint),
        ]
        if state.rdma_loaded:
            out.append(Module("nvidia_peermem", 16384, ("nvidia", "ib_core"), drv.version,
                              "O", parameters=(("peerdirect_support", "0", 0o444),)))
    if "vfio-pci" in state.pci_drivers:  # a passthrough node's (system.vfio_pci)
        out += [
            Module("vfio", 69632),
            Module("vfio_iommu_type1", 49152, ("vfio",)),
            Module("vfio_pci_core", 94208, ("vfio",)),
            Module("vfio_pci", 16384, ("vfio_pci_core",), drivers=("vfio-pci",)),
        ]
    return tuple(out)


def _holders(modules: tuple[Module, ...]) -> dict[str, list[str]]:
    holders: dict[str, list[str]] = {m.name: [] for m in modules}
    for m in modules:
        for used in m.uses:
            holders[used].append(m.name)
    return holders


def _module(m: Module, holders: list[str]) -> Iterator[Node]:
    d = f"{MODULES}/{m.name}"
    yield Dir(d)
    if m.version is not None:
        yield text(f"{d}/version", m.version)
    yield text(f"{d}/initstate", "live")
    yield text(f"{d}/coresize", m.size)
    yield text(f"{d}/initsize", 0)
    yield text(f"{d}/taint", m.taint)
    yield text(f"{d}/refcnt", len(holders))
    yield write_only(f"{d}/uevent")
    yield Dir(f"{d}/holders")
    for user in holders:
        yield relative_link(f"{d}/holders/{user}", f"{MODULES}/{user}")
    if m.parameters:
        yield Dir(f"{d}/parameters")
        for name, value, mode in m.parameters:
            yield text(f"{d}/parameters/{name}", value, mode)
    if m.drivers:
        yield Dir(f"{d}/drivers")
        for drv in m.drivers:
            yield relative_link(f"{d}/drivers/pci:{drv}", f"{BUS_PCI_DRIVERS}/{drv}")
            yield relative_link(f"{BUS_PCI_DRIVERS}/{drv}/module", d)


def proc_modules(state: State, modules: tuple[Module, ...]) -> bytes:
    """The kernel's lines for the simulated modules, newest first as the kernel lists them,
    then the host's lines for every other module. Addresses read as zeros, as they do for
    any reader without kallsyms permission."""
    holders = _holders(modules)
    lines = []
    for m in reversed(modules):
        users = "".join(f"{u}," for u in holders[m.name]) or "-"
        taint = f" ({m.taint})" if m.taint else ""
        lines.append(f"{m.name} {m.size} {len(holders[m.name])} {users} Live "
                     f"0x0000000000000000{taint}\n")
    ours = {m.name for m in modules}
    lines += [line + "\n" for line in state.host.proc_modules.splitlines()
              if line and line.split(" ", 1)[0] not in ours]
    return "".join(lines).encode()


def nodes(state: State) -> Iterator[Node]:
    modules = loaded(state)
    holders = _holders(modules)
    for m in modules:
        yield from _module(m, holders[m.name])
    yield File(PROC_MODULES, proc_modules(state, modules), 0o444)


# Each simulated module's directory (the host's others stay beside them), and the module list
SURFACE = stateless("modules", nodes, ("driver", "pci_drivers", "rdma_loaded", "host"),
                    (*(kernel(f"{MODULES}/{name}") for name in NAMES), bound(PROC_MODULES)))
