"""What a daemon is started with: ``Config`` (what the command line decides about the
process) and ``Wiring`` (the collaborators it is built from). ``mokkafs.serve.wiring`` makes
both from ``mokkafs mount``'s arguments; a test may give others."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mokkafs.clock import Clock, SleepUntil
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.obs.status import Status
from mokkafs.serve import READY
from mokkafs.source import Source
from mokkafs.state import State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Surface
from mokkafs.tree.build import Tree


@dataclass(frozen=True)
class CdiConfig:
    dir: Path
    version: str
    kind: str
    hook: str | None = None
    nvml: str | None = None  # the NVML library's path on the host (default: the package's)


@dataclass(frozen=True)
class Config:
    """What the command line decides about the process."""

    mountpoint: Path
    cache_mode: CacheMode = CacheMode.KEEP_CACHE
    metrics: str | None = None
    health: str | None = None  # the probes' own listener: /healthz and /readyz
    control: Path | None = None
    # where run-time changes are kept across restarts (None: nowhere, as without --control
    # nothing changes at run time)
    state_dir: Path | None = None
    cdi: CdiConfig | None = None
    runtime_dir: Path = Path("/run/mokkafs-runtime")
    shutdown_seconds: float = 5.0
    writable: bool = False  # --writable: sysfs writes taken (docs/writes.md); else read-only
    nonempty: bool = False  # mount over a directory that holds files (they are hidden)
    # --host-dev: the directory (the host's /dev) to make the NVIDIA nodes in while serving
    host_dev: Path | None = None


def default_announce(state: State, tree: Tree, mountpoint: Path, mode: CacheMode) -> str:
    return (f"{READY} {state.source} as node {state.node_name} at {mountpoint} "
            f"(generation {state.generation}, {len(tree.entries)} inodes, "
            f"cache mode {mode.value})")


@dataclass
class Wiring:
    """The collaborators the process is built from (``mokkafs.serve.wiring.wire`` makes them;
    a test may give others): where State comes from, the surfaces, the clock dynamic files are
    read at, the /proc the host is seen through, the readiness line."""

    source: Source
    surfaces: Sequence[Surface[Any]] = SURFACES
    clock: Clock = time.monotonic
    # how to wait for ``clock`` to reach a time (None: sleep for the difference)
    sleep_until: SleepUntil | None = None
    proc: Path = Path("/proc")
    announce: Callable[[State, Tree, Path, CacheMode], str] = default_announce
    status: Status = field(default_factory=Status)
