"""The machine's shape is one fact: every PCI function's NUMA node and CPUs are the machine's,
a profile's ``machine:`` section is checked against its root complexes with errors naming the
field, and ``show: false`` leaves the CPUs and nodes to the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import load_state
from tests.helpers.live import profile_text
from tests.helpers.profiles import ALL_PROFILES, profile_id, state_of, tree_of


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_every_function_names_cpus_and_a_node_the_machine_has(path: Path) -> None:
    state = state_of(path)
    m = state.machine
    nodes = {n.id: set(n.cpus) for n in m.nodes}
    assert sorted(c.id for c in m.cpus) == list(range(state.nr_cpus))
    for fn in state.functions:
        assert set(fn.cpus) <= set(range(state.nr_cpus)), fn.bdf
        if fn.numa_node >= 0:
            assert set(fn.cpus) == nodes[fn.numa_node], fn.bdf  # its node's CPUs, no other


def test_dgx_h100_is_two_sockets_of_56_cores_with_smt() -> None:
    m = state_of("h100").machine
    assert len(m.cpus) == 224 and {c.package for c in m.cpus} == {0, 1}
    assert m.node(0).cpus == (*range(0, 56), *range(112, 168))
    assert {(c.package, c.core) for c in m.cpus if c.id in (5, 117)} == {(0, 5)}  # threads


def test_grace_gpus_memory_is_a_block_of_nodes_as_a_gb300_tray_shows() -> None:
    state = state_of("gb200")
    m = state.machine
    hbm = {n.gpu: n.id for n in m.nodes if n.gpu and n.memory_kib}
    assert hbm == {"0008:01:00.0": 2, "0009:01:00.0": 10, "0018:01:00.0": 18,
                   "0019:01:00.0": 26}
    assert [n.id for n in m.nodes] == list(range(34))  # every block online, as numactl -H
    empty = [n.id for n in m.nodes if not n.memory_kib]
    assert empty == [i for i in range(2, 34) if i not in hbm.values()]
    distance = {n.id: dict(zip((x.id for x in m.nodes), n.distance, strict=True))
                for n in m.nodes}
    assert distance[2][3] == distance[3][9] == 11 and distance[2][10] == distance[9][26] == 40
    assert distance[0][2] == 80 and distance[0][18] == 120 and distance[0][1] == 40
    assert state.function("0018:01:00.0").numa_node == 1  # the PCI side names its Grace
    assert state.machine.model.model == 0xD4F and len(state.machine.cpus) == 144


@pytest.mark.parametrize("profile", ["gb200", "gb300"])
def test_grace_root_ports_are_nvidias(profile: str) -> None:
    state = state_of(profile)
    ports = {fn.bdf: (fn.vendor, fn.device) for fn in state.functions if fn.kind == "bridge"
             and fn.parent is None}
    assert ports["0008:00:00.0"] == ports["0019:00:00.0"] == (0x10DE, 0x22B1)  # C2C, to a GPU
    assert ports["0000:00:00.0"] == ports["0012:00:00.0"] == (0x10DE, 0x22B2)
    assert len(ports) == 8


def _compile(tmp_path: Path, text: str) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(text)
    load_state(path, Options(node_name="a"))


def test_a_root_naming_a_cpu_the_machine_lacks_is_refused(tmp_path: Path) -> None:
    text = profile_text("h100").replace("cores_per_socket: 56", "cores_per_socket: 28")
    with pytest.raises(ProfileError) as err:
        _compile(tmp_path, text)
    message = str(err.value)
    assert "cpu_affinity" in message and "names CPU 167" in message and "node.yaml" in message


def test_a_root_on_a_node_no_package_has_is_refused(tmp_path: Path) -> None:
    text = profile_text("h100").replace("sockets: 2", "sockets: 1")
    with pytest.raises(ProfileError, match=r"numa_node.*node 1 is no package's"):
        _compile(tmp_path, text)


def test_show_false_leaves_the_cpus_to_the_host(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text(profile_text("h100").replace("  memory_per_socket_gib: 1024",
                                                 "  memory_per_socket_gib: 1024\n  show: false"))
    tree = tree_of(state_of(path))
    assert tree.resolve("sys/devices/system/cpu") is None
    assert tree.resolve("proc/cpuinfo") is None
    assert tree.resolve("sys/bus/pci/devices") is not None
