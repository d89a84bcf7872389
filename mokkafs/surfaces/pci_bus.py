"""PCI buses as class devices (drivers/pci/probe.c, pci-sysfs.c): a host bridge's root bus and
every bridge's secondary bus is ``<parent>/pci_bus/<dddd:bb>``, with its CPU affinity, and
``/sys/class/pci_bus/<dddd:bb>`` links to it. NCCL finds a PCI device's directory through
these: ``realpath /sys/class/pci_bus/<dddd:bb>/../../<bdf>``.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.model.sysfs import PCI_BUS, PCI_BUS_CLASS, RESCAN, SYS_DEVICES, StoreKey
from mokkafs.state import State
from mokkafs.surfaces import power
from mokkafs.surfaces.pci import cpulist, cpumask
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text, write_only
from mokkafs.tree.roots import kernel


def _bus(parent: str, bus_id: str, cpus: tuple[int, ...], nr_cpus: int) -> Iterator[Node]:
    d = f"{parent}/{PCI_BUS}/{bus_id}"
    yield Dir(d)
    yield text(f"{d}/cpuaffinity", cpumask(cpus, nr_cpus))
    yield text(f"{d}/cpulistaffinity", cpulist(cpus))
    yield write_only(f"{d}/{RESCAN}", store=StoreKey(bus_id, RESCAN))
    yield File(f"{d}/uevent", b"", 0o644)
    yield from power.of_class_device(d)
    yield relative_link(f"{d}/subsystem", PCI_BUS_CLASS)
    yield relative_link(f"{d}/device", parent)
    yield relative_link(f"{PCI_BUS_CLASS}/{bus_id}", d)


def nodes(state: State) -> Iterator[Node]:
    # The simulated buses alone: the host's are hidden, as its PCI devices are.
    yield Dir(PCI_BUS_CLASS)
    for root in state.roots:
        yield from _bus(f"{SYS_DEVICES}/{root.id}", root.id[3:], root.cpus, state.nr_cpus)
    for fn in state.functions:
        if fn.bridge is not None:
            bus_id = f"{fn.bdf[:4]}:{fn.bridge.secondary:02x}"
            yield from _bus(fn.path, bus_id, fn.cpus, state.nr_cpus)


SURFACE = stateless("pci_bus", nodes, ("functions", "roots", "nr_cpus"), (kernel(PCI_BUS_CLASS),))
