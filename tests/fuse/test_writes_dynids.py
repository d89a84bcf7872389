"""Dynamic IDs and a PF's unbinding through a real ``--writable`` mount (docs/writes.md,
"Dynamic IDs"): ``new_id`` and ``remove_id`` answer with the kernel's errnos; the IDs are
listed, cleared, and kept by the next daemon (a real one, killed with SIGKILL); VFs made
after a vfio-pci ID go to mlx5_core, registered first; unbinding a PF with VFs disables
them, as mlx5's remove does, and ``sriov_numvfs`` of the unbound PF is ENOENT. Both cache
modes (the suite runs again with MOKKAFS_CACHE_MODE=keep-cache)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

from tests.fuse.test_writes import VFS, write_errno
from tests.helpers.live import profile_text
from tests.helpers.mounts import REPO, free_port, mokkafs_mount
from tests.helpers.profiles import H100_NIC0, device_path

PF = H100_NIC0
VFIO_TEXT = '  driver_version: "550.163.01"\n'
VF_ID = "15b3 101e ffffffff ffffffff 0 0 0"


def writes(control: Path, verb: str) -> list[list[str]]:
    out = subprocess.run([sys.executable, "-m", "mokkafs", "writes", "--control", str(control),
                          verb], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line.split("\t") for line in out.stdout.splitlines()]


def args(tmp_path: Path) -> tuple[list[str], Path, Path]:
    control, mnt = tmp_path / "ctl" / "sock", tmp_path / "mnt"
    control.parent.mkdir(mode=0o700, exist_ok=True)
    profile = tmp_path / "node.yaml"
    profile.write_text(profile_text("h100").replace(VFIO_TEXT, VFIO_TEXT + "  vfio_pci: true\n"))
    return (["--writable", "--profile", str(profile), "--control", str(control), "--metrics",
             f"127.0.0.1:{free_port()}"], control, mnt)


def driver(root: Path, bdf: str) -> str | None:
    link = root / "sys/bus/pci/devices" / bdf / "driver"
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def test_new_id_remove_id_and_a_restart(tmp_path: Path) -> None:
    argv, control, mnt = args(tmp_path)
    vfio = mnt / "sys/bus/pci/drivers/vfio-pci"
    with mokkafs_mount(mnt, argv) as first:
        assert write_errno(vfio / "new_id", b"15b3\n", 0) == errno.EINVAL
        assert write_errno(vfio / "new_id", b"15b3 101e\n", 0) == 0
        assert write_errno(vfio / "new_id", b"15b3 101e\n", 0) == errno.EEXIST
        assert write_errno(mnt / "sys/bus/pci/drivers/mlx5_core/new_id", b"15b3 1021", 0) \
            == errno.EEXIST  # its own table has it
        assert writes(control, "list") == [["vfio-pci", "new_id", VF_ID]]
        # mlx5_core registered before vfio-pci and its table claims the VF: it takes them
        assert write_errno(mnt / device_path(PF) / "sriov_numvfs", b"2\n") == 0
        assert [driver(mnt, vf) for vf in VFS[:2]] == ["mlx5_core", "mlx5_core"]
        first.process.kill()
        first.process.wait()
        subprocess.run(["umount", "-l", str(mnt)], check=True)
        with mokkafs_mount(mnt, argv):
            assert writes(control, "list") == [[PF, "sriov_numvfs", "2"],
                                               ["vfio-pci", "new_id", VF_ID]]
            assert [driver(mnt, vf) for vf in VFS[:2]] == ["mlx5_core", "mlx5_core"]
            assert write_errno(vfio / "new_id", b"15b3 101e", 0) == errno.EEXIST  # kept
            assert write_errno(vfio / "remove_id", b"15b3\n", 0) == errno.EINVAL
            assert write_errno(vfio / "remove_id", b"15b3 1021\n", 0) == errno.ENODEV
            assert write_errno(vfio / "remove_id", b"15b3 101e\n", 0) == 0
            assert write_errno(vfio / "remove_id", b"15b3 101e\n", 0) == errno.ENODEV
            assert writes(control, "list") == [[PF, "sriov_numvfs", "2"]]
            assert [driver(mnt, vf) for vf in VFS[:2]] == ["mlx5_core", "mlx5_core"]
            assert write_errno(vfio / "new_id", b"15b3 101e", 0) == 0
            assert writes(control, "clear") == [["cleared 2 writes"]]
            assert writes(control, "list") == []
            assert write_errno(vfio / "remove_id", b"15b3 101e", 0) == errno.ENODEV
        first.process.returncode = 0  # killed on purpose


def test_unbinding_a_pf_with_vfs_disables_them(tmp_path: Path) -> None:
    argv, control, mnt = args(tmp_path)
    pf = mnt / device_path(PF)
    devices, mlx5 = mnt / "sys/bus/pci/devices", mnt / "sys/bus/pci/drivers/mlx5_core"
    with mokkafs_mount(mnt, argv):
        before = sorted(os.listdir(devices))
        assert write_errno(pf / "sriov_numvfs", b"4\n") == 0
        assert set(VFS) <= set(os.listdir(devices)) and "virtfn3" in os.listdir(pf)
        assert write_errno(mlx5 / "unbind", PF.encode(), 0) == 0  # never refused
        # mlx5's remove disabled SR-IOV: the VFs are gone, with every trace of them
        assert sorted(os.listdir(devices)) == before
        assert not [n for n in os.listdir(pf) if n.startswith("virtfn")]
        assert (pf / "sriov_numvfs").read_text() == "0\n" and driver(mnt, PF) is None
        assert writes(control, "list") == [[PF, "driver", ""]]
        # no driver: sriov_numvfs_store's ENOENT ("no driver bound to device")
        assert write_errno(pf / "sriov_numvfs", b"2\n") == errno.ENOENT
        assert write_errno(pf / "sriov_numvfs", b"0\n") == 0  # the number it has
        assert write_errno(mlx5 / "bind", PF.encode(), 0) == 0
        assert (pf / "sriov_numvfs").read_text() == "0\n"  # they stay disabled
        assert write_errno(pf / "sriov_numvfs", b"2\n") == 0
        assert [driver(mnt, vf) for vf in VFS[:2]] == ["mlx5_core", "mlx5_core"]
