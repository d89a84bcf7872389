"""Helpers to run real consumers against a mount: private mount namespaces, device nodes,
the Go reader built offline (a plugin: the ``ibdump`` fixture), and a loopback node_exporter
stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from mokkafs import testing
from tests.helpers.mounts import REPO
from tests.helpers.tools import require_tool
from tests.helpers.workers import made_once

GO_SOURCE = REPO / "tests" / "consumers" / "go" / "ibdump"


def in_namespace(script: str, timeout: float = 60) -> str:
    """Run ``script`` with sh in a private mount namespace (the host is not affected)."""
    result = subprocess.run(["unshare", "-m", "sh", "-c",
                             f"mount --make-rprivate / && {script}"],
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def with_sys(mount_sys: Path, command: str) -> str:
    """Run a tool with a hard-coded /sys path against the view."""
    return in_namespace(f"mount --bind {shlex.quote(str(mount_sys))} /sys && {command}")


def with_dev_nodes(nodes: list[tuple[str, int, int]], command: str) -> str:
    """Run ``command`` with a private /dev holding exactly these character nodes."""
    mk = " && ".join(f"mkdir -p {shlex.quote(os.path.dirname(p))} && "
                     f"mknod {shlex.quote(p)} c {ma} {mi}" for p, ma, mi in nodes)
    return in_namespace(f"mount -t tmpfs tmpfs /dev && mknod /dev/null c 1 3 && {mk} && "
                        f"{command}")


@pytest.fixture(scope="session")
def ibdump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go reader, built offline from Debian's prometheus/procfs source (GOPATH mode),
    once for the run's workers."""
    go = require_tool("go")
    gopath = Path("/usr/share/gocode")
    if not (gopath / "src/github.com/prometheus/procfs").is_dir():
        pytest.fail("golang-github-prometheus-procfs-dev is not installed: run scripts/setup.sh",
                    pytrace=False)

    def build(work: Path) -> None:
        env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(gopath), "GOPROXY": "off",
               "GOCACHE": str(work / "cache"), "CGO_ENABLED": "0"}
        subprocess.run([go, "build", "-o", str(work / "ibdump"), str(GO_SOURCE / "main.go")],
                       env=env, check=True, timeout=300, cwd=work)

    return made_once(tmp_path_factory, "go-ibdump", build) / "ibdump"


def node_exporter(sysfs: Path) -> contextlib.AbstractContextManager[str]:
    """A node_exporter with only the infiniband collector, on a loopback port of its own."""
    return testing.node_exporter(require_tool("prometheus-node-exporter"), sysfs)
