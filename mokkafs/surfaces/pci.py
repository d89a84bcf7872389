"""PCI sysfs: every function (endpoints and the bridges above them) at its place in
``sys/devices/pciDDDD:BB/<bridges>/<bdf>/``, and ``sys/bus/pci/{devices,drivers}``.

Attributes, modes and link shapes follow the kernel (drivers/pci/pci-sysfs.c): the
``bus/pci/devices/<bdf>`` entries are relative links into ``devices/`` (the DRA driver reads the
``pciDDDD:BB`` component out of the link text), ``driver`` links resolve to a
``bus/pci/drivers/<name>`` directory (lspci -k prints the driver only if that resolves), and
``config`` is binary, consistent with the text attributes. Bridges are bound to ``pcieport``
and add ``secondary_bus_number``/``subordinate_bus_number``; their buses are in
``mokkafs.surfaces.pci_bus``. The files whose writes the view simulates (a function's
``driver_override``, ``remove`` and ``rescan``, a driver's ``bind``, ``unbind``, ``new_id`` and
``remove_id``, the bus's ``drivers_probe`` and ``rescan``) carry their store's key.

A function's nodes are kept from the last run while its inputs are the same
(``FunctionCache``): a write or a fault changes a function or two of some hundred.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.model.sysfs import (
    BUS_PCI,
    BUS_PCI_DEVICES,
    BUS_PCI_DRIVERS,
    BUS_STORES,
    BUS_WRITE_ONLY,
    DRIVER_STORES,
    DRIVER_WRITE_ONLY,
    FUNCTION_STORES,
    FUNCTION_WRITE_ONLY,
    HOST_BRIDGES,
    REMOVE,
    SYS_DEVICES,
    StoreKey,
)
from mokkafs.state import PciFunction, RootComplex, State
from mokkafs.surfaces import pci_kept, pci_link, power
from mokkafs.surfaces.pci_config import config_space, resource_text
from mokkafs.tree.assemble import Surface
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text, write_only
from mokkafs.tree.roots import kernel


def cpulist(cpus: tuple[int, ...]) -> str:
    """``0-55,112-167``: ranges of consecutive CPUs, as the kernel's %*pbl prints them."""
    parts: list[str] = []
    start = prev = None
    for cpu in cpus:
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if start != prev else f"{start}")
        start = prev = cpu
    if start is not None:
        parts.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ",".join(parts)


