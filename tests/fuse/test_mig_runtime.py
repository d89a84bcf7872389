"""``mokkafs mig`` on a serving daemon: GPU and compute instances created and destroyed at run
time as ``nvidia-smi mig -cgi/-dgi/-cci/-dci`` would, each change one new view (a reader
looping through them never sees a compute instance without its GPU instance), refusals that
say why, and a profile swap that changes the GPU's own layout ending the run-time one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.live import Live, live_mount, profile_text, rename_over
from tests.helpers.mig_reader import passed_since
from tests.helpers.mounts import REPO, wait_for

GPU3 = "proc/driver/nvidia/capabilities/gpu3/mig"


def mig(live: Live, control: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mig", "--control", str(control),
                             *args], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (result.returncode == 0) is ok, (result.stdout, result.stderr)
    return result


def settle(out: Path) -> None:
    """Wait for the reader to make a whole pass of the layout served now."""
    when = time.monotonic()
    wait_for(lambda: passed_since(out, when), 20, "a reader pass")


def instances(live: Live) -> list[str]:
    base = live.mount.path / GPU3
    return sorted(str(p.relative_to(base)) for p in base.rglob("access"))


def test_instances_change_at_run_time_as_nvidia_smi_mig_changes_them(tmp_path: Path) -> None:
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    with live_mount(tmp_path, "h100-mig", extra=["--control", str(control)]) as live:
        assert instances(live) == ["gi0/access", "gi0/ci0/access"]
        mig(live, control, "-i", "3", "-dgi")
        assert instances(live) == []
        out = mig(live, control, "-i", "3", "-cgi", "9,3g.40gb", "-C").stdout
        assert out.splitlines() == ["3\tMIG 3g.40gb\t9\t1\t0:4\t0:3g.40gb",
                                    "3\tMIG 3g.40gb\t9\t2\t4:4\t0:3g.40gb"]
        assert instances(live) == ["gi1/access", "gi1/ci0/access", "gi2/access",
                                   "gi2/ci0/access"]
        refused = mig(live, control, "-i", "3", "-cci", "1c", "-gi", "1", ok=False)
        assert "need 4 slices; 3g.40gb has 3" in refused.stderr, refused.stderr
        mig(live, control, "-i", "3", "-dci", "-gi", "1")
        mig(live, control, "-i", "3", "-cci", "1c,2c", "-gi", "1")
        assert instances(live) == ["gi1/access", "gi1/ci0/access", "gi1/ci1/access",
                                   "gi2/access", "gi2/ci0/access"]
        assert (live.mount.path / GPU3 / "gi1/ci1/access").read_text().startswith(
            f"DeviceFileMinor: {3 + 3 * 135 + 9 + 2}\n")
        refused = mig(live, control, "-i", "3", "-cgi", "1g.5gb", ok=False)
        assert "has no MIG profile '1g.5gb'" in refused.stderr, refused.stderr
        refused = mig(live, control, "-i", "5", "-cgi", "19", ok=False)
        assert "GPU 5 is not in MIG mode" in refused.stderr, refused.stderr
        # a swap that leaves GPU 3's own layout keeps the run-time one; one that changes it
        # ends it
        generation = live.generation()
        rename_over(live, profile_text("h100-mig").replace("GPUs 4-7 whole", "GPUs 4-7 whole."))
        live.wait_generation(generation + 1)
        assert "gi1/ci1/access" in instances(live)
        rename_over(live, profile_text("h100-mig").replace(
            'gpu_instances: [{profile: "7g.80gb"}]', 'gpu_instances: [{profile: "4g.40gb"}]'))
        live.wait_generation(generation + 2)
        assert instances(live) == ["gi1/access", "gi1/ci0/access"]


def test_a_reader_looping_through_run_time_changes_sees_whole_layouts(tmp_path: Path) -> None:
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    with live_mount(tmp_path, "h100-mig", extra=["--control", str(control)]) as live:
        stop, out = tmp_path / "stop", tmp_path / "reads.jsonl"
        reader = subprocess.Popen([sys.executable, "-m", "tests.helpers.mig_reader",
                                   str(live.mount.path), "3", str(out), str(stop)], cwd=REPO)
        try:
            for _ in range(10):
                mig(live, control, "-i", "3", "-dgi")
                settle(out)
                made = mig(live, control, "-i", "3", "-cgi", "14,14,14,1g.10gb", "-C").stdout
                assert [line.split("\t")[3] for line in made.splitlines()] == \
                    ["3", "4", "5", "13"]
                assert live.get("/healthz")[0] == 200
                settle(out)
        finally:
            stop.touch()
            reader.wait(timeout=30)
        passes = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(passes) >= 20  # one at least after each change
    for p in passes:
        read = {k for k, v in p["files"].items() if not v.startswith("errno")}
        for path in read:
            if "/ci" in path:
                assert path.rsplit("/", 2)[0] + "/access" in read, p
        gis = {path.split("/")[-2] for path in read if path.endswith("/access")
               and "/ci" not in path}
        # one layout's instances (a pass across a change may see part of one), never a mix
        assert gis <= {"gi0"} or gis <= {"gi3", "gi4", "gi5", "gi13"}, p


def test_destroying_an_instance_the_gpu_lacks_fails_as_nvidia_smi_fails_it(
        tmp_path: Path) -> None:
    """The real tool answers Not Found, exits non-zero and changes nothing."""
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    with live_mount(tmp_path, "h100-mig", extra=["--control", str(control)]) as live:
        generation = live.generation()
        refused = mig(live, control, "-i", "3", "-dci", "-gi", "0", "-ci", "0,99", ok=False)
        assert "Unable to destroy compute instance ID 99 from GPU  3 GPU instance ID  0: Not " \
            "Found\nFailed to destroy compute instances: Not Found\n" in refused.stderr, \
            refused.stderr
        refused = mig(live, control, "-i", "3", "-dgi", "-gi", "5", ok=False)
        assert "Unable to destroy GPU instance ID  5 from GPU  3: Not Found\nFailed to destroy " \
            "GPU instances: Not Found\n" in refused.stderr, refused.stderr
        assert instances(live) == ["gi0/access", "gi0/ci0/access"]
        assert live.generation() == generation
        mig(live, control, "-i", "3", "-dci", "-gi", "0")
        refused = mig(live, control, "-i", "3", "-dci", "-gi", "0", ok=False)
        assert "No compute instances found: Not Found" in refused.stderr, refused.stderr
        mig(live, control, "-i", "3", "-dgi")
        refused = mig(live, control, "-i", "3", "-dgi", ok=False)
        assert "No GPU instances found: Not Found" in refused.stderr, refused.stderr
        assert instances(live) == []
