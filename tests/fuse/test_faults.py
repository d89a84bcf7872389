"""Faults on a real mount, on a clock the test drives (no test waits for real time): scheduled
onsets and clears from the profile, the control socket, faults across profile swaps, what
reaches the daemon when a fault starts (kernel requests counted), and what /readyz, the
metrics and the log say."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.faults import fault_node
from tests.helpers.live import profile_text, rename_over, requests
from tests.helpers.mounts import REPO, mokkafs_mount, wait_for
from tests.helpers.pass_mode import PASS_MODE
from tests.helpers.profiles import device_path, state_of

DOWN_LATER = """faults:
  - {name: down, kind: ib-port-down, target: mlx5_0/1, after: 10, for: 20}
"""


def test_a_profile_fault_starts_and_ends_on_its_schedule(tmp_path: Path) -> None:
    with fault_node(tmp_path, DOWN_LATER) as node:  # applied at 5000 s
        live = node.live
        assert node.port("state") == "4: ACTIVE\n" and node.states() == {"down": "pending"}
        node.at(10)
        wait_for(lambda: node.port("state") == "1: DOWN\n", 20, "the port to go down")
        # Readers see a view from its swap on; health records it once the kernel has heard.
        wait_for(lambda: live.metric('mokkafs_faults_active{kind="ib-port-down"}') == 1, 20,
                 "the onset's acknowledgement")
        assert node.port("phys_state") == "3: Disabled\n"
        assert node.port("counters/link_downed") == "1\n"
        assert live.ready()["faults"] == [{"name": "down", "kind": "ib-port-down",
                                          "target": "mlx5_0/1", "state": "active",
                                          "source": "profile", "restored": False}]
        assert live.metric('mokkafs_faults_active{kind="ib-port-down"}') == 1
        frozen = node.port("counters/port_xmit_data")
        node.at(20)
        assert node.port("counters/port_xmit_data") == frozen  # nothing moves while down
        node.at(30)
        wait_for(lambda: node.port("state") == "4: ACTIVE\n", 20, "the port to come back")
        wait_for(lambda: live.ready()["faults"] == [], 20, "the end's acknowledgement")
        assert node.states() == {"down": "ended"} and live.ready()["faults"] == []
        node.at(40)
        assert int(node.port("counters/port_xmit_data")) > int(frozen)
        assert node.port("counters/link_downed") == "1\n"
        assert live.metric('mokkafs_fault_transitions_total{kind="ib-port-down",to="ended"}') == 1
    log = live.mount.log_text()
    assert "fault down (ib-port-down on mlx5_0/1): active" in log
    assert "fault down (ib-port-down on mlx5_0/1): ended" in log


def test_an_onset_reaches_the_kernel_only_for_what_it_changes(tmp_path: Path) -> None:
    """pyfuse3's style: count the requests that reach the daemon around a fault's onset.
    (No host sysfs: its pass-through entries expire on their own after a second.)"""
    with fault_node(tmp_path, DOWN_LATER, extra=("--host-sysfs", "none")) as node:
        sysfs = node.live.mount.sys
        changed = [sysfs / f"class/infiniband/mlx5_0/ports/1/{n}" for n in ("state", "rate")]
        unchanged = [sysfs / "class/infiniband/mlx5_3/ports/1/state",
                     sysfs / "class/infiniband/mlx5_0/node_guid",
                     sysfs / "class/infiniband/mlx5_0/ports/1/lid",
                     node.live.mount.path / device_path("0000:1b:00.0") / "vendor"]
        for _ in range(2):
            for path in changed + unchanged:
                path.read_text()
        node.at(10)
        wait_for(lambda: node.states() == {"down": "active"}, 20, "the onset")
        base = requests(node.live)
        for path in unchanged:
            path.read_text()
        after = requests(node.live)
        asked = {op: after.get(op, 0) - base.get(op, 0) for op in ("lookup", "getattr", "read")}
        # keep-cache mode opens every file direct_io: a READ and one at EOF per read_text.
        reads = 2 * len(unchanged) if PASS_MODE == "keep-cache" else 0
        assert asked == {"lookup": 0, "getattr": 0, "read": reads}, asked  # still cached
        assert [p.read_text() for p in changed] == ["1: DOWN\n", "10 Gb/sec (4X SDR)\n"]
        assert requests(node.live).get("read", 0) > after.get("read", 0)  # re-read once


FAULTS = """faults:
  - {name: lost, kind: gpu-lost, target: gpu3}
  - {name: gone, kind: hca-removed, target: mlx5_5, after: 5, for: 10}
