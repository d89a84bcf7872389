"""Writes through a real mount (docs/writes.md): ``echo 4 > sriov_numvfs`` as root makes 4 VFs
visible to the next reader, kernel caches included; the kernel's errnos for the writes it
refuses and for writers it refuses; writes listed, counted and cleared; kept across a profile
swap where their PF stays, dropped where it goes. Run in both cache modes (the suite runs
again with MOKKAFS_CACHE_MODE=keep-cache)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.live import Live, live_mount, profile_text, rename_over, requests
from tests.helpers.profiles import H100_NIC0, device_path
from tests.helpers.tools import require_tool

PF = H100_NIC0
VFS = ["0000:18:00.1", "0000:18:00.2", "0000:18:00.3", "0000:18:00.4"]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Live]:
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    with live_mount(tmp_path, "h100", extra=["--control", str(control), "--writable"],
                    expect=["dropped"]) as live:
        yield live


def control(live: Live) -> Path:
    return live.profile.parents[1] / "ctl" / "sock"


def shell(command: str, *prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, "sh", "-c", command], capture_output=True, text=True,
                          timeout=60)


def write_errno(path: Path, data: bytes, flags: int = os.O_TRUNC) -> int:
    """The errno of one write (0: taken), whether the open or the write refuses it (in
    no-open mode the kernel sends no OPEN: the WRITE is refused)."""
    try:
        fd = os.open(path, os.O_WRONLY | flags)
    except OSError as exc:
        return exc.errno or 0
    try:
        os.write(fd, data)
    except OSError as exc:
        return exc.errno or 0
    finally:
        os.close(fd)
    return 0


def writes_cli(live: Live, verb: str) -> str:
    return subprocess.run([sys.executable, "-m", "mokkafs", "writes", "--control",
                           str(control(live)), verb], capture_output=True, text=True,
                          check=True, timeout=60).stdout


def test_echo_4_makes_four_vfs_every_reader_sees_at_once(node: Live) -> None:
    pf = node.mount.path / device_path(PF)
    devices = node.mount.path / "sys/bus/pci/devices"
    before_pf = sorted(os.listdir(pf))  # listed, so the kernel holds these directories
    before_bus = sorted(os.listdir(devices))
    assert "virtfn0" not in before_pf and VFS[0] not in before_bus
    assert (pf / "sriov_totalvfs").read_text() == "8\n"
    assert (pf / "sriov_numvfs").read_text() == "0\n"
    result = shell(f"echo 4 > {pf}/sriov_numvfs")
    assert result.returncode == 0, result.stderr
    # No polling: the write returned once the view was installed.
    assert (pf / "sriov_numvfs").read_text() == "4\n"
    assert sorted(os.listdir(pf)) == sorted([*before_pf, *(f"virtfn{i}" for i in range(4))])
    assert sorted(os.listdir(devices)) == sorted([*before_bus, *VFS])
    for i, vf in enumerate(VFS):
        assert os.path.realpath(pf / f"virtfn{i}") == str(devices.resolve() / vf) or \
            os.path.realpath(pf / f"virtfn{i}") == os.path.realpath(devices / vf)
        assert os.path.realpath(devices / vf / "physfn") == str(pf)
        assert (devices / vf / "device").read_text() == "0x101e\n"
        assert os.path.basename(os.readlink(devices / vf / "driver")) == "mlx5_core"
    names = [n for d in (PF, *VFS) for n in os.listdir(devices / d / "net")]
    assert names == ["ibp24s0", "ibp24s0v0", "ibp24s0v1", "ibp24s0v2", "ibp24s0v3"]
    assert node.ready()["writes"] == [
        {"target": PF, "attribute": "sriov_numvfs", "value": "4",
         "at": node.ready()["writes"][0]["at"]}]  # type: ignore[index]
    assert node.metric("mokkafs_writes_active") == 1
    assert node.metric("mokkafs_writes_taken_total") == 1
    assert writes_cli(node, "list") == f"{PF}\tsriov_numvfs\t4\n"
    assert (pf / "sriov_numvfs").read_text() == "4\n"
    assert writes_cli(node, "clear") == "cleared 1 writes\n"
    assert (pf / "sriov_numvfs").read_text() == "0\n"
    assert sorted(os.listdir(devices)) == before_bus


def test_the_kernel_asks_again_only_for_what_a_write_changed(node: Live) -> None:
    pf = node.mount.path / device_path(PF)
    numvfs, vendor = pf / "sriov_numvfs", pf / "vendor"
    for path in (numvfs, vendor):
        path.read_text()
    os.listdir(pf)
    base = requests(node)
    os.listdir(pf)
    vendor.read_text()
    cached = requests(node)
    assert cached.get("lookup", 0) - base.get("lookup", 0) == 0
    assert write_errno(numvfs, b"2\n") == 0
    after_write = requests(node)
    assert "virtfn1" in os.listdir(pf) and numvfs.read_text() == "2\n"
    asked = requests(node)
    assert asked.get("readdir", 0) > after_write.get("readdir", 0)  # the listing was dropped


def test_the_kernels_errnos(node: Live) -> None:
    pf = node.mount.path / device_path(PF)
    numvfs = pf / "sriov_numvfs"
    assert write_errno(numvfs, b"nine\n") == errno.EINVAL
    assert write_errno(numvfs, b"9\n") == errno.ERANGE
    assert write_errno(numvfs, b"4\n") == 0
    assert write_errno(numvfs, b"2\n") == errno.EBUSY
    assert write_errno(numvfs, b"4\n") == 0  # the same number: nothing to do
    assert numvfs.read_text() == "4\n"
    assert node.metric('mokkafs_writes_refused_total{errno="EBUSY"}') == 1
    for name in ("vendor", "numa_node", "config"):  # no store simulated: EACCES, even to root
        assert write_errno(pf / name, b"1", 0) == errno.EACCES
        assert (pf / "vendor").read_text() == "0x15b3\n"
    with pytest.raises(OSError) as info:
        (pf / "new").mkdir()
    assert info.value.errno == errno.EPERM
    with pytest.raises(PermissionError):
        (pf / "new").write_text("x")
    with pytest.raises(OSError) as info:
        (pf / "vendor").unlink()
    assert info.value.errno == errno.EPERM


def test_who_may_write(node: Live) -> None:
    numvfs = node.mount.path / device_path(PF) / "sriov_numvfs"
    nobody = shell(f"echo 1 > {numvfs}", require_tool("setpriv"), "--reuid=65534",
                   "--regid=65534", "--clear-groups")
    assert nobody.returncode != 0 and "Permission denied" in nobody.stderr
    # root without CAP_SYS_ADMIN: a container without privileges, whose /sys is read-only
    capless = shell(f"echo 1 > {numvfs}", require_tool("setpriv"), "--bounding-set=-sys_admin",
                    "--inh-caps=-sys_admin")
    assert capless.returncode != 0 and "Read-only file system" in capless.stderr
    assert numvfs.read_text() == "0\n"


def test_writes_survive_a_swap_where_their_pf_stays(node: Live) -> None:
    pf = node.mount.path / device_path(PF)
    other = node.mount.path / device_path("0000:40:00.0")
    assert write_errno(pf / "sriov_numvfs", b"4") == 0
    assert write_errno(other / "sriov_numvfs", b"2") == 0
    rename_over(node, profile_text("h100").replace("MT_0000000838", "MT_0000000839"))
    node.wait_generation(2)
    assert (pf / "sriov_numvfs").read_text() == "4\n"
    text = profile_text("h100").replace('    - {bus_id: "0000:18:00.0", name: mlx5_0}', "")
    rename_over(node, text.replace('"0000:18:00.0", "0000:1b:00.0"', '"0000:1b:00.0"'))
    node.wait_generation(3)
    assert not pf.exists()
    assert (other / "sriov_numvfs").read_text() == "2\n"
    listed = json.loads(node.get("/readyz")[1])["writes"]
    assert [(w["target"], w["value"]) for w in listed] == [("0000:40:00.0", "2")]
    assert node.metric("mokkafs_writes_dropped_total") == 1
    assert "write 0000:18:00.0/sriov_numvfs=4 dropped: 0000:18:00.0 is gone" in \
        node.mount.log_text()
