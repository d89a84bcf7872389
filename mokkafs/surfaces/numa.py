"""``sys/devices/system/node``: the machine's NUMA nodes, as drivers/base/node.c lays them out
(Documentation/ABI/stable/sysfs-devices-node).

Like ``cpu/``, the directory is the profile's whole. A node of GPU memory (Grace) has memory
and no CPUs, and is not in ``has_normal_memory`` (the driver onlines it as movable memory).
A Grace GPU's block of nodes is online whole: the first holds its memory, the other seven
are empty, as a GB300 tray's firmware lays them out (profile/machine.py). ``possible`` is
what is online. Memory figures are fixed: a
reader sees the node as just booted (95 % free), and ``numastat`` counts nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import Machine, NumaNode, State
from mokkafs.surfaces.cpu import CPU, NODE
from mokkafs.surfaces.pci import cpulist, cpumask
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

HUGEPAGE_SIZES_KIB = (2048, 1048576)
MEMINFO_FIELDS = (  # drivers/base/node.c node_read_meminfo, in its order (0 when not given)
    "MemTotal", "MemFree", "MemUsed", "SwapCached", "Active", "Inactive", "Active(anon)",
    "Inactive(anon)", "Active(file)", "Inactive(file)", "Unevictable", "Mlocked", "Dirty",
    "Writeback", "FilePages", "Mapped", "AnonPages", "Shmem", "KernelStack", "PageTables",
    "SecPageTables", "NFS_Unstable", "Bounce", "WritebackTmp", "KReclaimable", "Slab",
    "SReclaimable", "SUnreclaim", "AnonHugePages", "ShmemHugePages", "ShmemPmdMapped",
    "FileHugePages", "FilePmdMapped", "Unaccepted")


def usable_kib(node: NumaNode) -> int:
    """What the kernel counts as the node's memory: what firmware and the kernel's own
    structures leave (2 %)."""
    return node.memory_kib * 49 // 50


def free_kib(node: NumaNode) -> int:
    return usable_kib(node) * 19 // 20


def meminfo(node: NumaNode) -> str:
    total, free = usable_kib(node), free_kib(node)
    values = {"MemTotal": total, "MemFree": free, "MemUsed": total - free,
              "Active": (total - free) // 2, "Inactive": (total - free) // 4,
              "Active(anon)": (total - free) // 2, "Inactive(file)": (total - free) // 4,
              "FilePages": (total - free) // 4, "AnonPages": (total - free) // 2}
    lines = [f"Node {node.id} {name + ':':<15} {values.get(name, 0):8d} kB\n"
             for name in MEMINFO_FIELDS]
    lines += [f"Node {node.id} HugePages_Total: {0:5d}\n", f"Node {node.id} HugePages_Free: "
              f" {0:5d}\n", f"Node {node.id} HugePages_Surp:  {0:5d}\n"]
    return "".join(lines)


def _node(node: NumaNode, m: Machine) -> Iterator[Node]:
    d = f"{NODE}/node{node.id}"
    yield Dir(d)
    yield text(f"{d}/cpumap", cpumask(node.cpus, len(m.cpus)))
    yield text(f"{d}/cpulist", cpulist(node.cpus))
    yield text(f"{d}/distance", " ".join(str(x) for x in node.distance))
    yield File(f"{d}/meminfo", meminfo(node).encode())
    yield File(f"{d}/numastat", "".join(f"{name} 0\n" for name in (
        "numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node",
        "other_node")).encode())
    for kib in HUGEPAGE_SIZES_KIB:
        h = f"{d}/hugepages/hugepages-{kib}kB"
        for name in ("nr_hugepages", "free_hugepages", "surplus_hugepages"):
            yield text(f"{h}/{name}", 0, 0o644 if name == "nr_hugepages" else 0o444)
    for cpu in node.cpus:
        yield relative_link(f"{d}/cpu{cpu}", f"{CPU}/cpu{cpu}")


def nodes(state: State) -> Iterator[Node]:
    m = state.machine
    if not m.shown:
        return
    yield Dir(NODE)
    ids = tuple(n.id for n in m.nodes)
    yield text(f"{NODE}/possible", cpulist(ids))
    yield text(f"{NODE}/online", cpulist(ids))
    yield text(f"{NODE}/has_cpu", cpulist(tuple(n.id for n in m.nodes if n.cpus)))
    yield text(f"{NODE}/has_memory", cpulist(tuple(n.id for n in m.nodes if n.memory_kib)))
    yield text(f"{NODE}/has_normal_memory",
               cpulist(tuple(n.id for n in m.nodes if n.gpu is None)))
    for node in m.nodes:
        yield from _node(node, m)


SURFACE = stateless("numa", nodes, ("machine",), (kernel(NODE),))