"""


def test_the_control_socket_applies_lists_and_clears(tmp_path: Path) -> None:
    with fault_node(tmp_path) as node:
        mode = os.stat(node.control).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert node.states() == {}
        (tmp_path / "faults.yaml").write_text(FAULTS)
        applied = node.fault("apply", str(tmp_path / "faults.yaml"))
        assert applied.returncode == 0, applied.stderr
        assert node.states() == {"lost": "active", "gone": "pending"}
        gpu = node.live.mount.sys / "bus/pci/devices/0000:61:00.0"
        assert (gpu / "current_link_width").read_text() == "63\n"
        node.at(5)
        wait_for(lambda: not (node.live.mount.sys / "class/infiniband/mlx5_5").exists(), 20,
                 "mlx5_5 removed")
        node.at(15)
        wait_for(lambda: (node.live.mount.sys / "class/infiniband/mlx5_5").exists(), 20,
                 "mlx5_5 back")
        # a bad file changes nothing
        (tmp_path / "bad.yaml").write_text(
            "faults:\n  - {name: x, kind: gpu-lost, target: gpu42}\n"
            "  - {name: y, kind: ib-port-down, target: mlx5_0/1, width: 2}\n")
        bad = node.fault("apply", str(tmp_path / "bad.yaml"))
        assert bad.returncode == 2
        assert "faults[0].target: no GPU 'gpu42'" in bad.stderr
        assert "faults[1].width: ib-port-down does not use width" in bad.stderr
        assert node.states() == {"lost": "active", "gone": "ended"}
        # the same file again runs the scenario anew, though nothing in it changed
        again = node.fault("apply", str(tmp_path / "faults.yaml"))
        assert again.returncode == 0, again.stderr
        assert node.states() == {"lost": "active", "gone": "pending"}
        node.at(20)
        wait_for(lambda: not (node.live.mount.sys / "class/infiniband/mlx5_5").exists(), 20,
                 "mlx5_5 removed again")
        unknown = node.fault("clear", "lost", "nosuch")
        assert unknown.returncode == 2 and "no fault named nosuch" in unknown.stderr
        assert node.states() == {"lost": "active", "gone": "active"}
        assert node.fault("clear", "lost").returncode == 0
        assert node.states() == {"gone": "active"}
        assert (gpu / "current_link_width").read_text() == "16\n"
        assert node.fault("clear").returncode == 0 and node.states() == {}


def test_faults_across_profile_swaps(tmp_path: Path) -> None:
    """A profile fault keeps its timing through an unrelated swap; a run-time fault whose
    target a swap removes ends, with a log line."""
    later = "faults:\n  - {name: later, kind: gpu-removed, target: gpu0, after: 100}\n"
    with fault_node(tmp_path, later, expect=("fault nic11 ends",)) as node:
        (tmp_path / "nic.yaml").write_text(
            "faults:\n  - {name: nic11, kind: ib-port-down, target: mlx5_11/1}\n")
        assert node.fault("apply", str(tmp_path / "nic.yaml")).returncode == 0
        node.at(50)
        rename_over(node.live, (profile_text("h100") + later).replace("28.39.2048", "28.40.1000"))
        node.live.wait_generation(3)
        assert node.states() == {"later": "pending", "nic11": "active"}
        node.at(100)  # 100 s after it was first applied, not after the swap
        wait_for(lambda: node.states()["later"] == "active", 20, "the profile fault")
        rename_over(node.live, profile_text("a100"))  # no mlx5_11, no faults
        node.live.wait_generation(4)
        assert node.states() == {}
    assert "fault nic11 ends: no InfiniBand port 'mlx5_11/1'" in node.live.mount.log_text()


def test_a_profile_fault_cleared_stays_cleared_until_the_profile_changes_it(
        tmp_path: Path) -> None:
    lost = "faults:\n  - {name: lost, kind: gpu-lost, target: gpu0}\n"
    with fault_node(tmp_path, lost) as node:
        assert node.states() == {"lost": "active"}
        assert node.fault("clear", "lost").returncode == 0
        assert node.states() == {}
        rename_over(node.live, (profile_text("h100") + lost).replace("28.39.2048", "28.40.1000"))
        node.live.wait_generation(3)
        assert node.states() == {}  # the same fault: still cleared
        rename_over(node.live, profile_text("h100") + lost.replace("gpu0", "gpu1"))
        node.live.wait_generation(4)
        assert node.states() == {"lost": "active"}  # a new definition applies


@pytest.mark.parametrize("where", ["shared", "file"])
def test_the_control_socket_is_refused_where_it_is_unsafe(tmp_path: Path, where: str) -> None:
    place = tmp_path / "shared"
    place.mkdir()
    os.chmod(place, 0o1777)
    path = place / "sock"
    if where == "file":
        os.chmod(place, 0o700)
        path.write_text("not a socket")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                             "--control", str(path), str(mnt)], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    assert result.returncode == 6, result.stderr
    assert ("may be written by others" if where == "shared" else "other than a socket") \
        in result.stderr
    assert not os.path.ismount(mnt)


def test_tree_shows_the_profiles_faults_as_of_now(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(profile_text("h100") + "faults:\n"
                    "  - {name: r, kind: gpu-removed, target: gpu0}\n"
                    "  - {name: l, kind: gpu-removed, target: gpu1, after: 3600}\n")
    out = subprocess.run([sys.executable, "-m", "mokkafs", "tree", "--profile", str(path),
                          "--node-name", "n", "sys/bus/pci/devices"], capture_output=True,
                         text=True, cwd=REPO, timeout=60, check=True).stdout
    listed = {line.split()[1].rsplit("/", 1)[1] for line in out.splitlines()[1:]}
    expected = {f.bdf for f in state_of("h100").functions} - {"0000:1b:00.0"}
    assert listed == expected  # gpu1 is removed an hour from now, not yet


def test_a_control_socket_from_a_killed_daemon_is_replaced(tmp_path: Path) -> None:
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    args = ["--profile", "t4", "--control", str(control)]
    with mokkafs_mount(tmp_path / "mnt", args) as first:
        first.process.kill()
        first.process.wait()
        subprocess.run(["umount", "-l", str(tmp_path / "mnt")], check=True)
        assert stat.S_ISSOCK(os.lstat(control).st_mode)  # left behind
        with mokkafs_mount(tmp_path / "mnt", args) as second:
            listing = subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control",
                                      str(control), "list"], capture_output=True, text=True,
                                     cwd=REPO, timeout=60)
            assert listing.returncode == 0 and listing.stdout == ""
            assert second.process.poll() is None
        first.process.returncode = 0  # killed on purpose
    assert not control.exists()  # removed at a clean stop


def test_a_control_socket_beside_the_mountpoint_is_refused(tmp_path: Path) -> None:
    share = tmp_path / "share"
    share.mkdir(mode=0o700)
    (share / "mnt").mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                             "--control", str(share / "sock"), str(share / "mnt")],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 6, result.stderr
    assert "beside the mountpoint" in result.stderr
    assert not os.path.ismount(share / "mnt") and not (share / "sock").exists()


def test_a_control_socket_inside_the_mountpoint_is_refused(tmp_path: Path) -> None:
    """Once mounted, the view covers it: making or checking it would ask the daemon itself."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                             "--control", str(mnt / "ctl" / "sock"), str(mnt)],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 6, result.stderr
    assert "inside the mountpoint" in result.stderr
    assert not os.path.ismount(mnt)


