"""MIG through mokkafs's NVML in tests: a nvidia-ml-py process that reads every GPU's MIG side
and makes changes on request (``MIG_SCRIPT``, driven through ``PynvmlProcess.ask``), and what
the view and the daemon say of the layout (the capability files, ``mokkafs mig -lgi``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.mounts import REPO

# Each line read is a JSON command; each answer one JSON line (an NVML error: {"error": N}).
# ["read"]: every GPU's MIG side; ["cgi", GPU, PROFILE_ID, [START, SIZE] or null];
# ["dgi", GPU, GI]; ["cci", GPU, GI, CI_PROFILE, optionally [START, SIZE]];
# ["cipp", GPU, GI, CI_PROFILE]: its possible placements; ["dci", GPU, GI, CI];
# ["setmig", GPU, MODE].
# Handles are made once, at the start: a consumer that initialized before any change.
MIG_SCRIPT = """
import json, sys, pynvml as n
n.nvmlInit()
gpus = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
def call(f, *a):
    try:
        return f(*a)
    except n.NVMLError as e:
        return {"error": e.value}
def text(v):
    return v.decode() if isinstance(v, bytes) else v
def cis_of(gi):
    out = []
    for e in range(n.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
        p = call(n.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, e, 0)
        if isinstance(p, dict):
            continue
        room = (n.c_nvmlComputeInstance_t * p.instanceCount)()
        count = n.c_uint()
        n.nvmlGpuInstanceGetComputeInstances(gi, p.id, room, n.byref(count))
        for ci in room[:count.value]:
            info = n.nvmlComputeInstanceGetInfo(ci)
            out.append({"id": info.id, "profile": text(p.name), "slices": p.sliceCount,
                        "start": info.placement.start})
    return sorted(out, key=lambda c: c["id"])
def gis_of(h, profiles):
    out = []
    for p in profiles.values():
        room = (n.c_nvmlGpuInstance_t * p["count"])()
        count = n.c_uint()
        n.nvmlDeviceGetGpuInstances(h, p["id"], room, n.byref(count))
        for gi in room[:count.value]:
            info = n.nvmlGpuInstanceGetInfo(gi)
            again = n.nvmlGpuInstanceGetInfo(n.nvmlDeviceGetGpuInstanceById(h, info.id))
            assert again.id == info.id
            out.append({"id": info.id, "profile_id": info.profileId,
                        "placement": [info.placement.start, info.placement.size],
                        "cis": cis_of(gi)})
    return sorted(out, key=lambda g: g["id"])
def device(m):
    a = n.nvmlDeviceGetAttributes(m)
    memory = n.nvmlDeviceGetMemoryInfo(m)
    uuid = n.nvmlDeviceGetUUID(m)
    return {"uuid": uuid, "name": n.nvmlDeviceGetName(m),
            "mig": n.nvmlDeviceIsMigDeviceHandle(m).value,
            "gi": n.nvmlDeviceGetGpuInstanceId(m), "ci": n.nvmlDeviceGetComputeInstanceId(m),
            "slices": [a.gpuInstanceSliceCount, a.computeInstanceSliceCount],
            "memory_mb": a.memorySizeMB, "memory": [memory.total, memory.free, memory.used],
            "parent": n.nvmlDeviceGetIndex(n.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m)),
            "by_uuid": n.nvmlDeviceGetComputeInstanceId(n.nvmlDeviceGetHandleByUUID(uuid))}
def gpu(h):
    mode = call(n.nvmlDeviceGetMigMode, h)
    out = {"mode": mode, "max": call(n.nvmlDeviceGetMaxMigDeviceCount, h),
           "mig": n.nvmlDeviceIsMigDeviceHandle(h).value}
    if isinstance(mode, dict):
        return out
    profiles = {}
    for e in range(n.NVML_GPU_INSTANCE_PROFILE_COUNT):
        p = call(n.nvmlDeviceGetGpuInstanceProfileInfo, h, e)
        if isinstance(p, dict):
            continue
        room, count = (n.c_nvmlGpuInstancePlacement_t * 8)(), n.c_uint(8)
        n.nvmlDeviceGetGpuInstancePossiblePlacements(h, p.id, room, n.byref(count))
        profiles[text(p.name)] = {
            "enum": e, "id": p.id, "slices": p.sliceCount, "count": p.instanceCount,
            "memory_mb": p.memorySizeMB,
            "placements": [[r.start, r.size] for r in room[:count.value]],
            "remaining": call(n.nvmlDeviceGetGpuInstanceRemainingCapacity, h, p.id)}
    out["profiles"] = profiles
    if mode[0] != 1:
        room = (n.c_nvmlGpuInstance_t * 7)()
        out["gis"] = call(n.nvmlDeviceGetGpuInstances, h, 19, room, n.byref(n.c_uint()))
        return out
    out["gis"] = gis_of(h, profiles)
    out["devices"] = [call(lambda i: device(n.nvmlDeviceGetMigDeviceHandleByIndex(h, i)), i)
                      for i in range(out["max"])]
    return out
