"""The machine around the devices: its CPUs, NUMA nodes and caches, one fact that the PCI
functions' ``numa_node``/``local_cpulist`` and ``/sys/devices/system/{cpu,node}`` both read.

A profile's ``machine:`` section gives the shape (packages, cores, threads, memory), and every
root complex then takes its package's CPUs unless it names its own. Without the section (the
nvml-mock profiles), the shape is the one the root complexes imply: a package per NUMA node
they name, with the CPUs their ``cpu_affinity`` (or ``cores_per_numa``) gives it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from mokkafs.profile.schema import Machine as MachineSection
from mokkafs.state import Cache, Cpu, CpuModel, Machine, NumaNode

GIB_KIB = 1 << 20
LOCAL, REMOTE = 10, 21  # the SLIT's own-node distance; the default between packages
# A Grace GPU's memory is a block of NUMA nodes: the first holds the HBM, the other seven are
# empty (firmware's proximity domains for MIG), and all are online. Within a block the SLIT
# says 11, from one block to another 40. Source: a published GB300 compute tray's
# `numactl -H` (34 nodes: 0-1 the Graces, 2/10/18/26 the HBM, the rest 0 MB).
GPU_NODE_STRIDE = 8
GPU_BLOCK_DISTANCE, GPU_PEER_DISTANCE = 11, 40

# What a profile's architecture runs when the profile does not say: DGX H100/H200/B200's
# Xeon Platinum 8480C (DGX H100 User Guide, "Hardware overview"), Sapphire Rapids' caches;
# and Grace's Neoverse V2 (MIDR 0x41/0xd4f: arch/arm64/include/asm/cputype.h), its caches
# from NVIDIA's Grace CPU datasheet (64 KiB L1 each, 1 MiB L2 per core, 114 MiB L3).
X86_MODEL = CpuModel(
    name="Intel(R) Xeon(R) Platinum 8480C", vendor="GenuineIntel", family=6, model=143,
    stepping=8, flags=" ".join((
        "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts",
        "acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc",
        "arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni",
        "pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid",
        "dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand",
        "lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 intel_ppin cdp_l2",
        "ssbd mba ibrs ibpb stibp ibrs_enhanced tpr_shadow flexpriority ept vpid ept_ad",
        "fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq",
        "rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw",
        "avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total",
        "cqm_mbm_local split_lock_detect avx_vnni avx512_bf16 wbnoinvd dtherm ida arat pln",
        "pts hfi vnmi avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq",
        "avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect cldemote",
        "movdiri movdir64b enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr ibt",
        "amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities")))
X86_CACHES = (Cache(1, "Data", 48, 12, "core"), Cache(1, "Instruction", 32, 8, "core"),
              Cache(2, "Unified", 2048, 16, "core"), Cache(3, "Unified", 107520, 15, "package"))
ARM_MODEL = CpuModel(
    name="Neoverse-V2", vendor="0x41", family=8, model=0xD4F, stepping=0, flags=" ".join((
        "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt",
        "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs",
        "sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint",
        "svei8mm svebf16 i8mm bf16 dgh bti")))
ARM_CACHES = (Cache(1, "Data", 64, 4, "core"), Cache(1, "Instruction", 64, 4, "core"),
              Cache(2, "Unified", 1024, 8, "core"), Cache(3, "Unified", 116736, 12, "package"))


def node_cpus(section: MachineSection) -> dict[int, tuple[int, ...]]:
    """Each package's NUMA node and its CPUs, numbered as Linux enumerates them: thread t of
    core c of package s is CPU ``t * sockets * cores + s * cores + c``."""
    s, c = section.sockets, section.cores_per_socket
    return {pkg: tuple(t * s * c + pkg * c + core for t in range(section.threads_per_core)
                       for core in range(c)) for pkg in range(s)}


def _cpus_of(nodes: Mapping[int, tuple[int, ...]], threads: int, nr_cpus: int) -> list[Cpu]:
    """Every CPU with its package (its node's rank), its core (its place among the node's
    first threads) and its node. With ``threads`` > 1, CPU ``k * nr_cpus / threads + i`` is a
    thread of CPU ``i``'s core."""
    stride = nr_cpus // threads
    out: list[Cpu] = []
    for pkg, (nid, cpus) in enumerate(sorted(nodes.items())):
        firsts = [cpu for cpu in cpus if cpu < stride]
        for core, first in enumerate(firsts):
            out += [Cpu(first + t * stride, pkg, core, nid) for t in range(threads)]
    return sorted(out, key=lambda cpu: cpu.id)


