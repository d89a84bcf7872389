"""Publishing a serving mount's CDI spec: ``Publisher`` keeps ``<cdi_dir>/<kind>.json`` in
step with the view, touching only what it wrote; ``write_atomically`` writes a spec once
(``mokkafs cdi --output``)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mokkafs.delivery.cdi import (
    DEFAULT_VERSION,
    KIND,
    DeviceNode,
    build_spec,
    hook_path,
    package_nvml_library,
    spec_file_name,
    validate,
)
from mokkafs.delivery.specdir import SpecDir, SpecRef, digest
from mokkafs.errors import CdiError

log = logging.getLogger(__name__)


def write_atomically(spec: dict[str, Any], path: Path) -> None:
    """Write the spec next to its final name and rename it into place: a runtime scanning
    the CDI directory sees the old spec or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mokkafs-", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


class Publisher:
    """Keeps ``<cdi_dir>/<kind>.json`` in step with a serving mount, touching only what it
    wrote: ``record`` is told (before and after each write) what the spec may hold, so that
    a cleanup after a crash can tell the daemon's spec from anybody else's."""

    def __init__(self, cdi_dir: Path, mountpoint: Path, version: str = DEFAULT_VERSION,
                 kind: str = KIND, hook: str | None = None,
                 record: Callable[[SpecRef | None], None] = lambda ref: None,
                 nvml_library: str | None = None) -> None:
        self.path = Path(os.path.abspath(cdi_dir)) / spec_file_name(kind)
        self.mountpoint = mountpoint
        self.version = version
        self.kind = kind
        self.hook = hook or hook_path()
        self.nvml_library = nvml_library or package_nvml_library()
        self.record = record
        self.dir: SpecDir | None = None
        self.sha256: str | None = None  # what the spec holds, as this daemon wrote it
        self.published = False
        self.closed = False  # retracted for good: the mount is going

    def prepare(self, left: SpecRef | None = None) -> None:
        """Before mounting: hold the CDI directory, remove the spec a killed predecessor left
        (``left``, from its record), and refuse a file at the spec's name that is not this
        daemon's. Raises ``CdiError``."""
        self.dir = SpecDir.open(self.path)
        if left is not None and Path(left.path) == self.path and left.dir == self.dir.identity \
                and self.dir.remove_if(left.sha256):
            log.warning("removed %s, a CDI spec left by a daemon that did not stop cleanly",
                        self.path)
        if self.dir.current() is not None:
            self.dir.close()
            raise CdiError(f"{self.path} exists and is not a spec this daemon's record says "
                           "it wrote; mokkafs replaces only its own: remove it if it is a "
                           "stale mokkafs spec, or choose another --cdi-kind")

    def publish(self, nodes: list[DeviceNode], machine: bool = True,
                nvml_driver: str | None = None) -> None:
        """Write the spec (unless retracted for good) of a view with the character devices
        ``nodes``, serving the machine if ``machine`` and NVML's place with the driver
        ``nvml_driver`` if not None. Raises ``CdiError``."""
        if self.closed or self.dir is None:
            return
        spec = build_spec(self.mountpoint, nodes, self.version, self.hook, self.kind, machine,
                          nvml_driver, self.nvml_library)
        validate(spec)
        data = (json.dumps(spec, indent=2) + "\n").encode()
        held = self.dir
        what = f"cannot write the CDI spec {self.path}"
        held.check_path(what)
        if held.current() not in (None, self.sha256):
            raise CdiError(f"{what}: a file mokkafs did not write took its place; it is left "
                           "as it is")
        new = digest(data)
        self.record(SpecRef(str(self.path), held.identity,
                            tuple(h for h in (self.sha256, new) if h)))
        try:
            held.write(data)
        except OSError as exc:
            raise CdiError(f"{what}: {exc.strerror}") from None
        self.sha256 = new
        self.record(SpecRef(str(self.path), held.identity, (new,)))
        self.published = True
        log.info("published CDI spec %s (kind %s)", self.path, self.kind)

    def retract(self) -> None:
        """Remove the spec this publisher wrote, for good, from the directory it wrote it to
        (never raises: it runs at shutdown)."""
        self.closed = True
        held, self.dir = self.dir, None
        if held is None:
            return
        try:
            if self.published and self.sha256 and held.remove_if((self.sha256,)):
                log.info("retracted CDI spec %s", self.path)
            self.record(None)
        except OSError as exc:
            log.error("could not retract CDI spec %s: %s", self.path, exc)
        finally:
            held.close()
            self.published = False
