"""Run-time faults survive the daemon (a real one, killed with SIGKILL): the next daemon with
the same state directory restores them with their time left, shows them restored, and keeps
cleared faults cleared; a state file it cannot believe is set aside, and the profile serves."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from mokkafs.serve.durable import file_name
from tests.helpers.live import profile_text
from tests.helpers.mounts import REPO, free_port, mokkafs_mount
from tests.helpers.profiles import H100_NIC0, state_of

FAULTS = """faults:
  - {name: down, kind: ib-port-down, target: mlx5_0/1, for: 600}
  - {name: lost, kind: gpu-lost, target: gpu3}
"""


def gpu(index: int) -> str:
    return next(fn.bdf for fn in state_of("h100").gpus() if fn.gpu and fn.gpu.index == index)


def fault(control: Path, *args: str) -> list[list[str]]:
    out = subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control", str(control),
                          *args], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line.split("\t") for line in out.stdout.splitlines()]


def test_a_fault_applied_at_run_time_survives_a_kill(tmp_path: Path) -> None:
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    profile = tmp_path / "node.yaml"
    profile.write_text(profile_text("h100") + "faults:\n"
                       "  - {name: own, kind: gpu-removed, target: gpu1}\n")
    args = ["--profile", str(profile), "--control", str(control), "--metrics",
            f"127.0.0.1:{free_port()}"]
    port = mnt / "sys/class/infiniband/mlx5_0/ports/1/state"
    with mokkafs_mount(mnt, args) as first:
        (tmp_path / "f.yaml").write_text(FAULTS)
        fault(control, "apply", str(tmp_path / "f.yaml"))
        fault(control, "clear", "lost", "own")  # a run-time fault and a profile fault
        [[name, _, _, state, source, left]] = fault(control, "list")
        assert (name, state, source) == ("down", "active", "control")
        before = float(left.rstrip("s"))
        kept = control.parent / file_name(mnt)
        st = os.lstat(kept)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_uid == 0
        assert port.read_text() == "1: DOWN\n"
        first.process.kill()
        first.process.wait()
        subprocess.run(["umount", "-l", str(mnt)], check=True)
        with mokkafs_mount(mnt, args) as second:
            assert port.read_text() == "1: DOWN\n"  # in effect from the first request on
            [[name, kind, _, state, source, left]] = fault(control, "list")
            assert (name, kind, state, source) == ("down", "ib-port-down", "active",
                                                   "control (restored)")
            assert 0 < float(left.rstrip("s")) <= before
            assert second.readyz()["state"] == {"file": str(kept), "restored": ["down"],
                                                "refused": None}
            assert second.metrics()["mokkafs_faults_restored"] == 1
            devices = mnt / "sys/bus/pci/devices"
            assert (devices / gpu(3) / "config").read_bytes()[:2] == b"\xde\x10"  # not lost
            assert (devices / gpu(1)).exists()  # the profile's fault: cleared, and still
        first.process.returncode = 0  # killed on purpose
    assert f"restored fault down (ib-port-down on mlx5_0/1) from {kept}" in second.log_text()


def test_a_state_file_that_would_keep_nothing_is_removed(tmp_path: Path) -> None:
    """Cleared of every fault, a daemon keeps no file: the next one has nothing to read, and
    never loads the document's schema (pydantic) to read it."""
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    args = ["--profile", "h100", "--control", str(control)]
    kept = control.parent / file_name(mnt)
    with mokkafs_mount(mnt, args) as first:
        (tmp_path / "f.yaml").write_text(FAULTS)
        fault(control, "apply", str(tmp_path / "f.yaml"))
        assert kept.is_file()
        fault(control, "clear", "down", "lost")
        assert fault(control, "list") == [] and not kept.exists()
        first_pid = first.process.pid
    with mokkafs_mount(mnt, args) as second:
        assert second.process.pid != first_pid
        maps = Path(f"/proc/{second.process.pid}/maps").read_text()
        assert "_pydantic_core" not in maps and not kept.exists()


def test_a_corrupt_state_file_is_set_aside_and_the_profile_serves(tmp_path: Path) -> None:
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    control.parent.mkdir(mode=0o700)
    kept = control.parent / file_name(mnt)
    kept.write_text('{"format": "mokkafs-state", "version": 1, "faults": ')
    os.chmod(kept, 0o600)
    args = ["--profile", "h100", "--control", str(control), "--metrics",
            f"127.0.0.1:{free_port()}"]
    with mokkafs_mount(mnt, args, expect=("state file .* refused",)) as mount:
        assert (mnt / "sys/class/infiniband/mlx5_0/ports/1/state").read_text() == "4: ACTIVE\n"
        report = mount.readyz()
        assert report["ready"] is True
        state = report["state"]
        assert isinstance(state, dict) and state["file"] == str(kept)
        assert f"state file {kept} refused: not JSON" in str(state["refused"])
        assert mount.metrics()["mokkafs_state_file_refused"] == 1
        assert fault(control, "list") == []
    assert list(control.parent.glob(kept.name + ".refused.*")) and not kept.exists()
    assert "refused: not JSON" in mount.log_text() and "serving the profile alone" \
        in mount.log_text()


