"""The commands that need no mount: tree (and --cat), render over an existing tree,
--no-infiniband, --no-machine; and that they never import pyfuse3."""

from __future__ import annotations

import argparse
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from mokkafs.cli import parser
from mokkafs.errors import EXIT_STATUSES
from mokkafs.tree.nodes import File
from tests.helpers.cli import mokkafs
from tests.helpers.mounts import REPO
from tests.helpers.profiles import H100_GPU0, H100_NIC0, device_path, state_of, tree_of


def test_tree_cat_shows_text_and_binary_content() -> None:
    nic = device_path(H100_NIC0)
    result = mokkafs("tree", "--profile", "h100", "--node-name", "node-a", "--cat", nic)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"-r--r--r-- {nic}/vendor = 0x15b3" in lines
    assert f"-rw-r--r-- {nic}/config = <4096 bytes of binary>" in lines
    assert f"-r--r--r-- {nic}/infiniband/mlx5_0/fw_ver = 28.39.2048" in lines
    assert any(f" {nic}/driver -> " in line for line in lines)
    assert all(line.split(" ", 1)[1].startswith(nic) for line in lines)
    missing = mokkafs("tree", "--profile", "h100", "sys/nowhere")
    assert missing.returncode == 2 and "no such path in the view" in missing.stderr


def test_tree_follows_the_links_in_a_path_as_cat_through_the_mount_does() -> None:
    vendor = f"sys/bus/pci/devices/{H100_GPU0}/vendor"
    result = mokkafs("tree", "--profile", "h100", "--cat", vendor)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"-r--r--r-- {vendor} = 0x10de\n"
    below = mokkafs("tree", "--profile", "h100", f"sys/bus/pci/devices/{H100_GPU0}")
    lines = below.stdout.splitlines()
    assert lines[0] == f"drwxr-xr-x sys/bus/pci/devices/{H100_GPU0}", lines[:2]
    assert f"-r--r--r-- sys/bus/pci/devices/{H100_GPU0}/vendor" in lines
    root = mokkafs("tree", "--profile", "h100", "sys/bus/../..")
    assert root.stdout.startswith("drwxr-xr-x sys/bus/../..\n"), root.stdout[:200]
    assert "\n-r--r--r-- sys/bus/../../proc/devices\n" in root.stdout
    up = mokkafs("tree", "--profile", "h100", "sys/bus/../../..")
    assert up.returncode == 2 and "'..' leads outside the view" in up.stderr


def test_no_infiniband_leaves_no_trace_of_it() -> None:
    result = mokkafs("tree", "--profile", "h100", "--no-infiniband")
    assert result.returncode == 0, result.stderr
    paths = [line.split(" ", 1)[1].split(" -> ")[0] for line in result.stdout.splitlines()]
    assert not [p for p in paths if "infiniband" in p or "mlx5" in p]
    assert "proc/devices" in paths
    listed = {p.rsplit("/", 1)[1] for p in paths if p.startswith("sys/bus/pci/devices/")}
    functions = state_of("h100").functions
    assert listed == {fn.bdf for fn in functions if fn.driver != "mlx5_core"}
    assert len([fn for fn in functions if fn.driver == "nvidia"]) == 8  # the GPUs
    assert len([fn for fn in functions if fn.driver == "nvidia-nvswitch"]) == 4


def test_no_machine_serves_no_cpu_node_cpuinfo_or_meminfo() -> None:
    """--no-machine does what the profile's machine.show: false does, without editing it:
    the host's CPUs show through, and the PCI side keeps the profile's shape."""
    def paths(*extra: str) -> set[str]:
        result = mokkafs("tree", "--profile", "h100", "--node-name", "node-a", *extra)
        assert result.returncode == 0, result.stderr
        return {line.split(" ", 1)[1].split(" -> ")[0].split(" = ")[0]
                for line in result.stdout.splitlines()}

    machine = ("sys/devices/system", "proc/cpuinfo", "proc/meminfo")
    full, off = paths(), paths("--no-machine")
    assert {"sys/devices/system/cpu/cpu223", "sys/devices/system/node/node1", "proc/cpuinfo",
            "proc/meminfo"} <= full
    assert not [p for p in off if p.startswith(machine)]
    assert {p for p in full if not p.startswith(machine)} == off
    assert state_of("h100").machine.shown
    text = (REPO / "mokkafs/profiles/h100.yaml").read_text()
    assert "show:" not in text  # the profile itself asks for the machine


def test_render_over_an_existing_tree_becomes_the_new_view(tmp_path: Path) -> None:
    dest = tmp_path / "view"
    for profile in ("h100", "a100"):
        result = mokkafs("render", "--profile", profile, "--node-name", "node-a", str(dest))
        assert result.returncode == 0, result.stderr
    fresh = tmp_path / "fresh"
    assert mokkafs("render", "--profile", "a100", "--node-name", "node-a",
                   str(fresh)).returncode == 0
    listing = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert listing == sorted(str(p.relative_to(fresh)) for p in fresh.rglob("*"))
    assert not (dest / f"sys/bus/pci/devices/{H100_GPU0}").exists()  # h100's, gone
    tree = tree_of(state_of("a100"))
    for path, entry in tree.walk():
        if not path:
            continue
        st = os.lstat(dest / path)
        assert stat.S_IFMT(st.st_mode) == stat.S_IFMT(entry.mode), path
        if stat.S_ISREG(st.st_mode):
            if isinstance(entry.node, File) and not entry.node.dynamic:  # not clock-driven
                assert (dest / path).read_bytes() == (fresh / path).read_bytes(), path
            assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(entry.mode), path


def test_tree_and_render_never_import_pyfuse3(tmp_path: Path) -> None:
    """A machine without FUSE can still look at a view: a pyfuse3 that fails to import."""
    broken = tmp_path / "broken"
    (broken / "pyfuse3").mkdir(parents=True)
    (broken / "pyfuse3/__init__.py").write_text("raise ImportError('no FUSE here')\n")
    env = {"PYTHONPATH": str(broken)}
    assert mokkafs("tree", "--profile", "t4", env=env).returncode == 0
    result = mokkafs("render", "--profile", "t4", str(tmp_path / "out"), env=env)
    assert result.returncode == 0, result.stderr
    assert mokkafs("profiles", env=env).returncode == 0
    mount = mokkafs("mount", str(tmp_path), env=env)
    assert "no FUSE here" in mount.stderr  # the one command that needs it does import it


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_help_describes_every_command_and_argument_and_lists_the_exit_statuses() -> None:
    top = parser()
    assert "/proc (devices, cpuinfo" in (top.description or "")
    assert "/dev/nvidia*" in (top.description or "")
    for p in _parsers(top):
        assert p.description, f"{p.prog} has no description"
        for action in p._actions:
            assert action.help, f"{p.prog}: {action.dest} has no help"
    shown = mokkafs("--help").stdout
    statuses = re.findall(r"^  (\d+) +\S", shown.split("exit status:\n", 1)[1], re.M)
    assert [int(s) for s in statuses] == list(EXIT_STATUSES)
    assert "exit status:\n" in mokkafs("mount", "--help").stdout
