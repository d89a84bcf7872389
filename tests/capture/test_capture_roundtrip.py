"""Round trips: capture a mount of every shipped profile and two of nvml-mock's with
``--root``, mount the captured profile, and every static file of the two views is the same
(``views.PER_READ`` lists what is not: counters and times that move with every read), but for
the MIG instances, which no file describes whole (their profiles are NVML's: docs/capture.md).

They run in the first pass only (tests/helpers/passes.py): a capture reads the same tree in
either cache mode, which tests/fuse proves each serves alike.

The shipped profiles are mounted without a node name, as the README's first mount is: the
node's GUIDs and LIDs are then made from the host's name, which the view does not show, so
the capture must keep them as they are. nvml-mock's are mounted as ``node-a`` and captured
with that name: the name and the GUIDs agree, and nothing is pinned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mokkafs.surfaces import ROOTS
from tests.helpers.captures import mounted, run_capture
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import ALL_PROFILES, profile_id
from tests.helpers.views import differences, snapshot

# nvml-mock's profiles share their shipped namesakes' shapes; what is theirs alone is the
# node name that pins the GUIDs (node_args), proven by two of them: a DGX and a Grace tray.
NVML_MOCK_TRIPS = ("nvml-mock/b200", "nvml-mock/gb200")
ROUND_TRIPS = [p for p in ALL_PROFILES
               if p.parent == SHIPPED_PROFILES or profile_id(p) in NVML_MOCK_TRIPS]
assert len(ROUND_TRIPS) == len(NVML_MOCK_TRIPS) + 9, "a profile is gone"
# The daemon's own places (NVML's) are no kernel files: a real node has none to capture
# (docs/capture.md). Their directories on the way (run/) are the view's alone too.
OWN = tuple(root.path for root in ROOTS if root.own)
assert OWN, "no own place left to leave out"


def own_place(path: str) -> bool:
    return any(path == p or path.startswith(f"{p}/") or p.startswith(f"{path}/") for p in OWN)

NOT_CAPTURED = re.compile(r"^(dev/nvidia-caps/nvidia-cap(?![12]$)\d+|"
                          r"proc/driver/nvidia/capabilities/gpu\d+(/.*)?)$")


def node_args(profile: Path) -> list[str]:
    """The node name mount and capture get: none for the shipped profiles (the host's name,
    which the view does not show), ``node-a`` for nvml-mock's."""
    return [] if profile.parent == SHIPPED_PROFILES else ["--node-name", "node-a"]


@pytest.mark.parametrize("profile", ROUND_TRIPS, ids=profile_id)
def test_a_capture_of_a_mount_serves_the_same_view(tmp_path: Path, profile: Path) -> None:
    captured = tmp_path / "captured.yaml"
    node = node_args(profile)
    with mounted(profile, tmp_path / "a", *node) as first:
        done = run_capture("--root", str(first.path), *node, "--output", str(captured))
        assert done.returncode == 0, done.stderr
        before = {p: v for p, v in snapshot(first.path).items() if not own_place(p)}
    header = captured.read_text().splitlines()[0]
    assert header.endswith(" kept verbatim") and ", 0 kept verbatim" in header, header
    with mounted(captured, tmp_path / "b", *node) as second:
        after = {p: v for p, v in snapshot(second.path).items() if not own_place(p)}
    assert len(before) > 1000
    left_out = {p for p in before if NOT_CAPTURED.match(p)}
    assert bool(left_out) == ("mig" in profile.stem), sorted(left_out)[:5]
    assert differences({p: v for p, v in before.items() if p not in left_out}, after) == []
