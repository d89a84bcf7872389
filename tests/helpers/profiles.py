"""States and trees of the shipped profiles (and nvml-mock's), compiled as a test needs them:
a fixed node name, start and load times, and a fixed host /proc/devices."""

from __future__ import annotations

import functools
from pathlib import Path

from mokkafs.profile.options import Options
from mokkafs.serve import pipeline
from mokkafs.state import HostFacts, State
from mokkafs.tree.build import Tree
from mokkafs.tree.follow import follow
from mokkafs.tree.nodes import File
from tests.helpers.mounts import NVML_MOCK_PROFILES, SHIPPED_PROFILES

HOST_PROC_DEVICES = (
    "Character devices:\n  1 mem\n  4 tty\n  5 /dev/tty\n136 pts\n195 nvidia-old-name\n"
    "\nBlock devices:\n  7 loop\n259 blkext\n"
)


def state_of(profile: str | Path, node_name: str = "node-a", **kw: object) -> State:
    path = Path(profile) if isinstance(profile, Path) else SHIPPED_PROFILES / f"{profile}.yaml"
    kw.setdefault("host", HostFacts(HOST_PROC_DEVICES))
    opts = Options(node_name=node_name, started_at=0.0, loaded_at=1_700_000_000.0,
                   **kw)  # type: ignore[arg-type]
    return pipeline.compiled(path, opts)


def tree_of(state: State) -> Tree:
    return pipeline.tree_of(state)


# A DGX H100's first GPU and its compute NIC (mlx5_0), one PCIe switch apart
# (docs/profiles.md, "h100").
H100_GPU0 = "0000:1b:00.0"
H100_NIC0 = "0000:18:00.0"


@functools.cache
def device_path(bdf: str, profile: str = "h100") -> str:
    """The sysfs directory of function ``bdf`` in a shipped profile's view, relative to the
    mount (as the State places it: below its root complex and bridges)."""
    return state_of(profile).function(bdf).path


ALL_PROFILES: list[Path] = sorted(SHIPPED_PROFILES.glob("*.yaml")) + sorted(
    NVML_MOCK_PROFILES.glob("*.yaml"))


def profile_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def read_following_links(tree: Tree, rel: str, now: float = 0.0) -> bytes:
    """A file's content in ``tree`` at a mount-relative path, following symlinks the way the
    kernel resolves them through the mount (``mokkafs.tree.follow``)."""
    entry = tree.resolve(follow(tree, rel))
    assert entry is not None and isinstance(entry.node, File), rel
    return entry.node.read(now)