def implied(roots: Iterable[tuple[int, tuple[int, ...]]], nr_cpus: int
            ) -> tuple[dict[int, tuple[int, ...]], int]:
    """The CPU nodes the root complexes imply ((numa_node, CPUs) each; -1 counts for none):
    each node's CPUs are those of its roots; a CPU no root names belongs to the first node,
    one that two nodes name to the lower. SMT (two threads a core) when every node holds
    CPU ``i + nr_cpus / 2`` exactly when it holds CPU ``i``, as ``0-55,112-167`` does (one
    node alone says nothing of threads: one thread a core)."""
    owner: dict[int, int] = {}
    for nid, cpus in sorted(roots):
        if nid >= 0:
            for cpu in cpus:
                owner.setdefault(cpu, nid)
    first = min(owner.values(), default=0)
    nodes: dict[int, list[int]] = {first: []}
    for cpu in range(nr_cpus):
        nodes.setdefault(owner.get(cpu, first), []).append(cpu)
    nodes = {nid: cpus for nid, cpus in nodes.items() if cpus}
    half = nr_cpus // 2
    smt = nr_cpus % 2 == 0 and len(nodes) > 1 and all(
        {c + half for c in cpus if c < half} == {c for c in cpus if c >= half}
        for cpus in nodes.values())
    return {nid: tuple(cpus) for nid, cpus in nodes.items()}, 2 if smt else 1


def build(section: MachineSection | None, arch: str, nodes: Mapping[int, tuple[int, ...]],
          threads: int, gpus: Sequence[tuple[str, int]]) -> Machine:
    """The Machine: CPU nodes ``nodes`` (id -> CPUs) of ``threads`` threads a core and, when
    ``section`` asks, a memory node per GPU of ``gpus`` ((bdf, its package's node), in GPU
    index order), each the first of a block of ``GPU_NODE_STRIDE`` nodes."""
    nr_cpus = sum(len(cpus) for cpus in nodes.values())
    memory = (section.memory_per_socket_gib if section else 512) * GIB_KIB
    remote = section.remote_distance if section else REMOTE
    ids = sorted(nodes)
    rows: list[tuple[int, tuple[int, ...], int, str | None, int | None]] = [
        (nid, nodes[nid], memory, None, nid) for nid in ids]  # (.., the package's node)
    if section is not None and section.gpu_memory_nodes:
        base = max(ids) + 1
        rows += [(base + GPU_NODE_STRIDE * i + k, (),
                  0 if k else section.gpu_memory_gib * GIB_KIB, bdf, home)
                 for i, (bdf, home) in enumerate(gpus) for k in range(GPU_NODE_STRIDE)]

    def distance(a: tuple[object, ...], b: tuple[object, ...]) -> int:
        if a[0] == b[0]:
            return LOCAL
        if a[3] is None and b[3] is None:
            return remote
        assert section is not None
        if a[3] is not None and b[3] is not None:
            return GPU_BLOCK_DISTANCE if a[3] == b[3] else GPU_PEER_DISTANCE
        return section.gpu_distance if a[4] == b[4] else section.gpu_remote_distance

    numa = tuple(NumaNode(row[0], row[1], row[2], tuple(distance(row, o) for o in rows), row[3])
                 for row in rows)
    x86 = arch == "x86_64"
    model = X86_MODEL if x86 else ARM_MODEL
    if section is not None and section.cpu_model and x86:
        model = CpuModel(section.cpu_model, model.vendor, model.family, model.model,
                         model.stepping, model.flags)
    return Machine(cpus=tuple(_cpus_of(nodes, threads, nr_cpus)), nodes=numa,
                   caches=X86_CACHES if x86 else ARM_CACHES, model=model,
                   mhz=section.cpu_mhz if section else 2000.0,
                   shown=section.show if section else True)
