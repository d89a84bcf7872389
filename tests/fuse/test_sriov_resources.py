"""A PF's VF BARs through a real ``--writable`` mount: its ``resource`` file's IOV lines
(7-12, PCI_IOV_RESOURCES, as drivers/pci/pci-sysfs.c ``resource_show`` prints them) hold the
VF BAR region whether VFs are enabled or not; it starts where the SR-IOV capability's VF BAR
register says and spans TotalVFs VF BARs; VF i's BAR 0 is its slice; ``lspci -vvv``
(pciutils, reading config and sysfs) shows the same addresses, and a VF's BAR as the
``[virtual]`` one a VF's zero BAR register makes. Both cache modes."""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuse.test_writes import VFS, write_errno
from tests.helpers.live import Live, live_mount
from tests.helpers.profiles import H100_NIC0, device_path
from tests.helpers.tools import require_tool

PF = H100_NIC0
SRIOV_CAP = 0x100


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Live]:
    with live_mount(tmp_path, "h100", extra=["--writable"]) as live:
        yield live


def lines(path: Path) -> list[tuple[int, int, int]]:
    return [(int(a, 16), int(b, 16), int(c, 16))
            for a, b, c in (line.split() for line in path.read_text().splitlines())]


def lspci(live: Live, bdf: str) -> str:
    return subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                           f"sysfs.path={live.mount.path}/sys/bus/pci", "-vvv", "-s", bdf],
                          capture_output=True, text=True, check=True, timeout=60).stdout


def test_the_vf_bar_region_agrees_with_the_capability_the_vfs_and_lspci(node: Live) -> None:
    root = node.mount.path
    pf = root / device_path(PF)
    total = int((pf / "sriov_totalvfs").read_text())
    config = (pf / "config").read_bytes()
    low, high = struct.unpack_from("<II", config, SRIOV_CAP + 0x24)  # VF BAR 0, 64-bit
    assert low & 0x6 == 0x4 and low & 0x8  # 64-bit, prefetchable
    register = (high << 32) | (low & ~0xF)
    before = lines(pf / "resource")
    assert len(before) == 13  # 6 BARs, the ROM, 6 IOV resources
    start, end, flags = before[7]
    assert start == register and flags == before[0][2]  # a 64-bit prefetchable memory BAR
    assert (end - start + 1) % total == 0
    size = (end - start + 1) // total
    assert before[8:] == [(0, 0, 0)] * 5
    assert write_errno(pf / "sriov_numvfs", b"4\n") == 0
    assert lines(pf / "resource") == before  # there whether VFs are enabled or not
    for i, vf in enumerate(VFS):
        own = lines(root / "sys/bus/pci/devices" / vf / "resource")
        assert own[0][:2] == (start + i * size, start + (i + 1) * size - 1)
        assert own[1:] == [(0, 0, 0)] * 12
        vf_config = (root / "sys/bus/pci/devices" / vf / "config").read_bytes()
        assert vf_config[0x10:0x28] == bytes(24)  # a VF's BAR registers read 0
        assert f"Region 0: Memory at {start + i * size:x} (64-bit, prefetchable) [virtual] " \
               f"[size={size >> 20}M]" in lspci(node, vf)
    shown = lspci(node, PF)
    sriov = shown[shown.index("Single Root I/O Virtualization"):]
    assert f"Region 0: Memory at {start:016x} (64-bit, prefetchable)" in sriov
    assert "Number of VFs: 4" in sriov
