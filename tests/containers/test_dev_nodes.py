"""A container given the CDI device finds the NVIDIA driver's device nodes, on the majors its
/proc/devices names, and cannot open them."""

from __future__ import annotations

import re

import pytest

from mokkafs.surfaces.dev import char_devices
from tests.helpers.containers import Node
from tests.helpers.nvidia_dev import driver_of, proc_majors
from tests.helpers.profiles import state_of

pytestmark = pytest.mark.consumers

SCRIPT = r"""
echo ==ls; ls -d /dev/nvidia* /dev/nvidia-caps/*
echo ==stat; stat -c '%n %F %t %T %a' /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-[mnu]* \
  /dev/nvidia-caps/* /dev/infiniband/*
echo ==proc; cat /proc/devices
echo ==open; for f in /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm; do
  head -c1 $f >/dev/null 2>&1 && echo "$f opened" || echo "$f $(head -c1 $f 2>&1)"; done
"""


def sections(out: str) -> dict[str, str]:
    return {s.split("\n", 1)[0]: s.split("\n", 1)[1] for s in out.split("==")[1:]}


def test_nvidia_nodes_in_a_container(h100_node: Node) -> None:
    state = state_of(h100_node.profile)
    out = sections(h100_node.run(SCRIPT))
    want = {path: (major, minor, mode) for path, major, minor, mode in char_devices(state)}
    listed = set(out["ls"].split())
    assert listed == {p for p in want if p.startswith("/dev/nvidia")} | {"/dev/nvidia-caps"}
    assert "/dev/nvidia7" in listed and "/dev/nvidia-nvswitch3" in listed
    majors = proc_majors(out["proc"])
    majors.setdefault("misc", 10)
    seen = {}
    for line in out["stat"].splitlines():
        m = re.fullmatch(r"(\S+) character special file ([0-9a-f]+) ([0-9a-f]+) ([0-7]+)", line)
        assert m, line
        seen[m[1]] = (int(m[2], 16), int(m[3], 16), int(m[4], 8))  # the spec's fileMode
        assert seen[m[1]][0] == majors[driver_of(m[1].removeprefix("/"))], line
    assert seen == want
    # The spec lets the container make the nodes, not read or write them ("m"): the
    # device cgroup refuses the open, whatever driver the host has at that number.
    for line in out["open"].splitlines():
        assert line.endswith("Operation not permitted"), line
