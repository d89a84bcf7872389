"""MIG through NVIDIA's own Python bindings (nvidia-ml-py) on mokkafs's NVML, on an h100-mig
mount served with --control: the mode, profiles, placements, instances and MIG devices agree
with the view's capability files and with ``mokkafs mig -lgi``; instances made and destroyed
through NVML are the daemon's (they show in both, and to a consumer that initialized before);
NVML's own errors where the driver gives them, NO_PERMISSION without the control socket or
when the daemon hangs up, and the daemon's refusal as the API's bound error. GPU instances
are made at any free placement asked for, and MIG turned on and off (SetMigMode) the same
way, seen by GetMigMode, the capability files and the daemon."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.model.mig_tables import GB80, SHAPES
from mokkafs.surfaces.nvml_mig import mig_uuid
from tests.helpers.mounts import Mount, mokkafs_mount
from tests.helpers.nvml import PynvmlProcess, nvml_env, view_gpus
from tests.helpers.nvml_mig import MIG_SCRIPT, as_listing, capability_instances, daemon_listing

MIB = 1 << 20
GPU_MEMORY_MB = 81920  # the h100-mig profile's 80 GiB
INVALID, NOT_SUPPORTED, NO_PERMISSION = {"error": 2}, {"error": 3}, {"error": 4}
NOT_FOUND, IN_USE, NO_ROOM = {"error": 6}, {"error": 19}, {"error": 23}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mount, Path]]:
    base = tmp_path_factory.mktemp("mig")
    control = base / "ctl" / "socket"
    control.parent.mkdir(mode=0o700)
    with mokkafs_mount(base / "mnt", ["--profile", "h100-mig", "--node-name", "node-a",
                                      "--control", str(control)]) as mount:
        yield mount, control


def process(root: Path, control: Path | None = None) -> PynvmlProcess:
    return PynvmlProcess(MIG_SCRIPT, nvml_env(root, control))


def ask(p: PynvmlProcess, *cmd: object) -> object:
    return p.ask(json.dumps(list(cmd)))


def check_against_view(snapshot: list[dict[str, object]], root: Path, control: Path) -> None:
    """Every GPU's MIG side as the view's files, the daemon and the profile say."""
    gpus = view_gpus(root)
    assert len(snapshot) == len(gpus) == 8
    for index, (gpu, got) in enumerate(zip(gpus, snapshot, strict=True)):
        profiles = got["profiles"]
        assert isinstance(profiles, dict)
        assert got["mig"] == 0  # a GPU's handle is none of its MIG devices'
        assert profiles == {f"MIG {GB80[key]}": {
            "enum": s.nvml, "id": s.profile_id, "slices": s.slices, "count": s.most,
            "memory_mb": GPU_MEMORY_MB * s.size // 8, "placements": [[a, s.size] for a in s.starts],
            "remaining": profiles[f"MIG {GB80[key]}"]["remaining"]} for key, s in SHAPES.items()}
        if index >= 4:  # whole GPUs: MIG off, no instance to list
            assert (got["mode"], got["max"], got["gis"]) == ([0, 0], 0, NOT_SUPPORTED)
            continue
        assert (got["mode"], got["max"]) == ([1, 1], 7)
        gis = got["gis"]
        assert isinstance(gis, list)
        assert {g["id"]: [c["id"] for c in g["cis"]] for g in gis} == \
            capability_instances(root, gpu.minor)
        assert as_listing(index, got) == daemon_listing(control, index)
        devices = got["devices"]
        assert isinstance(devices, list)
        made = [(g, c) for g in gis for c in g["cis"]]
        assert devices[len(made):] == [NOT_FOUND] * (7 - len(made))
        for dev, (g, c) in zip(devices, made, strict=False):
            memory = profiles[next(n for n, p in profiles.items()
                                   if p["id"] == g["profile_id"])]["memory_mb"]
            assert dev == {
                "uuid": mig_uuid(gpu.uuid, g["id"], c["id"]),
                "name": f"{gpu.name} {c['profile']}", "mig": 1, "gi": g["id"], "ci": c["id"],
                "slices": [profiles[next(n for n, p in profiles.items()
                                         if p["id"] == g["profile_id"])]["slices"],
                           c["slices"]],
                "memory_mb": memory, "memory": dev["memory"], "parent": index,
                "by_uuid": c["id"]}
            total, free, used = dev["memory"]
            assert total == memory * MIB and free + used == total
            assert used == (1 << 30) // 8 * g["placement"][1]  # the reserve's share


def test_reads_agree_with_the_view_and_the_daemon(node: tuple[Mount, Path]) -> None:
    mount, control = node
    p = process(mount.path)
    try:
        got = ask(p, "read")
    finally:
        out = p.close()
    assert p.process.returncode == 0, out
    assert isinstance(got, list)
    check_against_view(got, mount.path, control)
    gpu0 = got[0]["gis"]  # the profile's explicit layout
    assert [(g["id"], g["placement"]) for g in gpu0] == [(2, [4, 4]), (4, [2, 2]), (7, [0, 1]),
                                                          (8, [1, 1])]
    # each placed as made, in order, at the highest free start (mig_tables.ci_placements)
    assert gpu0[1]["cis"] == [{"id": 0, "profile": "MIG 1c.2g.20gb", "slices": 1, "start": 1},
                              {"id": 1, "profile": "MIG 1c.2g.20gb", "slices": 1, "start": 0}]
    assert all(p["remaining"] == 0 for p in got[0]["profiles"].values())  # full


def test_changes_through_nvml_are_the_daemons(node: tuple[Mount, Path]) -> None:
    mount, control = node
    reader, changer = process(mount.path), process(mount.path, control)  # init'd before
    try:
        assert ask(changer, "dgi", 3, 0) == IN_USE  # it has a compute instance
        assert ask(reader, "dci", 3, 0, 0) == NO_PERMISSION  # no control socket given
        assert ask(changer, "dci", 3, 0, 0) == 0
        assert ask(changer, "dgi", 3, 0) == 0
        assert capability_instances(mount.path, 3) == {} and daemon_listing(control, 3) == []
        # a free placement other than the driver's own is made where asked
        assert ask(changer, "cgi", 3, 9, [0, 4]) == {"gi": 1, "placement": [0, 4]}
        assert ask(changer, "dgi", 3, 1) == 0
        assert ask(changer, "cgi", 3, 9, [4, 4]) == {"gi": 2, "placement": [4, 4]}
        assert ask(changer, "cgi", 3, 9, [2, 4]) == INVALID  # 3g starts at 0 or 4
        assert ask(changer, "cgi", 3, 9, [4, 4]) == NO_ROOM  # taken
        assert ask(changer, "cgi", 3, 0, None) == NO_ROOM  # 7g: no room left
        assert ask(changer, "cgi", 3, 99, None) == INVALID
        assert ask(changer, "cgi", 4, 19, None) == NOT_SUPPORTED  # MIG off
        assert ask(changer, "cgi", 3, 19, None) == {"gi": 10, "placement": [3, 1]}
        assert ask(changer, "cci", 3, 2, 0) == {"ci": 0, "placement": [2, 1]}  # the highest
        assert ask(changer, "cci", 3, 2, 1) == {"ci": 1, "placement": [0, 2]}
        assert ask(changer, "cci", 3, 2, 2) == NO_ROOM  # 3 slices of 3 in use
        assert ask(changer, "cci", 3, 2, 5) == INVALID
        assert ask(changer, "setmig", 3, 0) == IN_USE  # GPU instances left
        assert capability_instances(mount.path, 3) == {2: [0, 1], 10: []}
        after = ask(reader, "read")
        assert isinstance(after, list)
        check_against_view(after, mount.path, control)
        assert after[3]["gis"][0]["cis"] == [
            {"id": 0, "profile": "MIG 1c.3g.40gb", "slices": 1, "start": 2},
            {"id": 1, "profile": "MIG 2c.3g.40gb", "slices": 2, "start": 0}]
        remaining = {n: p["remaining"] for n, p in after[3]["profiles"].items()}
        assert remaining == {"MIG 1g.10gb": 3, "MIG 1g.10gb+me": 1, "MIG 1g.20gb": 1,
                             "MIG 2g.20gb": 1, "MIG 3g.40gb": 0, "MIG 4g.40gb": 0,
                             "MIG 7g.80gb": 0}
        for cmd in (("dci", 3, 2, 0), ("dci", 3, 2, 1), ("dgi", 3, 2), ("dgi", 3, 10)):
            assert ask(changer, *cmd) == 0, cmd
        assert capability_instances(mount.path, 3) == {} and daemon_listing(control, 3) == []
        assert ask(changer, "cgi", 3, 0, None) == {"gi": 0, "placement": [0, 8]}
        assert ask(changer, "cci", 3, 0, 4) == {"ci": 0, "placement": [0, 7]}
        assert capability_instances(mount.path, 3) == {0: [0]}
        last = ask(reader, "read")
        assert isinstance(last, list)
        check_against_view(last, mount.path, control)
    finally:
        out = reader.close() + changer.close()
    assert reader.process.returncode == changer.process.returncode == 0, out


def test_mig_mode_and_placements_through_nvml(node: tuple[Mount, Path]) -> None:
    """GPU 4 (whole in the profile) turned on, given instances at placements the driver would
    not choose, refused off while they exist, then off again, as it was."""
    mount, control = node
    reader, changer = process(mount.path), process(mount.path, control)  # init'd before
    try:
        assert ask(reader, "setmig", 4, 1) == NO_PERMISSION  # no control socket given
        assert ask(changer, "setmig", 4, 2) == INVALID
        assert ask(changer, "setmig", 4, 1) == 0  # activationStatus: NVML_SUCCESS
        assert ask(changer, "setmig", 4, 1) == 0  # already on: set again
        on = ask(reader, "read")
        assert isinstance(on, list)
        assert (on[4]["mode"], on[4]["max"], on[4]["gis"]) == ([1, 1], 7, [])
        assert (mount.path / "proc/driver/nvidia/capabilities/gpu4/mig").is_dir()
        assert capability_instances(mount.path, 4) == {} and daemon_listing(control, 4) == []
        assert ask(changer, "cgi", 4, 9, [0, 4]) == {"gi": 1, "placement": [0, 4]}
        assert ask(changer, "cgi", 4, 9, [0, 4]) == NO_ROOM  # taken
        assert ask(changer, "cgi", 4, 14, [4, 2]) == {"gi": 5, "placement": [4, 2]}
        assert ask(changer, "cgi", 4, 14, [5, 2]) == INVALID  # 2g starts at 0, 2 or 4
        assert capability_instances(mount.path, 4) == {1: [], 5: []}
        assert [row[3:5] for row in daemon_listing(control, 4)] == [["1", "0:4"], ["5", "4:2"]]
        assert ask(changer, "setmig", 4, 0) == IN_USE
        assert ask(changer, "dgi", 4, 1) == 0 and ask(changer, "dgi", 4, 5) == 0
        assert ask(changer, "setmig", 4, 0) == 0
        off = ask(reader, "read")
        assert isinstance(off, list)
        check_against_view(off, mount.path, control)  # GPU 4 whole again, the rest as were
        assert not (mount.path / "proc/driver/nvidia/capabilities/gpu4").exists()
    finally:
        out = reader.close() + changer.close()
    assert reader.process.returncode == changer.process.returncode == 0, out


def test_compute_instance_placements_through_nvml(node: tuple[Mount, Path]) -> None:
    """In a 7g GPU instance: every compute placement NVML lists (`nvidia-smi mig -lcipp`'s),
    compute instances made where asked and where the driver puts them, a placement taken or
    not allowed refused; the daemon's layout and the capability files follow."""
    mount, control = node
    changer = process(mount.path, control)
    try:
        assert ask(changer, "setmig", 4, 1) == 0
        assert ask(changer, "cgi", 4, 0, None) == {"gi": 0, "placement": [0, 8]}
        assert [ask(changer, "cipp", 4, 0, p) for p in range(5)] == [
            [[s, 1] for s in range(7)], [[0, 2], [2, 2], [4, 2]], [[0, 3], [4, 3]], [[0, 4]],
            [[0, 7]]]
        assert ask(changer, "cipp", 4, 0, 5) == INVALID  # no such CI profile
        assert ask(changer, "cci", 4, 0, 2, [0, 3]) == {"ci": 0, "placement": [0, 3]}
        assert ask(changer, "cci", 4, 0, 2, [0, 3]) == NO_ROOM  # taken
        assert ask(changer, "cci", 4, 0, 1, [1, 2]) == INVALID  # 2c starts at 0, 2 or 4
        assert ask(changer, "cci", 4, 0, 1, [2, 3]) == INVALID  # not a 2c's size
        assert ask(changer, "cci", 4, 0, 0, [5, 1]) == {"ci": 1, "placement": [5, 1]}
        # slices 3, 4 and 6 are free, but no 2c placement is
        assert ask(changer, "cci", 4, 0, 1) == NO_ROOM
        assert ask(changer, "cci", 4, 0, 0) == {"ci": 2, "placement": [6, 1]}  # highest free
        assert capability_instances(mount.path, 4) == {0: [0, 1, 2]}
        read = ask(changer, "read")
        assert isinstance(read, list)
        assert [(c["id"], c["start"], c["slices"]) for c in read[4]["gis"][0]["cis"]] == [
            (0, 0, 3), (1, 5, 1), (2, 6, 1)]
        for ci in (0, 1, 2):
            assert ask(changer, "dci", 4, 0, ci) == 0
        assert ask(changer, "dgi", 4, 0) == 0 and ask(changer, "setmig", 4, 0) == 0
    finally:
        out = changer.close()
    assert changer.process.returncode == 0, out


def serve(path: Path, answer: bytes | None, heard: list[bytes]) -> threading.Thread:
    """A stand-in for the daemon's socket: one connection, its request kept, ``answer`` sent
    (None: hung up at once, as the daemon does on a caller it does not serve)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def one() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                if answer is None:
                    return
                data = b""
                while not data.endswith(b"\n"):
                    data += conn.recv(4096)
                heard.append(data)
                conn.sendall(answer)

    thread = threading.Thread(target=one, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("answer", "error"), [
    (b'{"ok": false, "error": "no", "exit": 2}\n', INVALID),  # refused: a destroy's bound error
    (None, NO_PERMISSION),  # hung up without a word
    (b'{"error": "ok", "mig": []}\n', {"error": 999}),  # no "ok": UNKNOWN
])
def test_what_the_daemon_answers(node: tuple[Mount, Path], tmp_path: Path, answer: bytes | None,
                                 error: dict[str, int]) -> None:
    mount, _ = node
    fake, heard = tmp_path / "fake", list[bytes]()
    thread = serve(fake, answer, heard)
    p = process(mount.path, fake)
    try:
        assert ask(p, "dci", 3, 0, 0) == error
    finally:
        out = p.close()
        thread.join(10)
    assert p.process.returncode == 0, out
    if answer is not None:
        assert [json.loads(line) for line in heard] == [
            {"op": "mig", "action": "dci", "gpu": 3, "profiles": [], "C": False, "gi": [0],
             "ci": [0]}]


@pytest.mark.parametrize(("answer", "error"), [
    (b'{"ok": false, "error": "no", "exit": 2}\n', IN_USE),  # refused: a mode change's bound
    (b'{"ok": true, "mig": []}\n', 0),
])
def test_the_mig_mode_request(node: tuple[Mount, Path], tmp_path: Path, answer: bytes,
                              error: object) -> None:
    mount, _ = node
    fake, heard = tmp_path / "fake", list[bytes]()
    thread = serve(fake, answer, heard)
    p = process(mount.path, fake)
    try:
        assert ask(p, "setmig", 3, 1) == error
    finally:
        out = p.close()
        thread.join(10)
    assert p.process.returncode == 0, out
    assert [json.loads(line) for line in heard] == [
        {"op": "mig", "action": "mode", "gpu": 3, "profiles": [], "C": False, "mode": 1}]


UNITS_SCRIPT = """
import json, pynvml as n
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
out = {}
for e in range(12):
    try:
        p = n.nvmlDeviceGetGpuInstanceProfileInfo(h, e)
    except n.NVMLError:
        continue
    out[e] = [p.multiprocessorCount, p.copyEngineCount, p.decoderCount, p.encoderCount,
              p.jpegCount, p.ofaCount]
m = n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
a = n.nvmlDeviceGetAttributes(m)
print(json.dumps({"gip": out, "dev": [a.multiprocessorCount, a.sharedCopyEngineCount,
      a.sharedDecoderCount, a.sharedEncoderCount, a.sharedJpegCount, a.sharedOfaCount,
      a.gpuInstanceSliceCount, a.computeInstanceSliceCount]}))
"""


def test_sm_and_engine_counts_are_the_tables(node: tuple[Mount, Path]) -> None:
    """GPU Feature Discovery's MIG labels: each profile's units and a MIG device's share."""
    import subprocess
    import sys

    from mokkafs.model.mig_tables import HARDWARE

    mount, control = node
    run = subprocess.run([sys.executable, "-c", UNITS_SCRIPT], env=nvml_env(mount.path, control),
                         capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(run.stdout)
    units = HARDWARE[0x2330]
    assert got["gip"] == {str(s.nvml): [units[k].sm, units[k].ce, units[k].dec, units[k].enc,
                                        units[k].jpeg, units[k].ofa] for k, s in SHAPES.items()}
    three = units["3g"]  # GPU 0's first MIG device: GI 2, a 3g.40gb spanned by its one CI
    assert got["dev"] == [three.sm, three.ce, three.dec, three.enc, three.jpeg, three.ofa, 3, 3]