def cpumask(cpus: tuple[int, ...], nr_cpus: int) -> str:
    """``ff,ffffffff``: a hex mask of nr_cpus bits in 32-bit groups, as %*pb prints it."""
    bits = bytearray(max(nr_cpus, 1) + 7 >> 3)
    for cpu in cpus:  # linear in the CPUs: no intermediate integer per bit
        bits[cpu >> 3] |= 1 << (cpu & 7)
    mask = int.from_bytes(bits, "little")
    digits = max((nr_cpus + 3) // 4, 1)
    hexed = f"{mask:0{digits}x}"
    head = len(hexed) % 8 or 8
    groups = [hexed[:head]] + [hexed[i:i + 8] for i in range(head, len(hexed), 8)]
    return ",".join(groups)


def modalias(fn: PciFunction) -> str:
    cls = fn.class_code
    return (f"pci:v{fn.vendor:08X}d{fn.device:08X}sv{fn.subsystem_vendor:08X}"
            f"sd{fn.subsystem_device:08X}"
            f"bc{cls >> 16:02X}sc{(cls >> 8) & 0xFF:02X}i{cls & 0xFF:02X}")


def uevent(fn: PciFunction) -> str:
    driver = f"DRIVER={fn.driver}\n" if fn.driver else ""
    return (f"{driver}PCI_CLASS={fn.class_code:X}\n"
            f"PCI_ID={fn.vendor:04X}:{fn.device:04X}\n"
            f"PCI_SUBSYS_ID={fn.subsystem_vendor:04X}:{fn.subsystem_device:04X}\n"
            f"PCI_SLOT_NAME={fn.bdf}\nMODALIAS={modalias(fn)}\n")


# The State's fields one function's nodes read besides the function itself (``function``):
# the CPU count, and the counters' clock (``power.of_pci_function``). With the function, they
# are the key its nodes are kept by; tests/unit/test_surface_inputs.py proves the list whole.
FUNCTION_INPUTS = ("nr_cpus", "started_at", "counter_quantum")
FunctionInputs = tuple[PciFunction, tuple[object, ...]]  # and FUNCTION_INPUTS' values


class FunctionCache:
    """The nodes of each function in the surface's last run, by their inputs. A run reuses
    the nodes of functions whose inputs are the same, and the tree then keeps their entries
    as they were (``tree.build``). One run only, as ``infiniband.PortCache``; its owner (the
    assembler) passes it to every run."""

    def __init__(self) -> None:
        self.last: dict[FunctionInputs, tuple[Node, ...]] = {}


def function(fn: PciFunction, state: State) -> Iterator[Node]:
    """The nodes of one function's directory: of the function and ``FUNCTION_INPUTS``. A
    function a capture kept is the made one with the captured bytes laid over it."""
    nodes = made(fn, state)
    return nodes if fn.raw is None else pci_kept.laid_over(fn, nodes)


def made(fn: PciFunction, state: State) -> Iterator[Node]:
    """The function as mokkafs makes it from the State's fields."""
    d = fn.path
    yield Dir(d)
    yield text(f"{d}/vendor", f"0x{fn.vendor:04x}")
    yield text(f"{d}/device", f"0x{fn.device:04x}")
    yield text(f"{d}/subsystem_vendor", f"0x{fn.subsystem_vendor:04x}")
    yield text(f"{d}/subsystem_device", f"0x{fn.subsystem_device:04x}")
    yield text(f"{d}/class", f"0x{fn.class_code:06x}")
    yield text(f"{d}/revision", f"0x{fn.revision:02x}")
    yield text(f"{d}/irq", fn.irq)
    yield text(f"{d}/numa_node", fn.numa_node, 0o644)
    yield text(f"{d}/local_cpulist", cpulist(fn.cpus))
    yield text(f"{d}/local_cpus", cpumask(fn.cpus, state.nr_cpus))
    yield File(f"{d}/resource", resource_text(fn))
    yield File(f"{d}/config", config_space(fn), 0o644)
    if fn.vpd:  # the kernel's vpd attribute: root only (drivers/pci/vpd.c, 0600)
        yield File(f"{d}/vpd", fn.vpd, 0o600)
    yield text(f"{d}/modalias", modalias(fn))
    yield File(f"{d}/uevent", uevent(fn).encode(), 0o644)
    yield text(f"{d}/enable", 1, 0o644)
    yield from pci_link.attributes(d, fn)
    yield driver_override(d, fn)
    yield text(f"{d}/msi_bus", 1, 0o644)
    yield text(f"{d}/dma_mask_bits", 64)
    yield text(f"{d}/consistent_dma_mask_bits", 64)
    yield text(f"{d}/broken_parity_status", 0, 0o644)
    yield text(f"{d}/d3cold_allowed", 1, 0o644)
    yield text(f"{d}/ari_enabled", 0)
    yield text(f"{d}/power_state", "D0")
    for name in FUNCTION_WRITE_ONLY:
        yield write_only(f"{d}/{name}", 0o220 if name == REMOVE else 0o200,
                         _store(fn.bdf, name, FUNCTION_STORES))
    if fn.bridge is not None:
        # Bridges only (pci_bridge_attr_is_visible): decimal, as the kernel prints them.
        yield text(f"{d}/secondary_bus_number", fn.bridge.secondary)
        yield text(f"{d}/subordinate_bus_number", fn.bridge.subordinate)
    yield from power.of_pci_function(d, state)
    if fn.driver:  # (a VF made while autoprobe was off has none)
        yield relative_link(f"{d}/driver", f"{BUS_PCI_DRIVERS}/{fn.driver}")
    yield relative_link(f"{d}/subsystem", BUS_PCI)


def driver_override(d: str, fn: PciFunction) -> File:
    """The override as written: bytes, kept as latin-1 text (one character a byte), so
    ``printf '\\377'`` reads back as the one byte it wrote."""
    return File(f"{d}/driver_override", f"{fn.driver_override or '(null)'}\n".encode("latin-1"),
                0o644, store=StoreKey(fn.bdf, "driver_override"))


def _store(holder: str, name: str, stores: tuple[str, ...]) -> StoreKey | None:
    """The key of ``holder``'s store of ``name``, if the view simulates that store."""
    return StoreKey(holder, name) if name in stores else None


def _root(root: RootComplex) -> Iterator[Node]:
    yield Dir(f"{SYS_DEVICES}/{root.id}")
    yield File(f"{SYS_DEVICES}/{root.id}/uevent", b"", 0o644)
    yield from power.of_class_device(f"{SYS_DEVICES}/{root.id}")


def nodes(state: State, functions: FunctionCache) -> Iterator[Node]:
    yield Dir(BUS_PCI)
    yield Dir(BUS_PCI_DEVICES)
    yield Dir(BUS_PCI_DRIVERS)
    yield Dir(f"{BUS_PCI}/slots")
    yield text(f"{BUS_PCI}/drivers_autoprobe", 1, 0o644)
    for name in BUS_WRITE_ONLY:
        yield write_only(f"{BUS_PCI}/{name}", store=_store("pci", name, BUS_STORES))
    for root in state.roots:
        yield from _root(root)
    for drv in state.pci_drivers:  # registered while loaded, bound devices or not
        ddir = f"{BUS_PCI_DRIVERS}/{drv}"
        yield Dir(ddir)
        for name in DRIVER_WRITE_ONLY:
            yield write_only(f"{ddir}/{name}", store=_store(drv, name, DRIVER_STORES))
    last = functions.last
    made: dict[FunctionInputs, tuple[Node, ...]] = {}
    shared = tuple(getattr(state, name) for name in FUNCTION_INPUTS)
    for fn in state.functions:
        key = (fn, shared)
        own = last.get(key)
        made[key] = own = tuple(function(fn, state)) if own is None else own
        yield from own
        yield relative_link(f"{BUS_PCI_DEVICES}/{fn.bdf}", fn.path)
        if fn.driver:
            yield relative_link(f"{BUS_PCI_DRIVERS}/{fn.driver}/{fn.bdf}", fn.path)
    functions.last = made  # only once the run is whole


SURFACE = Surface("pci", nodes, ("functions", "roots", *FUNCTION_INPUTS, "pci_drivers"),
                  (kernel(BUS_PCI), kernel(HOST_BRIDGES, "bus")), FunctionCache)