def test_a_state_dir_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                             "--state-dir", str(shared), str(mnt)], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    assert result.returncode == 6, result.stderr
    assert f"--state-dir {shared}: {shared} may be written by others" in result.stderr
    assert not os.path.ismount(mnt)


def test_mig_layouts_and_sysfs_writes_survive_a_kill(tmp_path: Path) -> None:
    """What ``mokkafs mig`` and a write to ``sriov_numvfs`` changed is served again by the next
    daemon of the same boot (a reboot would end both, as on a real node: unit-tested)."""
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    args = ["--profile", "h100-mig", "--control", str(control), "--writable"]
    caps = mnt / "proc/driver/nvidia/capabilities/gpu3/mig"
    pf = mnt / "sys/bus/pci/devices" / H100_NIC0

    def instances() -> list[str]:
        return sorted(str(p.relative_to(caps)) for p in caps.rglob("access"))

    with mokkafs_mount(mnt, args) as first:
        for change in (["-dgi"], ["-cgi", "9,3g.40gb", "-C"]):
            out = subprocess.run([sys.executable, "-m", "mokkafs", "mig", "--control",
                                  str(control), "-i", "3", *change], capture_output=True,
                                 text=True, cwd=REPO, timeout=60)
            assert out.returncode == 0, out.stderr
        (pf / "sriov_numvfs").write_text("4\n")
        made = instances()
        assert made == ["gi1/access", "gi1/ci0/access", "gi2/access", "gi2/ci0/access"]
        first.process.kill()
        first.process.wait()
        subprocess.run(["umount", "-l", str(mnt)], check=True)
        with mokkafs_mount(mnt, args) as second:
            assert instances() == made
            assert (pf / "sriov_numvfs").read_text() == "4\n"
            assert (pf / "virtfn3").is_symlink()
        first.process.returncode = 0  # killed on purpose
    assert "restored 1 MIG layouts and 1 sysfs writes from" in second.log_text()


def test_a_restored_layout_the_checks_refuse_is_set_aside(tmp_path: Path) -> None:
    """No crash loop: a kept MIG layout that repeats a GPU instance ID, names no profile of
    the GPU, or places a compute instance where none may start, is set aside at each start
    (each refused file kept), and the profile's layout serves."""
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    args = ["--profile", "h100-mig", "--control", str(control)]
    kept = control.parent / file_name(mnt)
    access = mnt / "proc/driver/nvidia/capabilities/gpu3/mig"
    with mokkafs_mount(mnt, args):
        for change in (["-dgi"], ["-cgi", "9,9", "-C"]):
            subprocess.run([sys.executable, "-m", "mokkafs", "mig", "--control", str(control),
                            "-i", "3", *change], check=True, capture_output=True, cwd=REPO,
                           timeout=60)
    good = json.loads(kept.read_text())
    edits = {"mig[0].layout[1]: GPU instance ID 1 is already taken": ("id", 1),
             "mig[0].layout[1].profile: not a GPU instance profile of H100": ("profile",
                                                                              "../../x"),
             "mig[0].layout[1].compute_instances: a 3c compute instance of 3g.40gb cannot "
             "start at 1: it starts at 0": ("compute", None)}
    for n, (why, (field, value)) in enumerate(edits.items(), 1):
        data = json.loads(json.dumps(good))
        if field == "compute":  # its one compute instance moved off the GI's start
            data["mig"][0]["layout"][1]["compute"][0]["start"] = 1
        else:
            data["mig"][0]["layout"][1][field] = value
        kept.write_text(json.dumps(data))
        os.chmod(kept, 0o600)
        with mokkafs_mount(mnt, args, expect=("state file .* refused",)) as mount:
            assert sorted(p.name for p in access.iterdir()) == ["gi0"]  # the profile's
        assert f"state file {kept} refused: a MIG layout `mokkafs mig` could not have made: " \
            f"{why}" in mount.log_text(), mount.log_text()
        assert len(list(kept.parent.glob(kept.name + ".refused.*"))) == n
        assert not kept.exists()
