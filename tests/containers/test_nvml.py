"""mokkafs's NVML in a container given the CDI spec, as NVIDIA's container toolkit gives the
driver's: the library bound where the toolkit binds it, found by its soname through the linker
cache the ldcache hook wrote (no LD_LIBRARY_PATH, no MOKKAFS_ROOT); nvidia-ml-py, gpustat and
``nvitop -1`` there see the view's GPUs, and NVML's own place (docs/nvml.md). On h100-mig,
b200 and gb200, nvidia-ml-py sees there every GPU, MIG device and fabric as on the node, and
gpustat, ``nvitop -1`` and nvtop every GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.delivery.cdi import UPSTREAM_SCHEMA, validate
from tests.helpers.containers import IMAGE, IMAGE_TOOLS, RUN, Node, podman, start_node
from tests.helpers.mounts import REPO, SHIPPED_PROFILES
from tests.helpers.nvml import nvml_bus_id, nvml_env, place_values, view_gpus
from tests.helpers.profiles import state_of

pytestmark = pytest.mark.consumers

SITE = sysconfig.get_paths()["purelib"]  # the .venv's: nvidia-ml-py, gpustat, nvitop
LIB_DIR = "/usr/lib/x86_64-linux-gnu"
MIB = 1 << 20

READER = """
import json, pynvml as n
n.nvmlInit()
def gpu(h):
    return {"name": n.nvmlDeviceGetName(h), "uuid": n.nvmlDeviceGetUUID(h),
            "bus_id": n.nvmlDeviceGetPciInfo(h).busId,
            "memory": n.nvmlDeviceGetMemoryInfo(h).total}
print(json.dumps({"driver": n.nvmlSystemGetDriverVersion(),
                  "gpus": [gpu(n.nvmlDeviceGetHandleByIndex(i))
                           for i in range(n.nvmlDeviceGetCount())]}))
"""

SCRIPT = r"""
echo ==env; echo "${LD_LIBRARY_PATH-unset} ${MOKKAFS_ROOT-unset}"
echo ==cache; ldconfig -p | grep libnvidia-ml
echo ==links; readlink @LIB@/libnvidia-ml.so.1 @LIB@/libnvidia-ml.so
echo ==find; python3 -c 'import ctypes.util; print(ctypes.util.find_library("nvidia-ml"))'
echo ==loader; LD_DEBUG=libs python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2>&1 |
  grep -A2 'find library=libnvidia-ml.so.1' | sed 's/^ *[0-9]*:\s*//'
