"""The container image and the DaemonSet pattern on one machine: the image is built from a
base made locally (debootstrap, no registry); the daemon runs in it privileged, its FUSE mount
reaches the host through a shared mount, and another container consumes it through the CDI
spec the daemon published. The slow group: a base and an image build (about 3 minutes)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.fuse.cache_mode import CACHE_MODE_ENV
from tests.helpers.containers import CDI_DIR, HOST_TOOLS, RUN, podman
from tests.helpers.mounts import REPO, SHIPPED_PROFILES, is_mounted, wait_for
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool

IMAGE = "localhost/mokkafs:test"
# The first test here makes the base and builds the image (about 3 minutes alone, more beside
# the other tests): the limit is the build's own, not the suite's 300 s.
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def image() -> str:
    require_tool("podman")
    subprocess.run([str(REPO / "deploy/make-base-image.sh")], check=True, timeout=900,
                   capture_output=True)
    # The machine's CA bundle, lent to pip for the build (registries may sit behind a proxy).
    # Lend the build the CA bundle pip uses here (a TLS-intercepting proxy's, if any).
    ca = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
    podman("build", *RUN, "--network", "host", "--secret", f"id=ca,src={ca}", "-f",
           str(REPO / "deploy/Containerfile"), "-t", IMAGE, str(REPO), timeout=1200)
    return IMAGE


def test_image_carries_daemon_shim_hook_and_profiles(image: str) -> None:
    names = [line.split()[0] for line in podman("run", "--rm", *RUN, image).stdout.splitlines()]
    assert sorted(names) == sorted(p.stem for p in SHIPPED_PROFILES.glob("*.yaml"))
    assert {"a100", "b200", "gb200", "gb300", "h100", "h100-mig", "h200", "l40s",
            "t4"} <= set(names)
    listing = podman("run", "--rm", *RUN, "--entrypoint", "ls", image, "-L",
                     "/usr/local/bin/mokkafs-hook", "/usr/local/lib/libmokkafs-preload.so",
                     "/usr/local/lib/mokkafs/libnvidia-ml.so.1").stdout.split()
    assert len(listing) == 3


@pytest.fixture
def host_dirs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A shared host directory for the mount (what the chart's Bidirectional hostPath gives),
    and a host directory for the hook and the NVML library."""
    share, hooks = tmp_path / "mounts", tmp_path / "hooks"
    share.mkdir()
    hooks.mkdir()
    subprocess.run(["mount", "--bind", str(share), str(share)], check=True)
    subprocess.run(["mount", "--make-shared", str(share)], check=True)
    try:
        yield share, hooks
    finally:
        # A daemon killed by `podman rm -f` leaves its read-only share of the parent stacked
        # on this one (it reached the host through the shared mount): unmount both.
        for _ in range(3):
            if not is_mounted(share):
                break
            subprocess.run(["umount", "-l", str(share)], capture_output=True, check=False)


def test_daemonset_pattern_on_one_machine(image: str, host_dirs: tuple[Path, Path],
                                          hosttools_image: str) -> None:
    share, hooks = host_dirs
    mode = os.environ.get(CACHE_MODE_ENV, "auto")  # scripts/test.sh runs both modes
    kind = f"mokkafs-image-{secrets.token_hex(4)}.io/node"
    spec = CDI_DIR / (kind.replace("/", "_") + ".json")
    name = f"mokkafs-ds-{secrets.token_hex(3)}"
    # the chart's init container: the static hook and the NVML library onto the node, and the
    # mountpoint
    podman("run", "--rm", *RUN, "-v", f"{hooks}:/host-hook", "-v", f"{share}:{share}",
           "--entrypoint", "sh", image, "-c", "install -m 0755 /usr/local/bin/mokkafs-hook "
           "/host-hook/mokkafs-hook && install -m 0755 /usr/local/lib/mokkafs/libnvidia-ml.so.1 "
           f"/host-hook/libnvidia-ml.so.1 && mkdir -p {share}/node")
    try:
        podman("run", "-d", "--name", name, *RUN, "--privileged", "--pid", "host",
               "-v", "/dev/fuse:/dev/fuse", "-v", f"{share}:{share}:rshared",
               "-v", f"{CDI_DIR}:{CDI_DIR}", "-v", "/sys:/host/sys:ro",
               "-e", f"{CACHE_MODE_ENV}={mode}", image, "mount",
               "--profile", "h100", "--node-name", "ds-node", "--host-sysfs", "auto",
               "--cdi-dir", str(CDI_DIR), "--cdi-kind", kind, "--cdi-version", "0.5.0",
               "--cdi-hook", str(hooks / "mokkafs-hook"),
               "--cdi-nvml", str(hooks / "libnvidia-ml.so.1"), f"{share}/node")
        wait_for(lambda: spec.exists(), 60, "the daemon in its container to publish a spec")
        assert is_mounted(share / "node")  # the container's mount reached the host
        assert json.loads(spec.read_text())["kind"] == kind
        # auto means no-open: the image's pyfuse3 carries the patch
        expected = "no-open" if mode == "auto" else mode
        # the spec is published before the readiness line, which names the cache mode

        def logged() -> bool:
            logs = podman("logs", name)
            return "cache mode" in logs.stdout + logs.stderr

        wait_for(logged, 60, "the daemon in its container to announce its readiness")
        logs = podman("logs", name)
        assert f"cache mode {expected}" in logs.stdout + logs.stderr
        out = podman("run", "--rm", *RUN, "--device", f"{kind}=all", *HOST_TOOLS,
                     hosttools_image, "sh", "-c",
                     "lspci -nn -k 2>/dev/null | grep -c 'driver in use: nvidia$'; ibstat -l | "
                     "wc -l; grep -c nvidia /proc/devices; cat /sys/class/dmi/id/product_name"
                     ).stdout.split()
        state = state_of("h100")
        nvidia = [f for f in state.functions if f.driver == "nvidia"]  # GPUs (not NVSwitches)
        majors = [m for m in state.char_majors if "nvidia" in m.name]  # /proc/devices
        assert out == [str(len(nvidia)), str(len(state.hcas)), str(len(majors)), "DGXH100"]
        podman("stop", "-t", "10", name)
        assert not spec.exists()  # retracted before unmount
        assert not is_mounted(share / "node")
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)
        spec.unlink(missing_ok=True)  # a daemon killed by rm -f retracts nothing
