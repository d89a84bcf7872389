"""The CPU and NUMA shape (``sys/devices/system/{cpu,node}``, ``/proc/cpuinfo``) as a
profile's ``machine:`` section gives it: packages, cores, threads, memory, distances."""

from __future__ import annotations

import re
from typing import Any

from mokkafs.capture.guarded import Root
from mokkafs.capture.notes import Notes
from mokkafs.capture.reader import Unreadable
from mokkafs.surfaces.cpu import CPU, NODE
from mokkafs.surfaces.proc_cpu_mem import CPUINFO

GIB_KIB = 1 << 20


def _int(root: Root, path: str) -> int | None:
    try:
        return int(root.text(path))
    except (Unreadable, ValueError):
        return None


def _node_memory_kib(root: Root, nid: int) -> int | None:
    try:
        text = root.text(f"{NODE}/node{nid}/meminfo")
    except Unreadable:
        return None
    m = re.search(r"MemTotal:\s+(\d+) kB", text)
    return int(m.group(1)) if m else None


def machine(root: Root, arch: str, notes: Notes) -> dict[str, Any] | None:
    try:
        cpus = [e.name for e in root.listdir(CPU) if re.fullmatch(r"cpu\d+", e.name)]
    except Unreadable as exc:
        notes.add(f"CPU shape not captured: {exc.reason}", CPU)
        return None
    packages: dict[int, set[int]] = {}
    threads = 1
    for name in cpus:
        pkg = _int(root, f"{CPU}/{name}/topology/physical_package_id")
        core = _int(root, f"{CPU}/{name}/topology/core_id")
        if pkg is None or core is None:
            notes.add("CPUs skipped: no topology (offline)", f"{CPU}/{name}")
            continue
        packages.setdefault(pkg, set()).add(core)
        try:
            sib = root.text(f"{CPU}/{name}/topology/thread_siblings_list")
            threads = max(threads, len(re.split(r"[,-]", sib)) if "-" not in sib
                          else int(sib.split("-")[1]) - int(sib.split("-")[0]) + 1)
        except (Unreadable, ValueError, IndexError):
            pass
    if not packages:
        return None
    out: dict[str, Any] = {"sockets": len(packages),
                           "cores_per_socket": max(len(c) for c in packages.values()),
                           "threads_per_core": threads if threads in (1, 2, 4) else 1}
    try:
        nodes = sorted(int(e.name[4:]) for e in root.listdir(NODE)
                       if re.fullmatch(r"node\d+", e.name))
    except Unreadable:
        nodes = []
    cpu_nodes = [n for n in nodes if root.kind(f"{NODE}/node{n}/cpu0") != "absent"
                 or _has_cpus(root, n)]
    memory = _node_memory_kib(root, cpu_nodes[0]) if cpu_nodes else None
    if memory:
        out["memory_per_socket_gib"] = _gib(memory)
    distance = _distances(root, nodes[0]) if nodes else []
    if len(cpu_nodes) > 1 and len(distance) > 1:
        out["remote_distance"] = distance[nodes.index(cpu_nodes[1])]
    gpu_nodes = [n for n in nodes if n not in cpu_nodes]
    if gpu_nodes:
        out["gpu_memory_nodes"] = True
        gib = _node_memory_kib(root, gpu_nodes[0])
        if gib:
            out["gpu_memory_gib"] = _gib(gib)
        if distance:
            out["gpu_distance"] = distance[nodes.index(gpu_nodes[0])]
            far = [distance[nodes.index(g)] for g in gpu_nodes if distance[nodes.index(g)]
                   != out["gpu_distance"]]
            if far:
                out["gpu_remote_distance"] = far[0]
    try:
        cpuinfo = root.read(CPUINFO, 1 << 22).decode("utf-8", "replace")
    except Unreadable as exc:
        notes.add(f"CPU model not captured: {exc.reason}", CPUINFO)
        cpuinfo = ""
    m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    if m and arch == "x86_64":
        out["cpu_model"] = m.group(1).strip()
    m = re.search(r"^cpu MHz\s*:\s*([\d.]+)$", cpuinfo, re.M)
    if m and 0 < float(m.group(1)) <= 10000:
        out["cpu_mhz"] = float(m.group(1))
    notes.add("CPU flags, family and caches: mokkafs's for the architecture (a profile "
              "cannot set them)", CPUINFO)
    return out


def _gib(usable_kib: int) -> int:
    """The GiB of memory whose usable part (``surfaces.numa.usable_kib``: 98 %) is
    ``usable_kib``; else the nearest whole GiB."""
    guess = usable_kib * 50 // 49 // GIB_KIB
    for gib in range(max(1, guess - 1), guess + 3):
        if gib * GIB_KIB * 49 // 50 == usable_kib:
            return gib
    return max(1, round(usable_kib / GIB_KIB))


def _has_cpus(root: Root, nid: int) -> bool:
    try:
        return bool(root.text(f"{NODE}/node{nid}/cpulist"))
    except Unreadable:
        return False


def _distances(root: Root, nid: int) -> list[int]:
    try:
        return [int(x) for x in root.text(f"{NODE}/node{nid}/distance").split()]
    except (Unreadable, ValueError):
        return []
