"""``proc/cpuinfo`` and ``proc/meminfo`` of the machine.

cpuinfo is laid out as the profile's architecture's kernel prints it (x86:
arch/x86/kernel/cpu/proc.c; aarch64: arch/arm64/kernel/cpuinfo.c); ``uname -m`` is not part
of the view and stays the host's. meminfo (fs/proc/meminfo.c) totals the NUMA nodes' memory,
GPU memory nodes included (on Grace the driver onlines HBM as system memory), with the
nodes' fixed figures (``mokkafs.surfaces.numa``).
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import Cpu, Machine, State
from mokkafs.surfaces.numa import free_kib, usable_kib
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import File, Node
from mokkafs.tree.roots import bound

CPUINFO, MEMINFO = "proc/cpuinfo", "proc/meminfo"


def _x86(cpu: Cpu, m: Machine, siblings: int, cores: int, thread: int) -> str:
    mo = m.model
    l3 = max((c.size_kib for c in m.caches), default=0)
    apic = cpu.package << 8 | cpu.core << 1 | thread  # package, core, thread bits
    return (f"processor\t: {cpu.id}\nvendor_id\t: {mo.vendor}\ncpu family\t: {mo.family}\n"
            f"model\t\t: {mo.model}\nmodel name\t: {mo.name}\nstepping\t: {mo.stepping}\n"
            f"microcode\t: 0x2b000620\ncpu MHz\t\t: {m.mhz:.3f}\ncache size\t: {l3} KB\n"
            f"physical id\t: {cpu.package}\nsiblings\t: {siblings}\ncore id\t\t: {cpu.core}\n"
            f"cpu cores\t: {cores}\napicid\t\t: {apic}\ninitial apicid\t: {apic}\n"
            "fpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 32\nwp\t\t: yes\n"
            f"flags\t\t: {mo.flags}\nbugs\t\t: spectre_v1 spectre_v2 spec_store_bypass swapgs "
            f"eibrs_pbrsb bhi\nbogomips\t: {m.mhz * 2:.2f}\nclflush size\t: 64\n"
            "cache_alignment\t: 64\naddress sizes\t: 52 bits physical, 57 bits virtual\n"
            "power management:\n\n")


def _arm(cpu: Cpu, m: Machine) -> str:
    mo = m.model
    return (f"processor\t: {cpu.id}\nBogoMIPS\t: 2000.00\nFeatures\t: {mo.flags}\n"
            f"CPU implementer\t: {mo.vendor}\nCPU architecture: {mo.family}\n"
            f"CPU variant\t: 0x0\nCPU part\t: 0x{mo.model:03x}\nCPU revision\t: {mo.stepping}\n\n")


def cpuinfo(state: State) -> bytes:
    m = state.machine
    if state.platform.arch != "x86_64":
        return "".join(_arm(cpu, m) for cpu in m.cpus).encode()
    per_package: dict[int, int] = {}
    cores: dict[int, set[int]] = {}
    threads: dict[tuple[int, int], int] = {}
    out = []
    for cpu in m.cpus:
        per_package[cpu.package] = per_package.get(cpu.package, 0) + 1
        cores.setdefault(cpu.package, set()).add(cpu.core)
    for cpu in m.cpus:
        thread = threads[cpu.package, cpu.core] = threads.get((cpu.package, cpu.core), -1) + 1
        out.append(_x86(cpu, m, per_package[cpu.package], len(cores[cpu.package]), thread))
    return "".join(out).encode()


def meminfo(state: State) -> bytes:
    nodes = state.machine.nodes
    total = sum(usable_kib(n) for n in nodes)
    free = sum(free_kib(n) for n in nodes)
    used = total - free
    values = (("MemTotal", total), ("MemFree", free), ("MemAvailable", free + used // 4),
              ("Buffers", 0), ("Cached", used // 4), ("SwapCached", 0),
              ("Active", used // 2), ("Inactive", used // 4), ("Active(anon)", used // 2),
              ("Inactive(anon)", 0), ("Active(file)", 0), ("Inactive(file)", used // 4),
              ("Unevictable", 0), ("Mlocked", 0), ("SwapTotal", 0), ("SwapFree", 0),
              ("Dirty", 0), ("Writeback", 0), ("AnonPages", used // 2), ("Mapped", 0),
              ("Shmem", 0), ("KReclaimable", 0), ("Slab", 0), ("SReclaimable", 0),
              ("SUnreclaim", 0), ("KernelStack", 0), ("PageTables", 0),
              ("SecPageTables", 0), ("NFS_Unstable", 0), ("Bounce", 0), ("WritebackTmp", 0),
              ("CommitLimit", total // 2), ("Committed_AS", used), ("VmallocTotal", 0),
              ("VmallocUsed", 0), ("VmallocChunk", 0), ("Percpu", 0),
              ("HardwareCorrupted", 0), ("AnonHugePages", 0), ("ShmemHugePages", 0),
              ("ShmemPmdMapped", 0), ("FileHugePages", 0), ("FilePmdMapped", 0))
    lines = [f"{name + ':':<15} {value:8d} kB\n" for name, value in values]
    lines += ["HugePages_Total:       0\n", "HugePages_Free:        0\n",
              "HugePages_Rsvd:        0\n", "HugePages_Surp:        0\n",
              "Hugepagesize:       2048 kB\n", "Hugetlb:               0 kB\n"]
    return "".join(lines).encode()


def nodes(state: State) -> Iterator[Node]:
    if not state.machine.shown:
        return
    yield File(CPUINFO, cpuinfo(state), 0o444)
    yield File(MEMINFO, meminfo(state), 0o444)


SURFACE = stateless("proc_cpu_mem", nodes, ("machine", "platform"),
                    (bound(CPUINFO), bound(MEMINFO)))
