"""MIG instances and IMEX channels on a real mount: the capability files, the device nodes
with their numbers, and hot swaps of a layout under a reader that loops the whole time (no
pass sees a compute instance without its GPU instance, or a mixture of two layouts)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from mokkafs.surfaces.mig import instance_paths
from tests.helpers.live import live_mount, profile_text, rename_over
from tests.helpers.mig_reader import passed_since
from tests.helpers.mounts import REPO, Mount, mokkafs_mount, wait_for
from tests.helpers.profiles import state_of

CAPS = "proc/driver/nvidia/capabilities"
# GPU 0 of h100-mig re-partitioned: one 7g.80gb (GI 0) where four instances were
WHOLE_7G = """    mig:
      mode_current: enabled
      mode_pending: enabled
      gpu_instances: [{profile: "7g.80gb"}]
"""


def expected_files(profile_text_: str | Path, gpu: int = 0) -> dict[str, str]:
    state = state_of(profile_text_)
    out = {}
    for mig in state.mig:
        if mig.minor == gpu:
            for path, minor in instance_paths(mig):
                out[f"{CAPS}/{path}"] = (f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\n"
                                         "DeviceFileModify: 1\n")
    return out


def served_files(mount: Mount) -> dict[str, str]:
    found = {}
    for top, _, names in os.walk(mount.path / CAPS):
        for name in names:
            path = Path(top) / name
            if "/mig/gi" in str(path):
                found[str(path.relative_to(mount.path))] = path.read_text()
    return found


def test_capabilities_and_nodes_are_served(tmp_path: Path) -> None:
    state = state_of("h100-mig")
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100-mig",
                                          "--node-name", "node-a"]) as mount:
        expected: dict[str, str] = {}
        for gpu in range(8):
            expected |= expected_files(REPO / "mokkafs/profiles/h100-mig.yaml", gpu)
        assert served_files(mount) == expected
        assert sorted(p.name for p in (mount.path / CAPS).iterdir()) == \
            ["fabric-imex-mgmt", "gpu0", "gpu1", "gpu2", "gpu3", "mig"]
        caps = state.major("nvidia-caps")
        for path, text in expected.items():
            minor = int(text.split()[1])
            st = os.stat(mount.path / "dev/nvidia-caps" / f"nvidia-cap{minor}")
            assert stat.S_ISCHR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o444, path
            assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == (caps, minor)
        assert not (mount.path / "dev/nvidia-caps-imex-channels").exists()
        params = (mount.path / "proc/driver/nvidia/params").read_text()
        assert "ImexChannelCount: 2048\nCreateImexChannel0: 0\n" in params


def test_gb200_serves_imex_channel0_on_the_major_proc_devices_names(tmp_path: Path) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "gb200",
                                          "--node-name", "node-a"]) as mount:
        chars = (mount.path / "proc/devices").read_text().split("\n\n")[0].splitlines()[1:]
        majors = {name: major for major, name in (line.split(None, 1) for line in chars)}
        channels = mount.path / "dev/nvidia-caps-imex-channels"
        assert [p.name for p in channels.iterdir()] == ["channel0"]
        st = os.stat(channels / "channel0")
        assert stat.S_ISCHR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
        assert os.major(st.st_rdev) == int(majors["nvidia-caps-imex-channels"])
        assert os.minor(st.st_rdev) == 0
        assert "CreateImexChannel0: 1\n" in (mount.path / "proc/driver/nvidia/params").read_text()
        assert (mount.path / CAPS / "fabric-imex-mgmt").read_text().startswith(
            "DeviceFileMinor: 4323\n")


def repartitioned() -> str:
    """h100-mig with GPU 0 as one 7g.80gb: GIs 2, 4, 7, 8 and their CIs go, GI 0 comes."""
    text = profile_text("h100-mig")
    start = text.index("    mig:                       # nvml-mock's explicit form")
    end = text.index("  - index: 1\n")
    return text[:start] + WHOLE_7G + text[end:]


def test_a_layout_swap_is_atomic_for_a_reader_looping_through_it(tmp_path: Path) -> None:
    layouts = {"mixed": profile_text("h100-mig"), "whole": repartitioned()}
    files = {}
    for name, text in layouts.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        files[name] = expected_files(path)
    assert sorted(files["whole"]) == [f"{CAPS}/gpu0/mig/gi0/access",
                                      f"{CAPS}/gpu0/mig/gi0/ci0/access"]
    assert len(files["mixed"]) == 9
    with live_mount(tmp_path, "h100-mig") as live:
        stop, out = tmp_path / "stop", tmp_path / "reads.jsonl"
        reader = subprocess.Popen([sys.executable, "-m", "tests.helpers.mig_reader",
                                   str(live.mount.path), "0", str(out), str(stop)], cwd=REPO)
        acks: list[tuple[float, float, str]] = []
        try:
            current, generation = "mixed", 1
            for _ in range(30):
                current = "whole" if current == "mixed" else "mixed"
                started = time.monotonic()
                rename_over(live, layouts[current])
                generation += 1
                acked = live.wait_generation(generation)
                acks.append((started, acked, current))
                assert live.get("/healthz")[0] == 200
                # let the reader make one whole pass of this layout before the next swap
                wait_for(partial(passed_since, out, acked), 20, "a reader pass")
        finally:
            stop.touch()
            reader.wait(timeout=30)
        passes = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(passes) > 30
    whole_minors = {int(t.split()[1]) for t in files["whole"].values()}
    mixed_minors = {int(t.split()[1]) for t in files["mixed"].values()}
    stable = 0
    for p in passes:
        read = {k: v for k, v in p["files"].items() if not v.startswith("errno")}
        # every file read is one layout's, byte for byte
        for path, text in read.items():
            assert text in (files["mixed"].get(path), files["whole"].get(path)), (path, text)
        # no compute instance whose GPU instance the same pass found gone
        for path in read:
            if "/ci" in path:
                gi = path.rsplit("/", 2)[0] + "/access"
                assert gi in read, (path, p["files"])  # (read before its CIs: walk order)
        # a pass between an acknowledgement and the next swap sees exactly that layout
        for (_, acked, name), nxt in zip(acks, [*acks[1:], (float("inf"), 0.0, "")],
                                         strict=True):
            if acked <= p["start"] and p["end"] <= nxt[0]:
                stable += 1
                assert p["files"] == files[name], (name, p)
                minors = set(p["minors"]) - {1, 2}
                assert minors & (whole_minors | mixed_minors) == \
                    (whole_minors if name == "whole" else mixed_minors)
    assert stable >= 30  # every layout was read whole at least once
