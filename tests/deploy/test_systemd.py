"""The systemd unit: systemd-analyze verify, and the notify protocol seen from the manager's
side of NOTIFY_SOCKET."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import require_tool
from tests.helpers.mounts import REPO, is_mounted, shared_parent

UNIT = REPO / "deploy/systemd/mokkafs.service"


def test_unit_verifies() -> None:
    """As installed: /usr/local/bin/mokkafs links to the package's command. The link lives on
    a tmpfs in a private mount namespace, so the host is not touched."""
    require_tool("systemd-analyze")
    exe = Path(sys.executable).parent / "mokkafs"
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         "mount --make-rprivate / && mount -t tmpfs tmpfs /usr/local/bin && "
         f"ln -s {exe} /usr/local/bin/mokkafs && systemd-analyze verify {UNIT}"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    text = UNIT.read_text()
    assert "Type=notify" in text and "Restart=on-failure" in text
    assert "ExecStopPost=-/usr/local/bin/mokkafs cleanup --cdi-dir /etc/cdi /run/mokkafs/node" \
        in text
    assert "LimitNOFILE=65536" in text
    assert "\nEnvironment=PYTHONOPTIMIZE=2\n" in text  # as _notify_round runs the daemon
    for option in ("ProtectSystem", "PrivateTmp", "PrivateDevices", "ReadWritePaths"):
        assert f"\n{option}=" not in text  # each would hide the mount from the host


def test_notify_protocol(tmp_path: Path) -> None:
    """READY=1 only once the mount serves and the CDI spec is published; STOPPING=1 before the
    spec is retracted and the mount goes. The daemon runs as the unit runs it: optimized, with
    neither docstrings nor asserts."""
    sock_path = tmp_path / "notify"
    manager = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    manager.bind(str(sock_path))
    manager.settimeout(30)
    cdi = tmp_path / "cdi"
    with shared_parent(tmp_path) as share:
        mnt = share / "node"
        mnt.mkdir()
        _notify_round(manager, mnt, cdi, sock_path)


def _notify_round(manager: socket.socket, mnt: Path, cdi: Path, sock_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "mokkafs", "mount", "--profile", "h100",
                             "--cdi-dir", str(cdi), "--cdi-kind", "mokkafs-notify.io/node",
                             str(mnt)], cwd=REPO, stderr=subprocess.DEVNULL,
                            env={**os.environ, "NOTIFY_SOCKET": str(sock_path),
                                 "PYTHONOPTIMIZE": "2"})
    spec = cdi / "mokkafs-notify.io_node.json"
    try:
        assert manager.recv(4096) == b"READY=1"
        assert is_mounted(mnt) and spec.exists()
        assert (mnt / "sys/bus/pci/devices").is_dir()
        proc.send_signal(signal.SIGTERM)
        assert manager.recv(4096) == b"STOPPING=1"
        assert proc.wait(timeout=10) == 0
        assert not is_mounted(mnt) and not spec.exists()
    finally:
        manager.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
