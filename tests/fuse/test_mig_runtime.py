"""``mokkafs mig`` on a serving daemon: GPU and compute instances created and destroyed at run
time as ``nvidia-smi mig -cgi/-dgi/-cci/-dci`` would, each change one new view (a reader
looping through them never sees a compute instance without its GPU instance), refusals that
say why, and a profile swap that changes the GPU's own layout ending the run-time one; GPU
instances at the placements asked for (``-cgi PROFILE:START``), and MIG turned on and off
(``-mig 1|0``, as ``nvidia-smi -i N -mig``), both kept across a restart."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.live import Live, live_mount, profile_text, rename_over
from tests.helpers.mig_reader import passed_since
from tests.helpers.mounts import REPO, mokkafs_mount, wait_for
from tests.helpers.profiles import state_of

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


def test_placements_and_mig_modes_change_at_run_time_and_survive_a_restart(
        tmp_path: Path) -> None:
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    args = ["--profile", "h100-mig", "--control", str(control)]
    caps = mnt / "proc/driver/nvidia/capabilities"
    bdf = {fn.gpu.index: fn.bdf for fn in state_of("h100-mig").gpus() if fn.gpu}

    def run(*argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, "-m", "mokkafs", "mig", "--control",
                                 str(control), *argv], capture_output=True, text=True, cwd=REPO,
                                timeout=60)
        assert (result.returncode == 0) is ok, (result.stdout, result.stderr)
        return result

    def mode(index: int) -> tuple[str, str, bool]:
        place = (mnt / "run/mokkafs-nvml/gpus" / bdf[index]).read_text().splitlines()
        return (next(x for x in place if x.startswith("mig_mode_current=")),
                next(x for x in place if x.startswith("mig_mode_pending=")),
                (caps / f"gpu{index}/mig").is_dir())

    def served() -> dict[str, list[str]]:
        return {d.name: sorted(str(p.relative_to(d / "mig")) for p in d.rglob("access"))
                for d in sorted(caps.glob("gpu*"))}

    with mokkafs_mount(mnt, args) as first:
        run("-i", "3", "-dgi")
        out = run("-i", "3", "-cgi", "9:0,14:4", "-C").stdout
        assert out.splitlines() == ["3\tMIG 3g.40gb\t9\t1\t0:4\t0:3g.40gb",
                                    "3\tMIG 2g.20gb\t14\t5\t4:2\t0:2g.20gb"]
        refused = run("-i", "3", "-cgi", "14:1", ok=False)
        assert "2g.20gb cannot start at 1: it starts at 0, 2, 4" in refused.stderr, refused.stderr
        refused = run("-i", "3", "-cgi", "1g.10gb:5", ok=False)
        assert "1g.10gb cannot start at 5" in refused.stderr, refused.stderr  # 2g holds 4-5
        refused = run("-i", "3", "-cgi", "9:x", ok=False)
        assert "-cgi takes PROFILE or PROFILE:START" in refused.stderr, refused.stderr
        # MIG off is refused while GPU instances exist, as the driver refuses it
        refused = run("-i", "3", "-mig", "0", ok=False)
        assert "Unable to disable MIG Mode for GPU 3: In use by another client" in \
            refused.stderr, refused.stderr
        refused = run("-mig", "1", ok=False)
        assert "name the GPU with -i GPU" in refused.stderr, refused.stderr
        refused = run("-i", "99", "-mig", "1", ok=False)
        assert "no GPU 99" in refused.stderr, refused.stderr
        # on: no instance yet; pending is current (no reset is simulated)
        assert mode(5) == ("mig_mode_current=0", "mig_mode_pending=0", False)
        assert run("-i", "5", "-mig", "1").stdout == "Enabled MIG Mode for GPU 5\n"
        assert mode(5) == ("mig_mode_current=1", "mig_mode_pending=1", True)
        run("-i", "5", "-mig", "1")  # already on: nothing changes
        run("-i", "5", "-cgi", "19:3", "-C")
        run("-i", "4", "-mig", "1")
        run("-i", "4", "-mig", "0")  # back as the profile boots it: nothing kept
        # off: the profile's instances destroyed first; on again, they stay gone
        run("-i", "2", "-dgi")
        assert run("-i", "2", "-mig", "0").stdout == "Disabled MIG Mode for GPU 2\n"
        assert mode(2) == ("mig_mode_current=0", "mig_mode_pending=0", False)
        run("-i", "1", "-dgi")
        run("-i", "1", "-mig", "0")
        run("-i", "1", "-mig", "1")
        listed = run("-lgi").stdout.splitlines()
        assert sorted({line.split("\t")[0] for line in listed}) == ["0", "3", "5"]
        before = served()
        assert before["gpu1"] == [] and "gpu2" not in before and "gpu4" not in before
        assert before["gpu5"] == ["gi10/access", "gi10/ci0/access"]
        assert before["gpu3"] == ["gi1/access", "gi1/ci0/access", "gi5/access",
                                  "gi5/ci0/access"]
        first.process.kill()
        first.process.wait()
        subprocess.run(["umount", "-l", str(mnt)], check=True)
        with mokkafs_mount(mnt, args) as second:
            assert served() == before
            assert mode(2) == ("mig_mode_current=0", "mig_mode_pending=0", False)
            assert mode(5) == ("mig_mode_current=1", "mig_mode_pending=1", True)
            assert mode(4) == ("mig_mode_current=0", "mig_mode_pending=0", False)
        first.process.returncode = 0  # killed on purpose
    log = second.log_text()
    assert "restored 3 MIG layouts and 0 sysfs writes from" in log, log
    assert "restored 2 MIG modes from" in log, log
