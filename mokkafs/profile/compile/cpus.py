"""The CPUs of a profile: every host bridge's NUMA node and local CPUs, and the machine's CPU
nodes and threads per core."""

from __future__ import annotations

from mokkafs.model.bdf import RootId
from mokkafs.profile import machine, topology
from mokkafs.profile.problems import Problems
from mokkafs.profile.schema import PcieTopology, Profile
from mokkafs.profile.values import MAX_CPUS
from mokkafs.state import RootComplex


def parse_cpulist(text: str) -> tuple[int, ...]:
    """A kernel CPU list (``0-55,112-167``) as CPU numbers; ``ValueError`` if it is none."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first or last >= MAX_CPUS:
            raise ValueError(part)
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def root_complexes(profile: Profile, found: dict[RootId, topology.Root], problems: Problems
                    ) -> tuple[tuple[RootComplex, ...], dict[int, tuple[int, ...]], int]:
    """Every host bridge with its NUMA node and local CPUs, and the machine's CPU nodes (id
    -> CPUs) and threads per core: the ``machine:`` section's, or those the roots imply."""
    cores = (profile.pcie_topology or PcieTopology()).cores_per_numa
    section = profile.machine
    declared = None
    nr_cpus = 0
    if section is not None:
        nr_cpus = section.sockets * section.cores_per_socket * section.threads_per_core
        if nr_cpus > MAX_CPUS:
            problems.add(("machine",), f"sockets, cores_per_socket and threads_per_core make "
                         f"{nr_cpus} CPUs; no kernel runs more than {MAX_CPUS}: lower them")
            problems.check()
        declared = machine.node_cpus(section)
    cpus: dict[RootId, tuple[int, ...]] = {}
    for rid, root in found.items():
        if declared is not None and root.numa_node >= 0 and root.numa_node not in declared:
            problems.add((*root.where, "numa_node"),
                         f"node {root.numa_node} is no package's: the machine has nodes "
                         f"0-{len(declared) - 1} (machine.sockets); name one of them or -1")
        if root.cpu_affinity:
            try:
                cpus[rid] = parse_cpulist(root.cpu_affinity)
            except ValueError:
                problems.add((*root.where, "cpu_affinity"),
                             f"expected a CPU list such as 0-55,112-167 (CPUs 0-{MAX_CPUS - 1}),"
                             f" got {root.cpu_affinity!r}")
                continue
            if declared is not None and cpus[rid][-1] >= nr_cpus:
                problems.add((*root.where, "cpu_affinity"),
                             f"names CPU {cpus[rid][-1]}, but the machine has CPUs "
                             f"0-{nr_cpus - 1} (machine: sockets x cores_per_socket x "
                             "threads_per_core); name CPUs it has or leave it out")
        elif declared is not None:
            if root.numa_node in declared:
                cpus[rid] = declared[root.numa_node]
        elif root.numa_node >= 0:
            cpus[rid] = tuple(range(root.numa_node * cores, (root.numa_node + 1) * cores))
    if declared is None:
        nr_cpus = max((max(c) + 1 for c in cpus.values() if c), default=cores)
        if nr_cpus > MAX_CPUS:
            problems.add(("pcie_topology", "cores_per_numa"),
                         f"the NUMA nodes and cores_per_numa make {nr_cpus} CPUs; no kernel "
                         f"runs more than {MAX_CPUS}: lower cores_per_numa or the roots' "
                         "numa_node")
    problems.check()
    roots = tuple(sorted((RootComplex(str(rid), root.numa_node,
                                      cpus.get(rid) or tuple(range(nr_cpus)))
                          for rid, root in found.items()), key=lambda r: r.id))
    if section is not None and declared is not None:
        return roots, declared, section.threads_per_core
    nodes, threads = machine.implied(((r.numa_node, r.cpus) for r in roots), nr_cpus)
    return roots, nodes, threads
