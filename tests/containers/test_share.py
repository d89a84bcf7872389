"""What appears in the mountpoint's parent after a container started never reaches it: the
container is given a read-only tmpfs of the daemon's own over the parent, holding only the
mountpoint (mokkafs.delivery.share), not the parent directory itself."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.helpers.containers import HOST_TOOLS, IMAGE, RUN, node_args, podman
from tests.helpers.mounts import REPO, free_port, mokkafs_mount, shared_parent


def test_a_file_written_into_the_parent_later_never_reaches_a_container(
        tmp_path: Path, hosttools_image: str) -> None:
    kind = f"mokkafs-test-{secrets.token_hex(4)}.io/node"
    profile = REPO / "mokkafs/profiles/h100.yaml"
    name = f"mokkafs-share-{os.getpid()}"
    with shared_parent(tmp_path) as share:
        (share / "node").mkdir()
        below = os.open(share, os.O_RDONLY | os.O_DIRECTORY)  # the directory itself
        try:
            with mokkafs_mount(share / "node", node_args(profile, kind, free_port())):
                try:
                    podman("run", "-d", "--name", name, *RUN, "--device", f"{kind}=all",
                           *HOST_TOOLS, IMAGE, "sleep", "600")
                    # by its path (read-only for root too: EROFS), and below the share
                    with contextlib.suppress(OSError):
                        (share / "later").write_text("root's file\n")
                    os.close(os.open("later-below", os.O_WRONLY | os.O_CREAT, 0o600,
                                     dir_fd=below))
                    seen = podman("exec", name, "ls", "-A", "/run/mokkafs-host").stdout
                    assert seen.split() == ["node"]
                    device = podman("exec", name, "cat",
                                    "/sys/bus/pci/devices/0000:1b:00.0/device").stdout
                    assert device == "0x2330\n"
                finally:
                    podman("rm", "-f", "-t", "0", name, check=False)
        finally:
            for leftover in ("later", "later-below"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover, dir_fd=below)
            os.close(below)
        assert sorted(os.listdir(share)) == ["node"]  # the share is gone with the daemon


def test_cdi_refuses_a_parent_that_is_not_a_daemons_share(tmp_path: Path) -> None:
    """A daemon started without --cdi-dir makes no share: the spec ``mokkafs cdi`` would
    print hands containers the bare parent directory, so it is refused."""
    with shared_parent(tmp_path) as share, \
            mokkafs_mount(share / "node", ["--profile", "t4"]) as mount:
        result = subprocess.run([sys.executable, "-m", "mokkafs", "cdi", "--mountpoint",
                                 str(mount.path)], capture_output=True, text=True, cwd=REPO,
                                timeout=60)
    assert result.returncode == 4, result.stderr
    assert f"{share} is not the read-only share a daemon started with --cdi-dir makes" \
        in result.stderr
    assert result.stdout == ""
