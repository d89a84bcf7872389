"""The systemd unit: systemd-analyze verify, the notify protocol seen from the manager's
side of NOTIFY_SOCKET, and a boot: systemd as PID 1 in a container starts the unit before
every container runtime."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.helpers.containers import HOST_TOOLS, IMAGE, RUN, podman
from tests.helpers.mounts import REPO, is_mounted, shared_parent, wait_for
from tests.helpers.tools import require_tool

UNIT = REPO / "deploy/systemd/mokkafs.service"
# What starts containers on a node at boot: each must find the node served when it starts.
RUNTIMES = ("containerd.service", "crio.service", "docker.service", "podman.service",
            "podman-restart.service", "kubelet.service")


def unit_values(text: str, section: str, key: str) -> list[str]:
    """The space-separated values of every ``key=`` line in ``[section]``."""
    values, current = [], ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line.strip("[]")
        elif current == section and line.startswith(f"{key}="):
            values += line.partition("=")[2].split()
    return values


def test_unit_starts_before_every_runtime_once_serving() -> None:
    text = UNIT.read_text()
    assert set(RUNTIMES) <= set(unit_values(text, "Unit", "Before"))
    assert not set(RUNTIMES) & set(unit_values(text, "Unit", "After"))
    assert unit_values(text, "Service", "Type") == ["notify"]  # started = READY=1 = serving
    assert unit_values(text, "Install", "WantedBy") == ["multi-user.target"]  # as they are


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


# A stand-in for each runtime, ordered after nothing: what it finds when systemd starts it.
PROBE = """[Unit]
Description=stands in for {name}
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'n=/run/mokkafs/node/sys/class/infiniband; \\
  { grep -q /dev/infiniband/rdma_cm /etc/cdi/mokkafs.io_node.json && echo spec; \\
    cat $n/mlx5_0/fw_ver $n/mlx5_3/ports/1/state; } > /result/{name} 2>&1'
[Install]
WantedBy=multi-user.target
"""


def test_a_booting_node_serves_before_its_runtimes_start(tmp_path: Path,
                                                         hosttools_image: str) -> None:
    """systemd boots (PID 1 of a privileged container) with the unit as installed (only its
    command's path is the checkout's) and a stand-in for every runtime that orders itself
    after nothing: each finds the CDI spec with its device nodes, the view serving and the
    profile's fault applied. Without the unit's Before= they start while it starts."""
    units, result = tmp_path / "units", tmp_path / "result"
    wants = units / "multi-user.target.wants"
    wants.mkdir(parents=True)
    result.mkdir()
    exe = Path(sys.executable).parent / "mokkafs"
    (units / "mokkafs.service").write_text(
        UNIT.read_text().replace("/usr/local/bin/mokkafs", str(exe)))
    for name in ("mokkafs.service", *RUNTIMES):
        if name != "mokkafs.service":
            (units / name).write_text(PROBE.replace("{name}", name))
        (wants / name).symlink_to(f"../{name}")
    profile = tmp_path / "node.yaml"
    profile.write_text((REPO / "mokkafs/profiles/h100.yaml").read_text() + "\nfaults:\n"
                       "  - {name: rail3-down, kind: ib-port-down, target: mlx5_3/1}\n")
    defaults = tmp_path / "default"
    defaults.write_text("MOKKAFS_PROFILE=/etc/mokkafs/node.yaml\n")
    name = f"mokkafs-boot-{secrets.token_hex(4)}"
    try:
        # A cgroup namespace of its own: in the host's, the booting systemd would remount the
        # host's cgroup2 with nsdelegate, an option of the one file system every mount of it
        # shares (the guards check the host's mounts are as they were).
        podman("run", "-d", "--name", name, *RUN, "--systemd=always", "--privileged",
               "--cgroupns=private", *HOST_TOOLS, "-v", f"{REPO}:{REPO}:ro",
               "-v", f"{units}:/etc/systemd/system:ro", "-v", f"{result}:/result",
               "-v", f"{profile}:/etc/mokkafs/node.yaml:ro",
               "-v", f"{defaults}:/etc/default/mokkafs:ro", IMAGE, "/lib/systemd/systemd")
        wait_for(lambda: all((result / r).exists() for r in RUNTIMES), 120,
                 "every stand-in runtime to start")
        state = podman("exec", name, "systemctl", "show", "-p", "ActiveState",
                       "mokkafs.service").stdout
        for runtime in RUNTIMES:
            assert (result / runtime).read_text() == "spec\n28.39.2048\n1: DOWN\n", runtime
        assert state == "ActiveState=active\n"
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)
