"""Containers for the CDI tests: podman with runc (podman 4.3 here needs runc and lowered
ulimits, see consumers.md §4.1), an image made locally from the host's own tools (no
registry), and a mokkafs daemon that publishes its spec into the runtime's CDI directory
under a kind of its own (a plugin: the ``hosttools_image`` and ``h100_node`` fixtures)."""

from __future__ import annotations

import hashlib
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.mounts import (
    SHIPPED_PROFILES,
    Mount,
    free_port,
    mokkafs_mount,
    shared_parent,
)
from tests.helpers.tools import require_tool
from tests.helpers.workers import run_lock

IMAGE = "localhost/mokkafs-test-hostroot"  # imported once per content (hosttools_image)
CDI_DIR = Path("/var/run/cdi")  # podman 4.3 reads only /etc/cdi and /var/run/cdi
RUN = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
# The host's /usr as a writable overlay (what a container writes there is dropped with it): the
# CDI spec's nvml device binds mokkafs's NVML below /usr/lib and links it there, as in an image's
# root. The host's linker cache, read-only: the ldcache hook cannot replace it and says so.
HOST_TOOLS = ["-v", "/usr:/usr:O", "-v", "/etc/ld.so.cache:/etc/ld.so.cache:ro",
              "-v", "/etc/libibverbs.d:/etc/libibverbs.d:ro",
              "-v", "/etc/alternatives:/etc/alternatives:ro"]
# The same as an image's own tools: the linker's configuration but not its cache, which the
# ldcache hook makes for the container (tests/containers/test_nvml.py).
IMAGE_TOOLS = ["-v", "/usr:/usr:O", "-v", "/etc/ld.so.conf:/etc/ld.so.conf:ro",
               "-v", "/etc/ld.so.conf.d:/etc/ld.so.conf.d:ro",
               "-v", "/etc/alternatives:/etc/alternatives:ro"]


def podman(*args: str, timeout: float = 180, check: bool = True,
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require_tool("podman"), *args], capture_output=True, text=True,
                          timeout=timeout, check=check)


@pytest.fixture(scope="session")
def hosttools_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An image whose root holds only mountpoints and links into /usr, which each container
    takes from the host (HOST_TOOLS): every installed consumer, no image registry. The run's
    workers take turns to check it (two imports at once would each move the tag)."""
    with run_lock(tmp_path_factory, "hosttools-image"):
        return _hosttools_image()


def _hosttools_image() -> str:
    with tempfile.TemporaryDirectory() as root:
        base = Path(root)
        for d in ("usr", "sys", "proc", "dev", "tmp", "run", "root", "var/tmp", "etc"):
            (base / d).mkdir(parents=True)
        for link in ("bin", "sbin", "lib", "lib64"):
            (base / link).symlink_to(f"usr/{link}")
        (base / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (base / "etc/group").write_text("root:x:0:\n")
        archive = subprocess.run(["tar", "-C", root, "--sort=name", "--mtime=@0",
                                  "--owner=0", "--group=0", "--numeric-owner", "-c", "."],
                                 capture_output=True, check=True).stdout
    # Imported again only when its content changed: an import moves the tag to a new image,
    # under the feet of a container another pytest run on the machine is starting from it.
    content = hashlib.sha256(archive).hexdigest()[:16]
    label = podman("image", "inspect", "-f", '{{index .Labels "mokkafs.content"}}', IMAGE,
                   check=False).stdout.strip()
    if label != content:
        subprocess.run([require_tool("podman"), "import", "-q", "--change",
                        f"LABEL=mokkafs.content={content}", "-", IMAGE], input=archive,
                       check=True, capture_output=True, timeout=120)
    return IMAGE


@dataclass
class Node:
    mount: Mount
    kind: str
    spec: Path
    url: str
    profile: Path
    control: Path

    def device(self, name: str = "all") -> str:
        return f"{self.kind}={name}"

    def run(self, script: str, *extra: str, timeout: float = 180) -> str:
        result = podman("run", "--rm", *RUN, "--device", self.device(), *HOST_TOOLS, *extra,
                        IMAGE, "sh", "-c", script, timeout=timeout)
        return result.stdout


def node_args(profile: Path, kind: str, port: int) -> list[str]:
    return ["--profile", str(profile), "--node-name", "node-a", "--cdi-dir", str(CDI_DIR),
            "--cdi-kind", kind, "--cdi-version", "0.5.0", "--metrics", f"127.0.0.1:{port}"]


def start_node(tmp_path: Path, profile: Path, *extra: str) -> Iterator[Node]:
    kind = f"mokkafs-test-{secrets.token_hex(4)}.io/node"
    spec = CDI_DIR / (kind.replace("/", "_") + ".json")
    port = free_port()
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    args = [*node_args(profile, kind, port), "--control", str(control), *extra]
    with shared_parent(tmp_path) as share, mokkafs_mount(share / "node", args) as mount:
        yield Node(mount, kind, spec, f"http://127.0.0.1:{port}", profile, control)
    assert not spec.exists(), "the CDI spec outlived the mount"


@pytest.fixture
def h100_node(tmp_path: Path, hosttools_image: str) -> Iterator[Node]:
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    profile.write_text((SHIPPED_PROFILES / "h100.yaml").read_text())
    yield from start_node(tmp_path, profile)


@pytest.fixture
def writable_h100_node(tmp_path: Path, hosttools_image: str) -> Iterator[Node]:
    """``h100_node`` mounted ``--writable`` (docs/writes.md)."""
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    profile.write_text((SHIPPED_PROFILES / "h100.yaml").read_text())
    yield from start_node(tmp_path, profile, "--writable")

