"""The profile's machine inside a container given the CDI spec (docs/machine.md): the view's
/sys and its /proc/cpuinfo and /proc/meminfo, what numactl, nproc, getconf and Python are
told, and a profile with ``machine.show: false`` leaving the container its own."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.containers import Node, start_node
from tests.helpers.mounts import REPO, wait_for
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.consumers

SCRIPT = r"""
echo ==numactl; numactl --hardware
echo ==processors; grep -c ^processor /proc/cpuinfo
echo ==nproc; nproc
echo ==all; nproc --all
echo ==conf; getconf _NPROCESSORS_CONF
echo ==onln; getconf _NPROCESSORS_ONLN
echo ==python; python3 -c 'import os
print(os.cpu_count(), sorted(os.sched_getaffinity(0)))
try:
    os.sched_setaffinity(0, {100}); print("pinned")
except OSError as e:
    print(e.errno)'
echo ==memtotal; grep ^MemTotal: /proc/meminfo
echo ==online; cat /sys/devices/system/cpu/online
echo ==end
"""


def sections(output: str) -> dict[str, str]:
    parts = re.split(r"^==(\w+)\n", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def memtotal(meminfo: str) -> str:
    found = re.search(r"^MemTotal:\s+(\d+) kB$", meminfo, flags=re.M)
    assert found, meminfo
    return found.group(1)


def test_a_container_given_the_view_is_told_the_profiles_machine(h100_node: Node) -> None:
    require_tool("numactl")
    machine = state_of(h100_node.profile, node_name="node-a").machine
    assert len(machine.cpus) == 224
    out = sections(h100_node.run(SCRIPT))
    numactl = out["numactl"]
    cpu_nodes = [n for n in machine.nodes if n.cpus]
    assert f"available: {len(cpu_nodes)} nodes (0-1)" in numactl
    for node in cpu_nodes:
        listed = re.search(rf"^node {node.id} cpus:(.*)$", numactl, flags=re.M)
        assert listed and {int(x) for x in listed.group(1).split()} == set(node.cpus)
    # /proc/cpuinfo and /proc/meminfo are the view's, bound by the spec's hook
    assert out["processors"] == "224\n"
    view = (h100_node.mount.path / "proc/meminfo").read_text()
    assert memtotal(out["memtotal"]) == memtotal(view) != memtotal(
        Path("/proc/meminfo").read_text())
    assert int(memtotal(view)) > 19 * (1 << 30) // 10  # 2 x 1 TiB, in kB
    # sysconf counts the view's CPUs; the scheduler's answers stay the kernel's
    own = sorted(os.sched_getaffinity(0))  # podman sets no cpuset: the container's = ours
    assert out["nproc"] == f"{len(own)}\n"
    assert out["all"] == out["conf"] == out["onln"] == "224\n"
    assert out["online"] == "0-223\n"
    assert out["python"] == f"224 {own}\n{errno.EINVAL}\n"  # CPU 100 is not the host's


@pytest.fixture
def hidden_machine_node(tmp_path: Path, hosttools_image: str) -> Iterator[Node]:
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    text = (REPO / "mokkafs/profiles/h100.yaml").read_text()
    assert text.count("\nmachine:\n") == 1
    profile.write_text(text.replace("\nmachine:\n", "\nmachine:\n  show: false\n"))
    yield from start_node(tmp_path, profile)


def devices(node: Node) -> list[str]:
    return [d["name"] for d in json.loads(node.spec.read_text())["devices"]]


def printed_devices(node: Node) -> list[str]:
    """The devices `mokkafs cdi` prints for the same mount, from what it serves."""
    out = subprocess.run([sys.executable, "-m", "mokkafs", "cdi", "--mountpoint",
                          str(node.mount.path), "--cdi-kind", node.kind], capture_output=True,
                         text=True, check=True, cwd=REPO, timeout=60).stdout
    return [d["name"] for d in json.loads(out)["devices"]]


def test_machine_show_false_leaves_a_container_its_own_cpus_and_memory(
        hidden_machine_node: Node) -> None:
    node = hidden_machine_node
    assert "proc-machine" not in devices(node)
    assert printed_devices(node) == devices(node)
    out = sections(node.run(SCRIPT))
    host = Path("/proc/cpuinfo").read_text().count("\nprocessor\t:") + 1
    assert out["processors"] == f"{host}\n"
    assert memtotal(out["memtotal"]) == memtotal(Path("/proc/meminfo").read_text())
    assert out["online"] == Path("/sys/devices/system/cpu/online").read_text()
    assert out["all"] == out["conf"] == f"{os.cpu_count()}\n"
    # a swap that shows the machine again gives the next containers its /proc files
    tmp = node.profile.with_name(".swap")
    tmp.write_text((REPO / "mokkafs/profiles/h100.yaml").read_text())
    os.rename(tmp, node.profile)
    wait_for(lambda: "proc-machine" in devices(node), 20, "the machine's devices in the spec")
    assert sections(node.run(SCRIPT))["processors"] == "224\n"
    assert printed_devices(node) == devices(node)
