"""This machine's own PCI devices: capture the host, mount the captured profile, and
``lspci -vvv -nn`` and ``lspci -tv`` of the mount equal those of the host, byte for byte.

Allowed differences: none in lspci's output. Only its stderr is not compared: lspci warns
there that it cannot load libkmod's resources (this host has no modules.dep), for the host
and the mount alike. The capture runs as root (the whole config space); run unprivileged
it gets the 64-byte header and says so (test_capture_hostile). This test reads the host's
/sys on purpose: capturing the machine it runs on is what it proves."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.captures import mounted, run_capture
from tests.helpers.tools import require_tool


def lspci(*args: str, sysfs: Path | None = None) -> str:
    where = ["-A", "linux-sysfs", "-O", f"sysfs.path={sysfs}/bus/pci"] if sysfs else []
    return subprocess.run([require_tool("lspci"), *where, *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


@pytest.mark.parametrize("args", [("-vvv", "-nn"), ("-tv",)], ids=["vvv-nn", "tv"])
def test_the_mount_of_this_hosts_capture_lists_its_pci_devices_byte_for_byte(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    captured = tmp_path / "host.yaml"
    done = run_capture("--output", str(captured), timeout=120)
    assert done.returncode == 0, done.stderr
    host = lspci(*args)
    assert host.strip()
    with mounted(captured, tmp_path / "m", "--node-name", "node-a") as mount:
        assert lspci(*args, sysfs=mount.sys) == host
