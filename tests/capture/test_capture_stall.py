"""A capture of a FUSE file system that never answers one file's read, one directory's listing
and one name's lookup (``tests.helpers.stall_fs``): each costs the time limit and is named as
too slow, and the rest is captured; the capture exits with its status, and none of its reader
processes is left once the file system has gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from mokkafs.testing import bare_fs, wait_for
from tests.helpers.captures import mounted
from tests.helpers.mounts import REPO, is_mounted
from tests.helpers.stall_fs import ATTRIBUTES, BDF, STALLED_DIR, STALLED_FILE, STALLED_LOOKUP


def in_session(sid: int) -> list[str]:
    """The processes (zombies too, which have no command line) of session ``sid``, each as
    ``PID STATE``, from /proc/PID/stat."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone meanwhile
        state, session = fields[0], int(fields[3])
        if session == sid:
            out.append(f"{entry.name} {state}")
    return out


def test_what_never_answers_costs_its_time_limit_and_no_process(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    out = tmp_path / "node.yaml"
    capture: subprocess.Popen[str] | None = None
    try:
        with bare_fs([sys.executable, "-m", "tests.helpers.stall_fs"], mnt, cwd=REPO) as server:
            # its own session, so that its readers are found even once init is their parent
            capture = subprocess.Popen(
                [sys.executable, "-m", "mokkafs", "capture", "--root", str(mnt),
                 "--node-name", "n", "--time-limit", "1", "--output", str(out)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                start_new_session=True)
            try:
                _, err = capture.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                capture.kill()  # a hung capture; the kernel lets it go once the server stops
                raise AssertionError("the capture hung") from None
            assert capture.returncode == 0, err
            # the server still holds the requests: the capture did not wait for them
            assert server.poll() is None
        assert server.returncode == 0
    finally:
        if capture is not None and capture.poll() is None:
            capture.kill()
            capture.wait(timeout=30)
        if is_mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)], check=False)
    assert not is_mounted(mnt)
    said = err.splitlines()
    assert f"mokkafs capture: PCI attributes skipped: a read that took too long: 1 " \
           f"({STALLED_FILE})" in said, err
    assert f"mokkafs capture: CPU shape not captured: a listing that took too long: 1 " \
           f"({STALLED_DIR})" in said, err
    assert f"mokkafs capture: paths taken as absent: a lookup that took too long: 1 " \
           f"({STALLED_LOOKUP})" in said, err
    kept = yaml.safe_load(out.read_text())["pci_functions"]
    assert [f["bdf"] for f in kept] == [BDF]
    assert kept[0]["attributes"] == ATTRIBUTES  # every normal file, and not the stalled one
    assert kept[0]["config"] == "f41a4110"
    with mounted(out, tmp_path, "--node-name", "n") as mount:
        assert (mount.sys / "bus/pci/devices" / BDF / "config").read_bytes()[:4] == \
            bytes.fromhex("f41a4110")
    # The killed readers the kernel held for the unanswered requests go with the server.
    try:
        wait_for(lambda: not in_session(capture.pid), 20, "the capture's readers to go")
    except TimeoutError:
        raise AssertionError(f"left behind: {in_session(capture.pid)}") from None