def gi(g, ident):
    return n.nvmlDeviceGetGpuInstanceById(gpus[g], ident)
def run(cmd):
    op = cmd[0]
    if op == "read":
        return [gpu(h) for h in gpus]
    if op == "cgi":
        h, profile, placement = gpus[cmd[1]], cmd[2], cmd[3]
        if placement is None:
            made = n.nvmlDeviceCreateGpuInstance(h, profile)
        else:
            where = n.c_nvmlGpuInstancePlacement_t(*placement)
            made = n.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile, n.byref(where))
        info = n.nvmlGpuInstanceGetInfo(made)
        return {"gi": info.id, "placement": [info.placement.start, info.placement.size]}
    if op == "dgi":
        return n.nvmlGpuInstanceDestroy(gi(cmd[1], cmd[2]))
    if op == "cci":
        if len(cmd) > 4:
            where = n.c_nvmlComputeInstancePlacement_t(*cmd[4])
            made = n.nvmlGpuInstanceCreateComputeInstanceWithPlacement(
                gi(cmd[1], cmd[2]), cmd[3], n.byref(where))
        else:
            made = n.nvmlGpuInstanceCreateComputeInstance(gi(cmd[1], cmd[2]), cmd[3])
        info = n.nvmlComputeInstanceGetInfo(made)
        return {"ci": info.id, "placement": [info.placement.start, info.placement.size]}
    if op == "cipp":
        room, count = (n.c_nvmlComputeInstancePlacement_t * 8)(), n.c_uint(8)
        n.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi(cmd[1], cmd[2]), cmd[3], room,
                                                              n.byref(count))
        return [[r.start, r.size] for r in room[:count.value]]
    if op == "dci":
        return n.nvmlComputeInstanceDestroy(
            n.nvmlGpuInstanceGetComputeInstanceById(gi(cmd[1], cmd[2]), cmd[3]))
    if op == "setmig":
        return n.nvmlDeviceSetMigMode(gpus[cmd[1]], cmd[2])
for line in iter(sys.stdin.readline, ""):
    print(json.dumps(call(run, json.loads(line))), flush=True)
n.nvmlShutdown()
"""


def capability_instances(root: Path, minor: int) -> dict[int, list[int]]:
    """The GPU instances the capability files list for GPU ``minor``, each with its compute
    instances: {gi: [ci, ...]}."""
    base = root / f"proc/driver/nvidia/capabilities/gpu{minor}/mig"
    if not base.is_dir():
        return {}
    return {int(gi.name[2:]): sorted(int(ci.name[2:]) for ci in gi.iterdir() if ci.is_dir())
            for gi in base.iterdir() if gi.is_dir()}


def daemon_listing(control: Path, gpu: int) -> list[list[str]]:
    """``mokkafs mig -i GPU -lgi``'s lines, split at tabs: the GPU, "MIG <profile>", the
    profile ID, the GPU instance ID, "start:size", "ci:profile,..." (or "-")."""
    out = subprocess.run([sys.executable, "-m", "mokkafs", "mig", "--control", str(control),
                          "-i", str(gpu), "-lgi"], capture_output=True, text=True, check=True,
                         cwd=REPO, timeout=60, env={**os.environ}).stdout
    return [line.split("\t") for line in out.splitlines()]


def as_listing(gpu: int, snapshot: dict[str, object]) -> list[list[str]]:
    """What NVML says of a GPU's instances, as ``daemon_listing`` lines."""
    profiles = snapshot["profiles"]
    assert isinstance(profiles, dict)
    names = {p["id"]: name for name, p in profiles.items()}
    gis = snapshot["gis"]
    assert isinstance(gis, list)
    return [[str(gpu), names[g["profile_id"]], str(g["profile_id"]), str(g["id"]),
             f"{g['placement'][0]}:{g['placement'][1]}",
             ",".join(f"{c['id']}:{c['profile'].removeprefix('MIG ')}" for c in g["cis"]) or "-"]
            for g in gis]
