"""``sys/devices/system/cpu``: the machine's CPUs, as drivers/base/cpu.c, topology.c and
cacheinfo.c lay them out.

The directory is the profile's whole, never merged with the host's: a host's own ``cpu0`` …
``cpuN``, ``online`` or ``cpufreq/`` beside the simulated ones would give a reader two
machines. Its siblings under ``devices/system`` (``clocksource``, ``memory``, ``edac``, …) stay
the host's where the host's sysfs shows through. Masks are ``%*pb`` of every CPU and lists
``%*pbl`` (``mokkafs.surfaces.pci``), so they agree with every PCI function's ``local_cpus``.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import Cpu, Machine, State
from mokkafs.surfaces.pci import cpulist, cpumask
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

SYSTEM = "sys/devices/system"
CPU = f"{SYSTEM}/cpu"
NODE = f"{SYSTEM}/node"
KERNEL_MAX = 8191  # NR_CPUS - 1 of a distribution kernel (CONFIG_NR_CPUS=8192)


def system_dir(state: State) -> Dir:
    """``devices/system``: merged with the host's where its sysfs shows through, without the
    host's ``cpu`` and ``node`` (this surface and ``numa`` describe them whole)."""
    return Dir(SYSTEM, merge="devices/system" if state.host.sysfs else None,
               hide=("cpu", "node"))


def size(kib: int) -> str:
    return f"{kib}K"


class Groups:
    """Which CPUs share each core (its threads) and each package, computed once a build."""

    def __init__(self, m: Machine) -> None:
        core: dict[tuple[int, int], list[int]] = {}
        package: dict[int, list[int]] = {}
        for c in m.cpus:
            core.setdefault((c.package, c.core), []).append(c.id)
            package.setdefault(c.package, []).append(c.id)
        self._core = {k: tuple(v) for k, v in core.items()}
        self._package = {k: tuple(v) for k, v in package.items()}
        self.cores = max((c.core for c in m.cpus), default=0) + 1

    def core(self, cpu: Cpu) -> tuple[int, ...]:
        return self._core[cpu.package, cpu.core]

    def package(self, cpu: Cpu) -> tuple[int, ...]:
        return self._package[cpu.package]


def _topology(d: str, cpu: Cpu, m: Machine, g: Groups,
              masks: dict[tuple[int, ...], tuple[File, File]]) -> Iterator[Node]:
    def pair(name: str, cpus: tuple[int, ...]) -> Iterator[Node]:
        files = masks.get(cpus)
        if files is None:  # one content per group, shared by every CPU of it
            files = masks[cpus] = (text("x", cpumask(cpus, len(m.cpus))), text("x", cpulist(cpus)))
        yield File(f"{d}/{name}", files[0].content, 0o444)
        yield File(f"{d}/{name}_list", files[1].content, 0o444)

    yield Dir(d)
    core, package = g.core(cpu), g.package(cpu)
    yield text(f"{d}/physical_package_id", cpu.package)
    yield text(f"{d}/die_id", 0)
    yield text(f"{d}/cluster_id", cpu.core)  # each core its own cluster (its own L2)
    yield text(f"{d}/core_id", cpu.core)
    for name, cpus in (("core_cpus", core), ("thread_siblings", core), ("cluster_cpus", core),
                       ("core_siblings", package), ("die_cpus", package),
                       ("package_cpus", package)):
        yield from pair(name, cpus)


def _caches(d: str, cpu: Cpu, m: Machine, g: Groups) -> Iterator[Node]:
    yield Dir(d)
    core, package, cores = g.core(cpu), g.package(cpu), g.cores
    for i, cache in enumerate(m.caches):
        shared = core if cache.scope == "core" else package
        e = f"{d}/index{i}"
        yield Dir(e)
        yield text(f"{e}/id", cpu.package * cores + cpu.core if cache.scope == "core"
                   else cpu.package)
        yield text(f"{e}/level", cache.level)
        yield text(f"{e}/type", cache.type)
        yield text(f"{e}/size", size(cache.size_kib))
        yield text(f"{e}/ways_of_associativity", cache.ways)
        yield text(f"{e}/coherency_line_size", cache.line)
        yield text(f"{e}/number_of_sets", cache.size_kib * 1024 // (cache.ways * cache.line))
        yield text(f"{e}/physical_line_partition", 1)
        yield text(f"{e}/shared_cpu_map", cpumask(shared, len(m.cpus)))
        yield text(f"{e}/shared_cpu_list", cpulist(shared))


def nodes(state: State) -> Iterator[Node]:
    m = state.machine
    if not m.shown:
        return
    yield system_dir(state)
    yield Dir(CPU)
    every = tuple(c.id for c in m.cpus)
    for name in ("online", "possible", "present"):
        yield text(f"{CPU}/{name}", cpulist(every))
    yield text(f"{CPU}/offline", "")
    yield text(f"{CPU}/isolated", "")
    yield text(f"{CPU}/kernel_max", KERNEL_MAX)
    g = Groups(m)
    smt = any(len(g.core(c)) > 1 for c in m.cpus[:1])
    yield text(f"{CPU}/smt/active", int(smt))
    yield text(f"{CPU}/smt/control", "on" if smt else "notsupported")
    masks: dict[tuple[int, ...], tuple[File, File]] = {}
    for cpu in m.cpus:
        d = f"{CPU}/cpu{cpu.id}"
        yield Dir(d)
        if cpu.id:  # the boot CPU cannot go offline: it has no online attribute
            yield text(f"{d}/online", 1, 0o644)
        yield from _topology(f"{d}/topology", cpu, m, g, masks)
        yield from _caches(f"{d}/cache", cpu, m, g)
        yield relative_link(f"{d}/node{cpu.node}", f"{NODE}/node{cpu.node}")


SURFACE = stateless("cpu", nodes, ("machine", "host"), (kernel(CPU),))