echo ==pynvml; python3 -c "$READER"
echo ==gpustat; python3 -m gpustat --json
echo ==nvitop; python3 -m nvitop -1
echo ==end
""".replace("@LIB@", LIB_DIR)


def sections(output: str) -> dict[str, str]:
    parts = re.split(r"^==(\w+)\n", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_nvml_consumers_in_a_container_given_the_spec(h100_node: Node) -> None:
    spec = json.loads(h100_node.spec.read_text())
    validate(spec, UPSTREAM_SCHEMA)
    state = state_of(h100_node.profile, node_name="node-a")
    version = state.driver.version
    result = podman("run", "--rm", *RUN, "--device", h100_node.device("all"), *IMAGE_TOOLS,
                    "-v", f"{SITE}:/opt/site:ro", "-e", "PYTHONPATH=/opt/site",
                    "-e", f"READER={READER}", "-e", "COLUMNS=200", "-e", "LINES=60",
                    # the interpreter the .venv was made from (not /usr/local's)
                    "-e", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", IMAGE, "sh", "-c", SCRIPT,
                    check=False)
    out = sections(result.stdout)
    assert "end" in out, result.stdout + result.stderr
    assert out["env"] == "unset unset\n"
    # the library where the toolkit puts the driver's, its links as its hooks make them, and
    # the container's own linker cache listing it (the ldcache hook's)
    assert out["links"].split() == [f"libnvidia-ml.so.{version}", "libnvidia-ml.so.1"]
    assert sorted(out["cache"].split("\n")[:-1]) == [
        f"\tlibnvidia-ml.so (libc6,x86-64) => {LIB_DIR}/libnvidia-ml.so",
        f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {LIB_DIR}/libnvidia-ml.so.1"]
    assert out["find"] == "libnvidia-ml.so.1\n"
    # the loader finds it in the cache, before any search of its default paths
    assert out["loader"].splitlines() == [
        "find library=libnvidia-ml.so.1 [0]; searching", "search cache=/etc/ld.so.cache",
        f"trying file={LIB_DIR}/libnvidia-ml.so.1"], out["loader"]
    # nvidia-ml-py: the view's GPUs, and their memory from NVML's own place
    gpus = view_gpus(h100_node.mount.path)
    assert len(gpus) == 8
    memory = {g.bdf: int(place_values(h100_node.mount.path, g.bdf)["memory_total"])
              for g in gpus}
    seen = json.loads(out["pynvml"])
    assert seen["driver"] == version
    assert seen["gpus"] == [{"name": g.name, "uuid": g.uuid, "bus_id": nvml_bus_id(g.bdf),
                             "memory": memory[g.bdf]} for g in gpus]
    report = json.loads(out["gpustat"])
    assert [(g["index"], g["uuid"], g["name"], g["memory.total"]) for g in report["gpus"]] == [
        (i, g.uuid, g.name, memory[g.bdf] // MIB) for i, g in enumerate(gpus)]
    rows = [line for line in out["nvitop"].splitlines() if "HBM3" in line]
    assert len(rows) == 8, out["nvitop"]
    for row, g in zip(rows, gpus, strict=True):
        assert nvml_bus_id(g.bdf) in row, out["nvitop"]


# What the device plugin, GFD and the DRA driver ask of each GPU beyond its identity: its MIG
# mode and MIG devices (each with its GPU- and compute-instance IDs and memory), and its
# fabric's cluster UUID, clique and state (GB200). A call a board does not support answers
# its NVML error, noted as such.
DEVICES = """
import ctypes, json, pynvml as n
n.nvmlInit()
def ask(f, *a):
    try:
        return f(*a)
    except n.NVMLError as e:
        return "error %d" % e.value
def mig(h):
    out = []
    for i in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):
        m = ask(n.nvmlDeviceGetMigDeviceHandleByIndex, h, i)
        if isinstance(m, str):
            continue
        out.append([n.nvmlDeviceGetUUID(m), n.nvmlDeviceGetGpuInstanceId(m),
                    n.nvmlDeviceGetComputeInstanceId(m), n.nvmlDeviceGetMemoryInfo(m).total,
                    n.nvmlDeviceGetBAR1MemoryInfo(m).bar1Total])
    return out
def fabric(h):
    f = n.c_nvmlGpuFabricInfo_t()
    err = ask(n.nvmlDeviceGetGpuFabricInfo, h, ctypes.byref(f))
    return err if isinstance(err, str) else [bytes(f.clusterUuid).hex(), f.cliqueId, f.state]
def gpu(h):
    b = n.nvmlDeviceGetBAR1MemoryInfo(h)
    return {"uuid": n.nvmlDeviceGetUUID(h), "bus_id": n.nvmlDeviceGetPciInfo(h).busId,
            "mig_mode": ask(n.nvmlDeviceGetMigMode, h), "mig": mig(h), "fabric": fabric(h),
            "bar1": [b.bar1Total, b.bar1Free, b.bar1Used]}
