"""mokkafs's NVML in a container given the CDI spec, as NVIDIA's container toolkit gives the
driver's: the library bound where the toolkit binds it, found by its soname through the linker
cache the ldcache hook wrote (no LD_LIBRARY_PATH, no MOKKAFS_ROOT); nvidia-ml-py, gpustat and
``nvitop -1`` there see the view's GPUs, and NVML's own place (docs/nvml.md)."""

from __future__ import annotations

import json
import re
import sysconfig

import pytest

from mokkafs.delivery.cdi import UPSTREAM_SCHEMA, validate
from tests.helpers.containers import IMAGE, IMAGE_TOOLS, RUN, Node, podman
from tests.helpers.nvml import nvml_bus_id, place_values, view_gpus
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
