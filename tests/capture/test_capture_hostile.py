"""Captures that must fail or skip clearly and never hang: a tree with hostile entries
(symbolic link loops, links out of the root, a FIFO where an attribute should be, a 1 GB
file, names with newlines), a root that is no directory, an output that exists, and a
capture run as ``nobody``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers.captures import mounted
from tests.helpers.mounts import REPO

BDF = "0000:00:01.0"


def capture(*args: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
    """``mokkafs capture ARGS``; the timeout is what fails a capture that hangs."""
    cmd = [sys.executable, "-m", "mokkafs", "capture", *args]
    if user:  # (as_user: the checkout may be in a directory only root reads)
        cmd = [sys.executable, "-m", "tests.helpers.as_user", user, "capture", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO)


def hostile_tree(root: Path) -> None:
    """One good function and every hostile kind of entry around it."""
    dev = root / "sys/devices/pci0000:00" / BDF
    dev.mkdir(parents=True)
    for name, value in (("vendor", "0x1af4\n"), ("device", "0x1041\n"), ("class", "0x020000\n"),
                        ("revision", "0x01\n"), ("irq", "11\n"), ("numa_node", "-1\n")):
        (dev / name).write_text(value)
    (dev / "config").write_bytes(bytes.fromhex("f41a4110") + bytes(60))
    os.mkfifo(dev / "subsystem_vendor")  # a FIFO where an attribute should be
    with open(dev / "label", "wb") as f:  # a 1 GB (sparse) file
        f.truncate(1 << 30)
    (dev / "bad\nname").write_text("x\n")
    (dev / "loop").symlink_to("loop")  # a link to itself
    os.symlink("../../../../../../../etc/passwd", dev / "driver_override")  # out of the root
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True)
    (bus / BDF).symlink_to(f"../../../devices/pci0000:00/{BDF}")
    (bus / "0000:00:02.0").symlink_to("0000:00:02.0")  # a loop
    (bus / "0000:00:03.0").symlink_to("/sys/devices")  # absolute: out of the root
    (bus / "0000:00:04.0").symlink_to("../../../../../../..")  # up and out
    (bus / "0000:00:05.0\n").symlink_to(f"../../../devices/pci0000:00/{BDF}")
    node = root / "sys/devices/system/node"
    node.mkdir(parents=True)
    os.mkfifo(node / "node0")  # a FIFO where a directory should be
    (root / "proc").mkdir()
    os.mkfifo(root / "proc/cpuinfo")


def test_a_hostile_tree_is_captured_around_what_it_skips(tmp_path: Path) -> None:
    hostile_tree(tmp_path / "root")
    out = tmp_path / "node.yaml"
    done = capture("--root", str(tmp_path / "root"), "--node-name", "n", "--output", str(out))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert all(line.startswith("mokkafs capture: ") for line in lines), lines
    said = done.stderr
    assert "a FIFO, device or socket where an attribute should be: 1" in said
    assert "larger than 4096 bytes: 1" in said
    assert "a symbolic link loop: 1" in said
    assert "a link out of the root: 2" in said
    assert "a name no attribute has: 1 ('sys/devices/pci0000:00/0000:00:01.0/bad\\nname')" \
        in said
    assert "a name no PCI address has: 1" in said
    assert "passwd" not in out.read_text()
    kept = yaml.safe_load(out.read_text())["pci_functions"]
    assert [f["bdf"] for f in kept] == [BDF]
    assert "subsystem_vendor" not in kept[0]["attributes"]
    assert kept[0]["attributes"]["vendor"] == "0x1af4\n"
    with mounted(out, tmp_path, "--node-name", "n") as mount:
        assert (mount.sys / "bus/pci/devices" / BDF / "vendor").read_text() == "0x1af4\n"


def test_what_cannot_be_a_root_or_an_output_exits_2(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    done = capture("--root", str(tmp_path / "fifo"))
    assert done.returncode == 2 and "--root" in done.stderr and "sys/ and proc/" in done.stderr
    (tmp_path / "root").mkdir()
    (tmp_path / "taken.yaml").write_text("mine\n")
    done = capture("--root", str(tmp_path / "root"), "--output", str(tmp_path / "taken.yaml"))
    assert done.returncode == 2 and "name a new file" in done.stderr
    assert (tmp_path / "taken.yaml").read_text() == "mine\n"


def test_an_unprivileged_capture_of_this_host_says_what_needs_root(tmp_path: Path) -> None:
    done = capture(user="nobody")
    assert done.returncode == 0, done.stderr
    assert "config space beyond the 64-byte header: it needs root" in done.stderr
    doc = yaml.safe_load(done.stdout)
    assert all(f["config_size"] == 64 for f in doc.get("pci_functions", []))
    host = tmp_path / "host.yaml"
    host.write_text(done.stdout)
    with mounted(host, tmp_path, "--node-name", "n") as mount:
        served = {p.name for p in (mount.sys / "bus/pci/devices").iterdir()}
        assert {f["bdf"] for f in doc.get("pci_functions", [])} <= served
    done = capture("--root", str(tmp_path), user="nobody")  # pytest's 0700 directory
    assert done.returncode == 2 and "not a directory mokkafs can read" in done.stderr
