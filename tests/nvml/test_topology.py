"""Topology, NVLink and fabric through nvidia-ml-py on mokkafs's NVML, against the view: the
common ancestor of every pair of GPUs and their nearest GPUs equal what ``lspci -tv`` and
``lspci -vv`` of the mount say (tests/helpers/lspci_topology.py), on h100 and b200 (NODE,
SYSTEM), gb200 (a domain per GPU) and nvml-mock's h100 (GPUs paired below one switch:
SINGLE, HOSTBRIDGE); the GPUs near a CPU are those whose local_cpulist holds it; P2P and the
NVLinks follow docs/nvml.md's rules and NVML's own place; the fabric info equals the profile's
on gb200 and is NOT_SUPPORTED off a fabric."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from mokkafs.profile.compile.cpus import parse_cpulist
from tests.helpers.lspci_topology import LEVELS, NODE, lspci_of
from tests.helpers.mounts import REPO, mokkafs_mount
from tests.helpers.nvml import nvml_bus_id, nvml_env, place_values, view_gpus

SCRIPT = """
import json, sys, pynvml as n
from ctypes import byref
def call(f, *args):
    try:
        return f(*args)
    except n.NVMLError as e:
        return {"error": e.value}
def fabric(h):
    out = {}
    for name, struct, fn in (("v1", n.c_nvmlGpuFabricInfo_t, n.nvmlDeviceGetGpuFabricInfo),
                             ("v2", n.c_nvmlGpuFabricInfo_v2_t, n.nvmlDeviceGetGpuFabricInfoV),
                             ("v3", n.c_nvmlGpuFabricInfo_v3_t, n.nvmlDeviceGetGpuFabricInfoV)):
        info = struct()
        err = call(fn, h, byref(info))
        out[name] = err if isinstance(err, dict) else {
            k: (bytes(getattr(info, k)).hex() if k == "clusterUuid" else getattr(info, k))
            for k, _ in info._fields_}
    return out
def link(h, i):
    return {"state": call(n.nvmlDeviceGetNvLinkState, h, i),
            "version": call(n.nvmlDeviceGetNvLinkVersion, h, i),
            "type": call(n.nvmlDeviceGetNvLinkRemoteDeviceType, h, i),
            "caps": [call(n.nvmlDeviceGetNvLinkCapability, h, i, c) for c in range(6)],
            "remote": (lambda p: p if isinstance(p, dict) else
                       {"busId": p.busId, "pciDeviceId": p.pciDeviceId})(
                call(n.nvmlDeviceGetNvLinkRemotePciInfo, h, i))}
n.nvmlInit()
hs = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
bus = lambda h: n.nvmlDeviceGetPciInfo(h).busId
print(json.dumps({
    "bus": [bus(h) for h in hs],
    "levels": [[n.nvmlDeviceGetTopologyCommonAncestor(a, b) for b in hs] for a in hs],
    "nearest": [{lv: sorted(bus(g) for g in n.nvmlDeviceGetTopologyNearestGpus(h, lv))
                 for lv in (0, 10, 20, 30, 40, 50)} for h in hs],
    "cpus": {c: sorted(bus(g) for g in n.nvmlSystemGetTopologyGpuSet(c))
             for c in map(int, sys.argv[1:])},
    "p2p": [[[n.nvmlDeviceGetP2PStatus(a, b, i) for i in range(5)] for b in hs] for a in hs],
    "links": [[link(h, i) for i in range(n.NVML_NVLINK_MAX_LINKS)] for h in hs],
    "past_max": call(n.nvmlDeviceGetNvLinkState, hs[0], n.NVML_NVLINK_MAX_LINKS),
    "fabric": [fabric(h) for h in hs]}))
