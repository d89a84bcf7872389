"""A container given the CDI device finds the MIG instances' capability files and their
``/dev/nvidia-caps/nvidia-cap<minor>`` nodes, and (gb200) IMEX channel 0, on the majors its
/proc/devices names: what the device plugin and the DRA driver hand a MIG or compute-domain
workload."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.surfaces.dev import char_devices
from tests.helpers.containers import Node, start_node
from tests.helpers.nvidia_dev import proc_majors
from tests.helpers.profiles import state_of

pytestmark = pytest.mark.consumers

SCRIPT = r"""
echo ==caps; for f in /proc/driver/nvidia/capabilities/gpu*/mig/gi*/access \
  /proc/driver/nvidia/capabilities/gpu*/mig/gi*/ci*/access; do
  echo "$f $(sed -n 's/^DeviceFileMinor: //p' $f)"; done
echo ==stat; stat -c '%n %t %T %a' /dev/nvidia-caps/* /dev/nvidia-caps-imex-channels/* 2>/dev/null
echo ==proc; cat /proc/devices
"""


@pytest.fixture
def mig_node(tmp_path: Path, hosttools_image: str) -> Iterator[Node]:
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    repo = Path(__file__).parents[2]
    text = (repo / "mokkafs/profiles/h100-mig.yaml").read_text()
    # gb200's IMEX parameters on the MIG node, so one container sees both
    profile.write_text(text.replace('  driver_version: "550.163.01"\n',
                                    '  driver_version: "550.163.01"\n'
                                    '  imex: {create_channel0: true}\n', 1))
    yield from start_node(tmp_path, profile)


def test_mig_instances_and_imex_channel_in_a_container(mig_node: Node) -> None:
    state = state_of(mig_node.profile)
    out = {s.split("\n", 1)[0]: s.split("\n", 1)[1] for s in mig_node.run(SCRIPT).split("==")[1:]}
    majors = proc_majors(out["proc"])
    caps = {}
    for line in out["caps"].splitlines():
        path, number = line.split()
        caps[path] = int(number)
    want = sum(1 + len(gi.compute) for g in state.mig for gi in g.instances)
    assert len(caps) == want == 29
    seen = {}
    for line in out["stat"].splitlines():
        m = re.fullmatch(r"(\S+) ([0-9a-f]+) ([0-9a-f]+) (\d+)", line)
        assert m, line
        seen[m[1]] = (int(m[2], 16), int(m[3], 16), m[4])
    for path, minor in caps.items():
        # (the runtime makes spec nodes 0666: the spec carries no fileMode)
        assert seen[f"/dev/nvidia-caps/nvidia-cap{minor}"][:2] == \
            (majors["nvidia-caps"], minor), path
    assert seen["/dev/nvidia-caps-imex-channels/channel0"] == \
        (majors["nvidia-caps-imex-channels"], 0, "666")
    listed = {p for p, *_ in char_devices(state) if p.startswith("/dev/nvidia-caps")}
    assert set(seen) == listed