def test_a_control_socket_that_cannot_be_bound_is_exit_6_with_a_reason(tmp_path: Path) -> None:
    """Refused inside the daemon's nurseries, once mounted: still its own status and message,
    no traceback, nothing left mounted."""
    place = tmp_path / ("d" * 120)  # a socket path beyond sun_path's 108 bytes
    place.mkdir(mode=0o700)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                             "--control", str(place / "sock"), str(mnt)],
                            capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 6, result.stderr
    assert "Traceback" not in result.stderr and ": None" not in result.stderr
    assert "AF_UNIX path too long" in result.stderr
    assert not os.path.ismount(mnt)


def test_a_missing_control_directory_is_made_for_root_alone(tmp_path: Path) -> None:
    control = tmp_path / "run" / "control" / "sock"
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "t4", "--control", str(control)]):
        wait_for(control.exists, 20, "the control socket")
        assert stat.S_IMODE(os.stat(control.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(control).st_mode) == 0o600


def test_control_clients_that_go_away_or_send_garbage_leave_the_daemon_serving(
        tmp_path: Path) -> None:
    import json
    import socket

    control = tmp_path / "ctl" / "sock"
    mnt = tmp_path / "mnt"
    with mokkafs_mount(mnt, ["--profile", "t4", "--control", str(control)]) as mount:
        wait_for(control.exists, 20, "the control socket")
        apply = {"op": "apply", "file": "gone.yaml",
                 "text": "faults: [{name: g, kind: gpu-lost, target: gpu0}]"}
        for payload in (json.dumps(apply).encode() + b"\n",  # then hang up at once
                        b"[" * 200_000 + b"\n"):  # nesting deeper than any parser recurses
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(control))
                client.sendall(payload)
                client.shutdown(socket.SHUT_WR)

        def listed() -> list[str]:
            listing = subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control",
                                      str(control), "list"], capture_output=True, text=True,
                                     cwd=REPO, timeout=60)
            assert listing.returncode == 0, listing.stderr
            return listing.stdout.split()[:2]

        # the request was carried out, though its client left before the answer (the list
        # is another client's, which may come first: the first fault imports the schema)
        wait_for(lambda: listed() == ["g", "gpu-lost"], 60, "the hung-up client's fault")
        assert mount.process.poll() is None and (mnt / "proc/devices").read_text()


def test_a_caller_past_the_busy_control_slots_waits_for_one_and_is_answered(
        tmp_path: Path) -> None:
    """Four callers hold every slot; a fifth is answered once one leaves, never hung up on: a
    hang-up is what a caller the daemon does not answer gets (NVML maps it to NO_PERMISSION)."""
    import json
    import socket

    control = tmp_path / "ctl" / "sock"
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "t4", "--control", str(control)]):
        wait_for(control.exists, 20, "the control socket")
        idle = []
        try:
            for _ in range(4):  # each holds a slot, sending nothing, until closed
                client = socket.socket(socket.AF_UNIX)
                client.connect(str(control))
                idle.append(client)
            with socket.socket(socket.AF_UNIX) as fifth:
                fifth.settimeout(30)
                fifth.connect(str(control))
                fifth.sendall(json.dumps({"op": "list"}).encode() + b"\n")
                idle.pop().close()  # a slot frees
                answer = b""
                while not answer.endswith(b"\n"):
                    chunk = fifth.recv(65536)
                    assert chunk, f"hung up on after {answer!r}"
                    answer += chunk
            assert json.loads(answer)["ok"] is True
        finally:
            for client in idle:
                client.close()