n.nvmlShutdown()
"""
INVALID_ARGUMENT, NOT_SUPPORTED = 2, 3
PROFILES = {"h100": "h100", "b200": "b200", "gb200": "gb200",
            "nvml-mock-h100": str(REPO / "tests/data/nvml-mock/h100.yaml")}


def answers(root: Path, cpus: list[int]) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", SCRIPT, *map(str, cpus)], capture_output=True,
                            text=True, timeout=120, cwd=REPO, env={**os.environ, **nvml_env(root)})
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def check_topology(got: dict[str, Any], root: Path) -> None:
    lspci = lspci_of(root)
    gpus = view_gpus(root)
    assert got["bus"] == [nvml_bus_id(g.bdf) for g in gpus]
    want = [[lspci.level(a.bdf, b.bdf) for b in gpus] for a in gpus]
    assert got["levels"] == want
    for i, a in enumerate(gpus):
        for level in LEVELS:
            near = sorted(nvml_bus_id(b.bdf) for j, b in enumerate(gpus)
                          if j != i and want[i][j] <= level)
            assert got["nearest"][i][str(level)] == near, (a.bdf, level)
        for j in range(len(gpus)):
            pcie = 0 if want[i][j] <= NODE else 1  # OK, else CHIPSET_NOT_SUPPORTED
            assert got["p2p"][i][j][4] == (5 if i == j else pcie)  # the PCI index
    for cpu, near in got["cpus"].items():
        assert near == sorted(nvml_bus_id(g.bdf) for g in gpus if int(cpu) in g.cpus), cpu


def check_links(got: dict[str, Any], root: Path) -> None:
    gpus = view_gpus(root)
    for i, (gpu, links) in enumerate(zip(gpus, got["links"], strict=True)):
        place = place_values(root, gpu.bdf)
        count = int(place["nvlink_links"])
        assert count == 18 and got["past_max"] == {"error": INVALID_ARGUMENT}
        for n, link in enumerate(links):
            if n >= count:  # past the GPU's links: every call refuses the index
                assert all(v == {"error": INVALID_ARGUMENT} for k, v in link.items()
                           if k != "caps"), (n, link)
                continue
            assert [link["state"], link["version"], link["type"]] == [
                int(place[f"nvlink.{n}.{k}"]) for k in ("state", "version", "remote_type")]
            assert link["caps"] == [1, 0, 1, 0, 0, 1]
            remote = place.get(f"nvlink.{n}.remote_bus_id")
            if remote is None:  # a switch not on the node's bus
                assert link["remote"] == {"error": NOT_SUPPORTED}
            else:
                sysfs = root / "sys/bus/pci/devices" / remote
                ids = int((sysfs / "device").read_text(), 16) << 16 | int(
                    (sysfs / "vendor").read_text(), 16)
                assert link["remote"] == {"busId": nvml_bus_id(remote), "pciDeviceId": ids}
        # every pair shares the NVLink fabric: P2P over it, but for the PCI index
        assert all(row[:4] == [0, 0, 0, 0] for j, row in enumerate(got["p2p"][i]) if j != i)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_topology_links_and_fabric_agree_with_the_view(tmp_path: Path, profile: str) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", PROFILES[profile],
                                          "--node-name", "node-a"]) as m:
        cpus = sorted({min(g.cpus) for g in view_gpus(m.path)} | {max(g.cpus) for g in
                                                                    view_gpus(m.path)})
        got = answers(m.path, [*cpus, 1 << 19])
        check_topology(got, m.path)
        check_links(got, m.path)
        assert got["cpus"][str(1 << 19)] == []  # a CPU no GPU is near
        levels = {lv for row in got["levels"] for lv in row}
        if profile == "nvml-mock-h100":
            assert levels == {0, 10, 30, 50}  # pairs below a switch, then one host bridge
        fabrics = got["fabric"]
        if profile in ("h100", "b200"):
            assert all(f == {v: {"error": NOT_SUPPORTED} for v in ("v1", "v2", "v3")}
                       for f in fabrics)
        if profile == "gb200":
            check_fabric(fabrics, m.path)


def check_fabric(fabrics: list[dict[str, Any]], root: Path) -> None:
    """The profile's fabric, read as the DRA driver reads it (uuid.FromBytes, the clique in
    decimal), and the struct versions: v1 without the version, v2 without the summary."""
    doc = yaml.safe_load((REPO / "mokkafs/profiles/gb200.yaml").read_text())
    stated = doc["device_defaults"]["fabric"]
    for fabric, gpu in zip(fabrics, view_gpus(root), strict=True):
        v1, v2, v3 = fabric["v1"], fabric["v2"], fabric["v3"]
        assert str(uuid.UUID(bytes=bytes.fromhex(v3["clusterUuid"]))) == stated["cluster_uuid"]
        assert v3["cliqueId"] == stated["clique_id"] and v3["state"] == 3  # COMPLETED
        assert v3["status"] == 0 and v3["healthSummary"] == 1  # SUCCESS, HEALTHY
        assert v3["healthMask"] == int(place_values(root, gpu.bdf)["fabric_health_mask"])
        assert v3["healthMask"] & 3 == 2  # bandwidth not degraded
        assert v3["version"] == 0x03000028 and v2["version"] == 0x02000024
        assert {k: v for k, v in v2.items() if k != "version"} == {
            k: v for k, v in v3.items() if k not in ("version", "healthSummary")}
        assert v1 == {k: v3[k] for k in ("clusterUuid", "status", "cliqueId", "state")}


def test_topology_gpu_set_needs_a_count(tmp_path: Path) -> None:
    """nvidia-ml-py's two calls, the first with a count of 0 and no array, are what the API
    takes; the CPU list of a GPU is the view's local_cpulist."""
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "gb200", "--node-name", "node-a"]) as m:
        gpus = view_gpus(m.path)
        got = answers(m.path, [0, 72])
        listed = parse_cpulist((m.path / "sys/bus/pci/devices" / gpus[0].bdf /
                                "local_cpulist").read_text().strip())
        assert 0 in listed and 72 not in listed
        assert got["cpus"]["0"] == [nvml_bus_id(g.bdf) for g in gpus[:2]]
        assert got["cpus"]["72"] == [nvml_bus_id(g.bdf) for g in gpus[2:]]
