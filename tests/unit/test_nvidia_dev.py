"""The NVIDIA driver's device nodes: one source of truth with /proc/devices, in the view and
in the CDI spec, for every shipped profile and every nvml-mock profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mokkafs.delivery.cdi import build_spec
from mokkafs.faults.effects import applied, at
from mokkafs.state import State
from mokkafs.surfaces.dev import char_devices
from mokkafs.surfaces.proc_devices import PATH as PROC_DEVICES
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import CharDevice, File
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.nvidia_dev import driver_of, proc_majors
from tests.helpers.profiles import ALL_PROFILES, profile_id, state_of, tree_of


def view_nodes(tree: Tree) -> dict[str, CharDevice]:
    return {n.path: n for part in tree.parts.values() for n in part[1]
            if isinstance(n, CharDevice)}


def proc_devices(tree: Tree) -> str:
    node = next(n for part in tree.parts.values() for n in part[1]
                if isinstance(n, File) and n.path == PROC_DEVICES)
    return node.read(0.0).decode()


def with_misc(state: State) -> dict[str, int]:
    majors = proc_majors(proc_devices(tree_of(state)))
    majors.setdefault("misc", 10)  # the host's (tests' host facts have no misc line)
    return majors


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=profile_id)
def test_every_char_device_is_on_the_major_proc_devices_names(profile: Path) -> None:
    state = state_of(profile)
    tree = tree_of(state)
    majors = with_misc(state)
    nodes = view_nodes(tree)
    spec = build_spec(Path("/run/mokkafs/node"), char_devices(state), hook="/bin/true")
    spec_nodes = {n["path"]: (n["major"], n["minor"], n["fileMode"]) for n in spec["devices"][0][
        "containerEdits"].get("deviceNodes", [])}
    assert spec_nodes == {f"/{p}": (n.major, n.minor, n.mode) for p, n in nodes.items()}
    named = {d["name"]: {n["path"] for n in d["containerEdits"].get("deviceNodes", [])}
             for d in spec["devices"]}
    assert named.get("nvidia", set()) == {p for p in spec_nodes if p.startswith("/dev/nvidia")}
    for path, node in nodes.items():
        assert node.major == majors[driver_of(path)], path
    gpus = state.gpus()
    minors = sorted(fn.gpu.minor for fn in gpus if fn.gpu is not None)
    assert sorted(int(p[len("dev/nvidia"):]) for p in nodes
                  if re.fullmatch(r"dev/nvidia[0-9]+", p)) == minors
    if gpus:
        for name in ("nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools",
                     "nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap2"):
            assert f"dev/{name}" in nodes, name
    switches = [fn for fn in state.functions if fn.kind == "nvswitch"]
    assert sorted(p for p in nodes if "nvswitch" in p) == sorted(
        [f"dev/nvidia-nvswitch{i}" for i in range(len(switches))]
        + (["dev/nvidia-nvswitchctl"] if switches else []))
    assert ("nvidia-nvswitch" in majors) == bool(switches)


def test_minors_and_modes_are_the_drivers() -> None:
    nodes = view_nodes(tree_of(state_of("a100")))  # 8 GPUs, 6 NVSwitches
    got = {p: (n.minor, n.mode) for p, n in nodes.items() if "infiniband" not in p}
    assert got == {**{f"dev/nvidia{i}": (i, 0o666) for i in range(8)},
                   "dev/nvidiactl": (255, 0o666), "dev/nvidia-modeset": (254, 0o666),
                   "dev/nvidia-uvm": (0, 0o666), "dev/nvidia-uvm-tools": (1, 0o666),
                   "dev/nvidia-caps/nvidia-cap1": (1, 0o400),
                   "dev/nvidia-caps/nvidia-cap2": (2, 0o444),
                   **{f"dev/nvidia-nvswitch{i}": (i, 0o666) for i in range(6)},
                   "dev/nvidia-nvswitchctl": (255, 0o666)}


def test_a_profiles_minor_numbers_name_the_nodes(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text((SHIPPED_PROFILES / "t4.yaml").read_text()
                       + "proc_devices: {nvidia_uvm: 480}\n")
    state = state_of(profile)
    nodes = view_nodes(tree_of(state))
    assert (nodes["dev/nvidia-uvm"].major, nodes["dev/nvidia-uvm-tools"].major) == (480, 480)
    assert with_misc(state)["nvidia-uvm"] == 480


def test_a_removed_gpu_takes_its_node_and_the_driver_keeps_its_own(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text((SHIPPED_PROFILES / "t4.yaml").read_text()
                       + "faults:\n  - {name: r, kind: gpu-removed, target: gpu0}\n")
    state = at(applied(state_of(profile), 0.0), 0.0)
    nodes = view_nodes(tree_of(state))
    assert "dev/nvidia0" not in nodes and "dev/nvidia1" in nodes
    assert "dev/nvidiactl" in nodes and "dev/nvidia-uvm" in nodes
