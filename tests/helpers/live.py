"""A live mount whose profile tests change, and its health and metrics endpoints (a plugin:
the ``live`` fixture); one that publishes its CDI spec (``cdi_node``)."""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from mokkafs.testing import samples
from tests.helpers.metrics import fuse_requests
from tests.helpers.mounts import SHIPPED_PROFILES, Mount, free_port, mokkafs_mount, wait_for


@dataclass
class Live:
    mount: Mount
    profile: Path  # the path mokkafs watches
    url: str

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def ready(self) -> dict[str, object]:
        status, body = self.get("/readyz")
        report: dict[str, object] = json.loads(body)
        assert (status == 200) == bool(report["ready"])
        return report

    def generation(self) -> int:
        generation = self.ready()["generation"]
        assert isinstance(generation, int)
        return generation

    def metric(self, series: str) -> float:
        """One series of /metrics (``name`` or ``name{label="value"}``); 0 when absent."""
        return samples(self.get("/metrics")[1]).get(series, 0.0)

    def wait_generation(self, generation: int) -> float:
        """Poll /readyz until ``generation`` serves; return the monotonic time it did."""
        wait_for(lambda: self.generation() >= generation, 20, f"generation {generation}")
        assert self.generation() == generation
        return time.monotonic()


def profile_text(name: str) -> str:
    return (SHIPPED_PROFILES / f"{name}.yaml").read_text()


@contextmanager
def live_mount(tmp_path: Path, profile: str = "a100", extra: Sequence[str] = (),
               command: Sequence[str] | None = None, expect: Sequence[str] = (),
               mountpoint: Path | None = None, target: Path | None = None) -> Iterator[Live]:
    """A mount (at ``tmp_path/mnt`` unless given) of ``tmp_path/config/node.yaml``, a copy of
    a shipped profile (or a link to ``target``, that copy), watched, with its metrics on a
    loopback port. ``command`` replaces ``mokkafs mount`` (same arguments)."""
    mnt = mountpoint or tmp_path / "mnt"
    config = tmp_path / "config"
    config.mkdir()
    path = config / "node.yaml"
    if target is None:
        path.write_text(profile_text(profile))
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(profile_text(profile))
        os.symlink(target, path)
    port = free_port()
    args = ["--profile", str(path), "--node-name", "node-a", "--metrics", f"127.0.0.1:{port}",
            *extra]
    with mokkafs_mount(mnt, args, expect=expect,
                       command=[*command, *args, str(mnt)] if command else None) as mount:
        yield Live(mount, path, f"http://127.0.0.1:{port}")


def rename_over(live: Live, text: str) -> None:
    tmp = live.profile.with_name(".node.yaml.swp")
    tmp.write_text(text)
    os.rename(tmp, live.profile)


def requests(live: Live) -> dict[str, float]:
    return fuse_requests(live.get("/metrics")[1])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    """A mount of a watched a100 profile, with its metrics endpoint."""
    with live_mount(tmp_path) as mounted:
        yield mounted


@contextmanager
def cdi_node(tmp_path: Path, profile: str = "h100", command: list[str] | None = None,
             expect: tuple[str, ...] = ()) -> Iterator[tuple[Live, Path, str]]:
    """A mount publishing its CDI spec into a directory of the test's (no runtime reads it)."""
    cdi = tmp_path / "cdi"
    kind = f"mokkafs-test-{secrets.token_hex(4)}.io/node"
    spec = cdi / (kind.replace("/", "_") + ".json")
    with live_mount(tmp_path, profile, extra=["--cdi-dir", str(cdi), "--cdi-kind", kind],
                    command=command, expect=expect,
                    mountpoint=tmp_path / "share" / "node") as live:
        yield live, spec, kind