print(json.dumps([gpu(n.nvmlDeviceGetHandleByIndex(i)) for i in range(n.nvmlDeviceGetCount())]))
"""


# nvtop in a detached session of a tmux server of the container's own, its screen captured
# until it shows a "Device N [" for each of the view's $GPUS, counted where they are (a wide
# screen puts two side by side on a line; polled: at most 30 s)
NVTOP = ("export XDG_CONFIG_HOME=/tmp/config TMUX_TMPDIR=/tmp; "
         "tmux new-session -d -s nvtop -x 200 -y 60 nvtop; i=0; "
         "while [ $i -lt 300 ]; do tmux capture-pane -p -t nvtop > /tmp/screen; "
         'if [ "$(grep -o \'Device [0-9]* \\[\' /tmp/screen | wc -l)" -ge "$GPUS" ]; '
         "then break; fi; "
         "i=$((i + 1)); sleep 0.1; done; cat /tmp/screen; tmux kill-server")


@pytest.fixture(params=["h100-mig", "b200", "gb200"])
def named_node(request: pytest.FixtureRequest, tmp_path: Path, hosttools_image: str,
               ) -> Iterator[tuple[str, Node]]:
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    profile.write_text((SHIPPED_PROFILES / f"{request.param}.yaml").read_text())
    for node in start_node(tmp_path, profile):
        yield request.param, node


def test_a_container_given_the_spec_sees_what_the_node_sees(named_node: tuple[str, Node],
                                                           ) -> None:
    """nvidia-ml-py in a container given the spec answers every GPU's identity, MIG devices,
    fabric and BAR1 as it answers on the node in the environment ``mokkafs nvml-env`` prints
    (the same library reading the same view, through the spec's binds), and as the view lists
    them; gpustat, ``nvitop -1`` and nvtop there list every GPU (nvitop's MIG rows need
    BAR1)."""
    name, node = named_node
    on_node = subprocess.run([sys.executable, "-c", DEVICES], capture_output=True, text=True,
                             timeout=120, cwd=REPO,
                             env={**os.environ, **nvml_env(node.mount.path)})
    assert on_node.returncode == 0, on_node.stderr
    result = podman("run", "--rm", *RUN, "--device", node.device("all"), *IMAGE_TOOLS,
                    "-v", f"{SITE}:/opt/site:ro", "-e", "PYTHONPATH=/opt/site",
                    "-e", f"DEVICES={DEVICES}", "-e", "COLUMNS=200", "-e", "LINES=60",
                    "-e", f"GPUS={len(view_gpus(node.mount.path))}",
                    "-e", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", IMAGE, "sh", "-c",
                    'echo ==pynvml; python3 -c "$DEVICES"; echo ==gpustat; '
                    'python3 -m gpustat --json; echo ==nvitop; python3 -m nvitop -1; '
                    f'echo ==nvtop; {NVTOP}; echo ==end', check=False)
    out = sections(result.stdout)
    assert "end" in out, result.stdout + result.stderr
    seen = json.loads(out["pynvml"])
    assert seen == json.loads(on_node.stdout)
    gpus = view_gpus(node.mount.path)
    assert [(g["uuid"], g["bus_id"]) for g in seen] == [
        (g.uuid, nvml_bus_id(g.bdf)) for g in gpus]
    # BAR1: the GPU's second region in its sysfs resource file, none of it used; a MIG
    # device's, its memory units' share less 1 MiB (as nvidia-smi lists it)
    for g, view in zip(seen, gpus, strict=True):
        start, end = (int(v, 16) for v in (node.mount.path / "sys/bus/pci/devices" / view.bdf
                                           / "resource").read_text().splitlines()[1].split()[:2])
        assert g["bar1"] == [end - start + 1, end - start + 1, 0], g
        shares = {(end - start + 1) // 8 * units - MIB for units in (1, 2, 4, 8)}
        assert all(device[4] in shares for device in g["mig"]), (g["mig"], shares)
    # gpustat and nvitop there: every GPU by the view's UUID, and by its bus ID
    report = json.loads(out["gpustat"])
    assert [(g["index"], g["uuid"]) for g in report["gpus"]] == [
        (i, g.uuid) for i, g in enumerate(gpus)]
    missing = [g.bdf for g in gpus if nvml_bus_id(g.bdf) not in out["nvitop"]]
    assert not missing, out["nvitop"]
    # nvtop there (it opens libnvidia-ml.so), under a tmux of the container's own: a line
    # for every GPU, by index and the view's name
    shown = [f"Device {i} [{g.name}]" for i, g in enumerate(gpus)]
    assert all(line in out["nvtop"] for line in shown), out["nvtop"]
    # MIG devices: one per compute instance the capability files list
    caps = node.mount.path / "proc/driver/nvidia/capabilities"
    instances = sorted(caps.glob("gpu*/mig/gi*/ci*"))
    assert sum(len(g["mig"]) for g in seen) == len(instances)
    assert bool(instances) == (name == "h100-mig")
    assert all(g["mig_mode"] == [1, 1] for g in seen if g["mig"]), seen
    # the fabric: GB200's trays are in one (NVML_GPU_FABRIC_STATE_COMPLETED); elsewhere none
    fabric = [g["fabric"] for g in seen]
    if name == "gb200":
        assert all(isinstance(f, list) and f[2] == 3 for f in fabric), fabric
        assert len({f[0] for f in fabric}) == 1, fabric  # one cluster
    else:
        assert all(isinstance(f, str) and f.startswith("error") for f in fabric), fabric
